"""The least an ASGI proxy can do per frame: read the upstream, send each read on.

An ASGI app that forwards a request to ``BENCH_UPSTREAM_PORT`` over HTTP/1.0 (so the
answer comes unframed, ended by the close: no chunked decoding to do) and sends every
read of the answer as one ``http.response.body`` message, as it comes. Served by
uvicorn, what it costs per streamed event is the floor under any ASGI middleware that
forwards each frame as it arrives (``bench/frame_floor.py``).

    BENCH_UPSTREAM_PORT=9000 python -m uvicorn bench.servers.asgi_relay:app --port 8002
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from bench._common import read_body

_PORT = int(os.environ.get("BENCH_UPSTREAM_PORT", "9000"))


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = await read_body(receive)
    reader, writer = await asyncio.open_connection("127.0.0.1", _PORT)
    try:
        query = scope["query_string"].decode()
        target = scope["path"] + ("?" + query if query else "")
        head = (
            f"POST {target} HTTP/1.0\r\nhost: 127.0.0.1:{_PORT}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        writer.write(head.encode() + body)
        status_line = (await reader.readuntil(b"\r\n\r\n")).split(b" ", 2)
        await send(
            {
                "type": "http.response.start",
                "status": int(status_line[1]),
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        while chunk := await reader.read(1 << 16):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        writer.close()
