"""The demo app's twins: the same routes, bodies and X-Worker-Pid header for other servers.

The lab runs these on the peers it compares headway with: `demo_asgi.py` (uvicorn, granian
--interface asgi), `demo.ru` (Puma, Rack 2) and `demo.js` (Node's http module); and, for its
throughput scenario, `flask_bench.py`: the demo's /hello, /json and /fortunes as a Flask app.
bench/versus.sh adds `fastapi_bench.py` (the JSON endpoint in FastAPI), `bodies.py` (large
uploads and downloads, WSGI) and `hello.py` (the smallest WSGI hello world: the server's own cost
a request).
"""
