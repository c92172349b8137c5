"""The transport seam (``proxai_asgi.transport.base``): the lean pool, httpx and the
wrapped app implement one ``Transport``, and ``Transports.choose`` picks the one that
reaches a target; one request goes through each, against a loopback server or the app."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.transport.base import Transport, Transports
from proxai_asgi.transport.http1 import Http1Pool
from proxai_asgi.transport.inner_transport import InnerTransport
from proxai_asgi.transport.upstream import HttpTransport

ANSWER = b'{"ok":true}'
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"


async def _app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"x-from", b"app")]})
    await send({"type": "http.response.body", "body": ANSWER})


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    await reader.readexactly(length)
    writer.write(HEAD + ANSWER)
    await writer.drain()
    writer.close()


def test_each_transport_implements_the_interface() -> None:
    transports = (Http1Pool(), HttpTransport(), InnerTransport(_app, {"type": "http"}))
    for transport in transports:
        assert isinstance(transport, Transport), type(transport).__name__


def test_the_middleware_opens_upstreams_through_its_transports() -> None:
    up = Upstream("openai_chat_completions", "http://127.0.0.1:9")
    assert isinstance(ProxaiMiddleware(_app, upstream=up).transports, Transports)


@pytest.mark.parametrize("which", ["lean", "httpx", "inner"])
def test_one_request_goes_through_each_transport_via_the_chooser(which: str) -> None:
    async def run() -> tuple[type, int, bytes]:
        server = await asyncio.start_server(_answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        http = HttpTransport()
        lean = Http1Pool() if which == "lean" else None
        transports = Transports(_app, http, lean)
        if which == "inner":
            up = Upstream.inner_app("openai_chat_completions", path="/v1/chat/completions")
            url = None
        else:
            up = Upstream("openai_chat_completions", f"http://127.0.0.1:{port}/v1")
            url = up.url
        scope = {"type": "http", "method": "POST", "path": "/x", "headers": []}
        try:
            chosen = transports.choose(up, url, scope, None)
            async with chosen.open(up, [], b"{}", raw=False, url=url) as resp:
                body = await resp.read()
            return type(chosen), resp.status, body
        finally:
            await http.aclose()
            if lean is not None:
                await lean.aclose()
            server.close()
            await server.wait_closed()

    kind, status, body = asyncio.run(asyncio.wait_for(run(), 10))
    expected = {"lean": Http1Pool, "httpx": HttpTransport, "inner": InnerTransport}[which]
    assert (kind, status, body) == (expected, 200, ANSWER)
