"""The JSON endpoint of the throughput benchmarks as a FastAPI app (`app`), for bench/versus.sh:
what a FastAPI user measures first (TechEmpower's "json"), served by headway, uvicorn and granian
with its ASGI interface alike."""

from fastapi import FastAPI

app = FastAPI()


# No return annotation: FastAPI would take it for a response model and validate every answer,
# work the other servers' apps do not do.
@app.get("/json")
async def json_message():
    return {"message": "Hello, World!"}
