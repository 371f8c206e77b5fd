"""headway: an application server with one queue.

The Rust `headway` binary is the front (it owns the clients and the single FIFO queue);
this package holds what runs behind it in Python: the bundled WSGI worker
(`python -m headway.worker`), the demo app it serves by default (`headway.demo`), and the
demo app's twins for the other servers the lab compares (`headway/twins/`).
"""
