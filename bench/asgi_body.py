"""The request body an ASGI app is sent, read whole (the benches' fake upstreams)."""

from __future__ import annotations

from typing import Any


async def read_body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body
