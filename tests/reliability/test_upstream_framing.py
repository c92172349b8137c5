"""An upstream's framing is never the client's: over-sent bytes, a Content-Length that
contradicts Transfer-Encoding, and a reused connection closed after the upstream held
the request (issue 26, defect 16 and the lean pool's resend).

The upstream is ``_keepalive.Upstream1``; the client reaches the middleware through
``httpx.ASGITransport`` (or ASGI messages when the headers are the point).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.transport import http1
from proxai_asgi.transport.upstream import Message

from ._keepalive import (
    TRANSPORTS,
    Upstream1,
    chat_json,
    chat_sse,
    chunked_answer,
    length_answer,
    request_body,
    run,
)
from .corpus import ANTHROPIC, CHAT, PATH

# ------------------------------------------------------------ over-sent bytes

EVIL = "EVIL-stray-answer"
# What an over-sending upstream leaves after its answer: a whole answer of its own,
# which a reused connection would hand to the next request as that request's answer.
STRAY = {
    "length": length_answer(chat_json(EVIL)),
    "chunked": length_answer(chat_sse(EVIL), b"text/event-stream"),
}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("client", [CHAT, ANTHROPIC])  # pass-through, translated
@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_connection_whose_answer_over_sent_is_never_reused(
    transport: str, client: str, framing: str
) -> None:
    """Bytes after the end of the first answer (past its Content-Length, or after the
    chunked terminator) must not become the second client's answer."""
    stream = framing == "chunked"

    async def script(n: int, w: asyncio.StreamWriter) -> bool:
        text = f"answer-{n}"
        answer = chunked_answer(chat_sse(text)) if stream else length_answer(chat_json(text))
        w.write(answer + STRAY[framing] if n == 0 else answer)  # one write: one read
        return True

    async def test(mw: ProxaiMiddleware, http: httpx.AsyncClient, up: Upstream1) -> None:
        for n in range(2):
            r = await http.post(
                PATH[client],
                content=request_body(client, f"q{n}", stream=stream),
                headers={"content-type": "application/json"},
            )
            assert r.status_code == 200, r.text
            assert f"answer-{n}" in r.text and EVIL not in r.text

    upstream = run(script, CHAT, transport, test)
    assert len(upstream.requests) == 2 and upstream.connections == 2


# --------------------------------------------------- Content-Length with chunked


async def _asgi(mw: ProxaiMiddleware, path: str, body: bytes) -> list[Message]:
    """The ASGI messages the middleware sends for one request."""
    sent: list[Message] = []
    given = False

    async def receive() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(30)
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    await mw(scope, receive, send)
    return sent


def _both_framings(body: bytes, ctype: bytes, length: int) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: "
        + ctype
        + b"\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % length
        + b"%x\r\n" % len(body)
        + body
        + b"\r\n0\r\n\r\n"
    )


def _contradicting_answers() -> dict[str, tuple[bytes, bytes]]:
    sse, plain = chat_sse("framed-by-chunks"), chat_json("framed-by-chunks")
    return {
        "stream": (_both_framings(sse, b"text/event-stream", len(sse) + 500), sse),
        "json": (_both_framings(plain, b"application/json", len(plain) + 500), plain),
    }


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("kind", ["stream", "json"])
def test_pass_through_never_forwards_a_content_length_beside_transfer_encoding(
    transport: str, kind: str
) -> None:
    """An upstream that sends Content-Length and Transfer-Encoding: chunked: the body
    is framed by the chunks (RFC 9112 §6.3), so that length is not the body's; the
    client's framing is ours (the ASGI server frames what we send)."""
    answer, body = _contradicting_answers()[kind]

    async def script(n: int, w: asyncio.StreamWriter) -> bool:
        w.write(answer)
        return False

    async def test(mw: ProxaiMiddleware, http: httpx.AsyncClient, up: Upstream1) -> None:
        sent = await _asgi(mw, PATH[CHAT], request_body(CHAT, "q", stream=kind == "stream"))
        start = sent[0]
        assert start["type"] == "http.response.start" and start["status"] == 200
        names = [k.lower() for k, _ in start["headers"]]
        assert b"content-length" not in names and b"transfer-encoding" not in names
        got = b"".join(m.get("body", b"") for m in sent[1:])
        assert got == body
        assert sent[-1].get("more_body", False) is False

    run(script, CHAT, transport, test)


