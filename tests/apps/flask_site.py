"""A Flask app with no ProxyFix: what Flask concludes about the request comes from the environ
the server builds alone."""

from flask import Flask, jsonify, request, url_for

app = Flask(__name__)


@app.get("/whoami")
def whoami():
    return jsonify(secure=request.is_secure, client=request.remote_addr,
                   url=url_for("whoami", _external=True))
