"""An app that hands its response's file to the front, as Rails' Rack::Sendfile and
django-sendfile2 do: a WSGI app (`handoff:app`) and the same as a `--cmd` worker
(`python handoff.py SOCKET`).

Every request is answered with an empty body and the fields its query asks for: `accel=URI`
(X-Accel-Redirect), `sendfile=PATH` (X-Sendfile), `status=`, `type=` (Content-Type),
`disposition=` (Content-Disposition), and `pad=N`: a body of N bytes after all, which the front
must drop. A request that asks for neither gets, as its body, the hand-off fields the front told
it (X-Sendfile-Type and X-Accel-Mapping), one a line.
"""

import sys
from urllib.parse import parse_qs


def answer(query, headers):
    """(status, fields, body) for a request with `query` and the request `headers` (a dict with
    lower-case names)."""
    params = {name: values[0] for name, values in parse_qs(query).items()}
    fields = []
    for param, name in (("accel", "X-Accel-Redirect"), ("sendfile", "X-Sendfile"), ("type", "Content-Type"),
                        ("disposition", "Content-Disposition")):
        if param in params:
            fields.append((name, params[param]))
    body = b"x" * int(params.get("pad", 0))
    if "accel" not in params and "sendfile" not in params:
        told = [f"{name}: {headers.get(name.lower(), '-')}" for name in ("X-Sendfile-Type", "X-Accel-Mapping")]
        body = "\n".join(told).encode()
    fields.append(("Content-Length", str(len(body))))
    return params.get("status", "200 OK"), fields, body


def app(environ, start_response):
    headers = {key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_")}
    status, fields, body = answer(environ.get("QUERY_STRING", ""), headers)
    start_response(status, fields)
    return [body]


if __name__ == "__main__":
    from unix_http import OkHandler, Server

    class Handler(OkHandler):
        def do_GET(self):
            _, _, query = self.path.partition("?")
            status, fields, body = answer(query, {name.lower(): value for name, value in self.headers.items()})
            code, _, reason = status.partition(" ")
            self.send_response(int(code), reason or None)
            for name, value in fields:
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_HEAD = do_GET

    Server(sys.argv[1], Handler).serve_forever()