async def _inner_both_framings(scope: Any, receive: Any, send: Any) -> None:
    """A wrapped app that sends a Content-Length beside its own Transfer-Encoding."""
    sse = chat_sse("framed-by-chunks")
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream"),
                (b"content-length", str(len(sse) + 500).encode()),
                (b"transfer-encoding", b"chunked"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": sse, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def test_pass_through_from_the_wrapped_app_drops_a_content_length_beside_transfer_encoding() -> (
    None
):
    mw = ProxaiMiddleware(_inner_both_framings, upstream=Upstream.inner_app(CHAT))

    async def main() -> list[Message]:
        async with asyncio.timeout(10):
            return await _asgi(mw, PATH[CHAT], request_body(CHAT, "q", stream=True))

    sent = asyncio.run(main())
    names = [k.lower() for k, _ in sent[0]["headers"]]
    assert b"content-length" not in names
    assert b"".join(m.get("body", b"") for m in sent[1:]) == chat_sse("framed-by-chunks")


# ------------------------------------------------------ the lean pool's resend


def _close_after(delay: float) -> Callable[[int, asyncio.StreamWriter], Awaitable[bool]]:
    """Answer the first request keep-alive; hold the second for ``delay``, then close
    its connection without a byte of answer (a crash, a proxy's timeout)."""

    async def script(n: int, w: asyncio.StreamWriter) -> bool:
        if n == 0:
            w.write(length_answer(chat_json("answer-0")))
            return True
        if n == 1:
            await asyncio.sleep(delay)
            return False
        w.write(length_answer(chat_json(f"answer-{n}")))
        return True

    return script


@pytest.mark.parametrize("client", [CHAT, ANTHROPIC])  # pass-through, translated
def test_reused_connection_closed_after_the_upstream_held_the_request_is_not_resent(
    client: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The upstream may have processed (and billed) a request it held before closing:
    the pool does not resend it behind the client's back (it counts and logs it); with
    no retry left to the routing policy, the client gets a 502 in its own shape."""
    monkeypatch.setattr(http1, "RESEND_WINDOW", 0.02)

    async def test(mw: ProxaiMiddleware, http: httpx.AsyncClient, up: Upstream1) -> None:
        path = PATH[client]
        first = await http.post(path, content=request_body(client, "q0", stream=False))
        assert first.status_code == 200 and "answer-0" in first.text
        with caplog.at_level(logging.WARNING, logger="proxai_asgi"):
            r = await http.post(path, content=request_body(client, "q1", stream=False))
        assert r.status_code == 502
        err = r.json()
        if client == CHAT:
            assert err["error"]["type"] and err["error"]["message"]
        else:
            assert err["type"] == "error" and err["error"]["message"]
        assert mw.lean is not None and mw.lean.not_resent == 1
        assert "not resent" in caplog.text

    upstream = run(_close_after(0.2), CHAT, "lean", test, max_retries=0)
    assert len(upstream.requests) == 2  # the held request reached it exactly once


def test_a_held_request_the_upstream_dropped_is_retried_only_as_a_routing_attempt(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With retries left, the routing policy (not the pool) asks again, and says so."""
    monkeypatch.setattr(http1, "RESEND_WINDOW", 0.02)

    async def test(mw: ProxaiMiddleware, http: httpx.AsyncClient, up: Upstream1) -> None:
        first = await http.post(PATH[CHAT], content=request_body(CHAT, "q0", stream=False))
        assert first.status_code == 200
        with caplog.at_level(logging.INFO, logger="proxai_asgi"):
            r = await http.post(PATH[CHAT], content=request_body(CHAT, "q1", stream=False))
        assert r.status_code == 200
        assert mw.lean is not None and mw.lean.not_resent == 1
        assert "attempt failed" in caplog.text and "class=target" in caplog.text

    upstream = run(_close_after(0.2), CHAT, "lean", test)
    assert len(upstream.requests) == 3  # the held one, then the routing policy's retry


def test_reused_connection_closed_at_once_is_still_resent_once() -> None:
    """A close that comes at once (the upstream's keep-alive timeout crossing our
    request) cannot have processed it: resent on a new connection, as before."""

    async def test(mw: ProxaiMiddleware, http: httpx.AsyncClient, up: Upstream1) -> None:
        for n, answer in ((0, "answer-0"), (1, "answer-2")):
            r = await http.post(PATH[CHAT], content=request_body(CHAT, f"q{n}", stream=False))
            assert r.status_code == 200 and answer in r.text
        assert mw.lean is not None and mw.lean.not_resent == 0

    upstream = run(_close_after(0.0), CHAT, "lean", test)
    assert len(upstream.requests) == 3 and upstream.connections == 2
