"""A keep-alive raw upstream for the transport tests, and the Chat answers they send.

``Upstream1`` is an asyncio server on 127.0.0.1 that reads HTTP/1.1 requests one after
another on each connection and answers each as the test scripts it (bytes as they
are, over-sent or contradictory framing included). ``run`` puts it behind a
middleware reached through ``httpx.ASGITransport``, all on one event loop, bounded by
``asyncio.timeout``; everything it starts, it stops.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.transport.upstream import ASGIApp

from .corpus import GEMINI, RESPONSES, base

TRANSPORTS = ["lean", "httpx"]


def chat_json(text: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()


def chat_sse(text: str) -> bytes:
    def frame(delta: dict[str, Any], finish: str | None) -> bytes:
        chunk = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    return (
        frame({"role": "assistant", "content": text}, None)
        + frame({}, "stop")
        + b"data: [DONE]\n\n"
    )


def length_answer(body: bytes, ctype: bytes = b"application/json") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: " + ctype + b"\r\nContent-Length: %d\r\n\r\n" % len(body)
    ) + body


def chunked_answer(body: bytes, ctype: bytes = b"text/event-stream") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: "
        + ctype
        + b"\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % len(body)
        + body
        + b"\r\n0\r\n\r\n"
    )


@dataclass
class Upstream1:
    """A keep-alive raw upstream: ``script(n, writer)`` answers the n-th request
    (counted over all connections) and returns False to close the connection."""

    script: Callable[[int, asyncio.StreamWriter], Awaitable[bool]]
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    _open: dict[asyncio.Task[None], asyncio.StreamWriter] = field(default_factory=dict)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._open[task] = writer  # type: ignore[assignment]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                n = len(self.requests)
                self.requests.append(body)
                keep = await self.script(n, writer)
                await writer.drain()
                if not keep:
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self._open.pop(task, None)  # type: ignore[arg-type]

    async def close(self) -> None:
        """Close the connections still open and wait for their handlers."""
        for writer in self._open.values():
            writer.close()
        if self._open:
            await asyncio.wait(list(self._open), timeout=2)


async def _no_app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("the wrapped app is not reached")


def run(
    script: Callable[[int, asyncio.StreamWriter], Awaitable[bool]],
    upstream_protocol: str,
    transport: str,
    test: Callable[[ProxaiMiddleware, httpx.AsyncClient, Upstream1], Coroutine[Any, Any, None]],
    inner: ASGIApp = _no_app,
    **options: Any,
) -> Upstream1:
    """Serve ``script``, run ``test`` against a middleware whose upstream speaks
    ``upstream_protocol`` over ``transport`` ("lean", "httpx", or "inner": the wrapped
    app ``inner`` as the upstream), close everything."""
    upstream = Upstream1(script)

    async def main() -> None:
        server = await asyncio.start_server(upstream.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        base_url = f"http://127.0.0.1:{port}" + ("" if upstream_protocol == GEMINI else "/v1")
        if transport == "inner":
            mw = ProxaiMiddleware(inner, upstream=Upstream.inner_app(upstream_protocol))  # type: ignore[arg-type]
        else:
            up = Upstream(upstream_protocol, base_url, "sk-up", **options)  # type: ignore[arg-type]
            mw = ProxaiMiddleware(inner, upstream=up, lean_http=transport == "lean")
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=mw), base_url="http://proxy", timeout=10
        )
        try:
            async with asyncio.timeout(10):
                await test(mw, client, upstream)
        finally:
            await client.aclose()
            await mw.aclose()
            await upstream.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())
    return upstream


def request_body(client: str, text: str, *, stream: bool) -> bytes:
    body = base(client)
    if client == GEMINI:
        body["contents"][0]["parts"][0]["text"] = text
    elif client == RESPONSES:
        body["input"][0]["content"] = text
        body["stream"] = stream
    else:
        body["messages"][0]["content"] = text
        body["stream"] = stream
    return json.dumps(body).encode()
