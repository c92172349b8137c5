"""The upstream of ``bench/idle_streams.py``: every streaming request gets its first
Chat event, then nothing until the client goes away.

    python -m uvicorn bench.servers.idle_upstream:app --port 9000
"""

from __future__ import annotations

from typing import Any

FIRST = (b'data: {"id":"chatcmpl-idle","object":"chat.completion.chunk","created":1,'
         b'"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},'
         b'"finish_reason":null}]}\n\n')  # fmt: skip


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while True:
        m = await receive()
        if not m.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})  # fmt: skip
    await send({"type": "http.response.body", "body": FIRST, "more_body": True})
    while (await receive())["type"] != "http.disconnect":
        pass
