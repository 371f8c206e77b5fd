"""The demo's throughput workloads as a Flask app (`app`), for the lab's throughput scenario.

/hello, /json through Flask's own JSON (jsonify) and /fortunes through a Jinja template, with the
demo's sqlite query (headway.demo.fortune_rows): a framework's cost per request, next to each
WSGI server's own. headway, gunicorn and granian serve it where Flask is installed. Its answers
are the demo app's, byte for byte, plus Flask's 404 page for every other path.
"""

import os

from flask import Flask, Response, jsonify, render_template
from jinja2 import DictLoader

from headway.demo import fortune_rows

app = Flask(__name__)
# The template lives here rather than in a templates/ folder, so that this one file is the app
# wherever the lab writes it; Flask autoescapes .html templates.
app.jinja_loader = DictLoader({
    "fortunes.html": (
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body>"
        "<table><tr><th>id</th><th>message</th></tr>"
        "{% for fortune_id, message in fortunes %}<tr><td>{{ fortune_id }}</td><td>{{ message }}</td></tr>{% endfor %}"
        "</table></body></html>"
    ),
})


@app.get("/hello")
def hello() -> Response:
    return Response("Hello, world!\n", mimetype="text/plain")


@app.get("/json")
def json_message() -> Response:
    return jsonify(message="Hello, World!")


@app.get("/fortunes")
def fortunes() -> str:
    return render_template("fortunes.html", fortunes=fortune_rows())


@app.after_request
def name_the_worker(response: Response) -> Response:
    # The lab counts each worker's share of the requests by this header, as with the demo app.
    response.headers["X-Worker-Pid"] = str(os.getpid())
    return response
