"""Unit tests of the worker's Python parts that need no server (the demo app).

The HTTP parsing, framing and PEP 3333 objects are native now; their unit tests are in
crates/worker (`cargo test -p headway-worker`).
"""

import os

from headway.demo import app

# --- the demo app ----------------------------------------------------------------------

def test_demo_names_the_process_it_runs_in_even_after_fork():

    def pid_header(environ):
        seen = {}
        app(environ, lambda status, headers: seen.update(headers))
        return seen["X-Worker-Pid"]

    environ = {"PATH_INFO": "/hello", "QUERY_STRING": ""}
    assert pid_header(environ) == str(os.getpid())
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child reports what the demo says its pid is, then leaves at once
        os.write(write_end, pid_header(environ).encode())
        os._exit(0)
    os.close(write_end)
    reported = os.read(read_end, 64).decode()
    os.close(read_end)
    os.waitpid(child, 0)
    assert reported == str(child)
