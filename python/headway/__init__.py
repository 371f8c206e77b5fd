"""headway: an application server with one queue.

The Rust front owns the clients and the single FIFO queue; `headway._native` (built from
crates/extension) holds it as the `headway` command (`__main__`) and the native core of the
bundled WSGI worker (`python -m headway.worker`). In Python: the worker's command line, the
demo app it serves by default (`headway.demo`), and the demo app's twins for the other
servers the lab compares (`headway/twins/`).
"""

# With this source tree first on PYTHONPATH (the tests run it so) and headway installed too,
# `headway._native` is found in the installed package.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)
