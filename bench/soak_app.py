"""The app bench/soak.sh serves: the demo app as ASGI (its HTTP endpoints) with a WebSocket echo
on any WebSocket path, so one bundled worker takes both kinds of traffic."""

from headway.twins.demo_asgi import app as demo


async def app(scope, receive, send):
    if scope["type"] != "websocket":
        await demo(scope, receive, send)
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message.get("bytes") is not None:
            await send({"type": "websocket.send", "bytes": message["bytes"]})
        else:
            await send({"type": "websocket.send", "text": message.get("text") or ""})
