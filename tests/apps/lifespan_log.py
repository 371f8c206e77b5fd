"""The lifespan the FastAPI and Starlette test apps share (both take the same async context
manager): startup appends "startup PID" to the file $LIFESPAN_LOG, if set, and leaves a greeting
in the lifespan state; shutdown appends "shutdown PID". With $FAIL_STARTUP set, startup raises."""

import os
from contextlib import asynccontextmanager


@asynccontextmanager
async def lifespan(app):
    if os.environ.get("FAIL_STARTUP"):
        raise RuntimeError("the database is down")
    _note("startup")
    yield {"greeting": "hello from startup"}
    _note("shutdown")


def _note(event):
    if "LIFESPAN_LOG" in os.environ:
        with open(os.environ["LIFESPAN_LOG"], "a") as log:
            log.write(f"{event} {os.getpid()}\n")
