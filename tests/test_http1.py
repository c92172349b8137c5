"""The lean HTTP/1.1 pool (``proxai_asgi.transport.http1``) against scripted loopback servers.

Each test runs one event loop with a keep-alive-capable raw server on 127.0.0.1 whose
handler answers the requests of each connection as the test scripts them; the pool is
driven directly, as the middleware drives it. Every server is closed by its test, every
wait is bounded.
"""

from __future__ import annotations

import asyncio
import gzip
import ssl
import zlib
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.errors import ProxyError
from proxai_asgi.transport import http1, upstream
from proxai_asgi.transport.http1 import Http1Pool
from proxai_asgi.transport.upstream import HttpTransport
from tests.helpers.servers import serve

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


@dataclass
class Seen:
    connections: int = 0
    open_now: int = 0
    most_open: int = 0
    requests: list[bytes] = field(default_factory=list)  # request heads, in order


# A script answers one request: (the request's head, the connection's index of this
# request, reader, writer) -> False to close the connection afterwards.
Script = Callable[[bytes, int, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool | None]]


async def _serve(script: Script, seen: Seen, tls: ssl.SSLContext | None = None) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.connections += 1
        seen.open_now += 1
        seen.most_open = max(seen.most_open, seen.open_now)
        try:
            n = 0
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                seen.requests.append(head)
                keep = await script(head, n, reader, writer)
                await writer.drain()
                n += 1
                if keep is False:
                    return
        finally:
            seen.open_now -= 1
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)


def run(
    script: Script,
    test: Callable[[Any, Upstream, Seen], Coroutine[Any, Any, None]],
    tls: ssl.SSLContext | None = None,
    *,
    transport: str = "lean",
    **upstream_options: Any,
) -> Seen:
    """Serve ``script`` (over TLS with the server context ``tls``), run ``test``
    against a fresh pool (``transport="httpx"``: the httpx transport, which takes the
    same ``open`` calls), close everything."""
    seen = Seen()
    max_connections = upstream_options.pop("max_connections", 1000)

    async def main() -> None:
        server = await _serve(script, seen, tls)
        port = server.sockets[0].getsockname()[1]
        scheme = "https" if tls else "http"
        up = Upstream(
            "openai_chat_completions", f"{scheme}://127.0.0.1:{port}/v1", **upstream_options
        )
        pool: Http1Pool | HttpTransport = (
            HttpTransport(max_connections=max_connections)
            if transport == "httpx"
            else Http1Pool(max_connections=max_connections)
        )
        try:
            async with asyncio.timeout(10):
                await test(pool, up, seen)
        finally:
            await pool.aclose()
            server.close()
            await server.wait_closed()

    asyncio.run(main())
    return seen


async def fetch(pool: Http1Pool, up: Upstream, *, raw: bool = False) -> tuple[int, bytes]:
    async with pool.open(up, [(b"content-type", b"application/json")], b"{}", raw=raw) as r:
        return r.status, await r.read()


async def send_chunked(
    w: asyncio.StreamWriter,
    headers: bytes,
    pieces: list[bytes],
    between: Callable[[bytes], Awaitable[object]],
) -> None:
    """A chunked 200 answer, one chunk per piece; ``between(piece)`` is awaited after
    each piece is flushed."""
    w.write(b"HTTP/1.1 200 OK\r\n" + headers + b"Transfer-Encoding: chunked\r\n\r\n")
    for piece in pieces:
        w.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        await w.drain()
        await between(piece)
    w.write(b"0\r\n\r\n")


async def answer_ok(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> None:
    w.write(OK)


# ------------------------------------------------------------------- keep-alive


def test_sequential_requests_reuse_one_keep_alive_connection() -> None:
    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        for _ in range(5):
            assert await fetch(pool, up) == (200, b"{}")
        assert pool.idle == 1 and pool.in_flight == 0

    seen = run(answer_ok, test)
    assert seen.connections == 1 and len(seen.requests) == 5


def test_request_carries_host_path_length_and_asks_identity_only_when_translating() -> None:
    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        await fetch(pool, up, raw=False)
        await fetch(pool, up, raw=True)

    seen = run(answer_ok, test)
    translated, passthrough = (h.lower() for h in seen.requests)
    assert translated.startswith(b"post /v1/chat/completions http/1.1\r\n")
    assert b"\r\nhost: 127.0.0.1:" in translated
    assert b"\r\ncontent-length: 2\r\n" in translated
    assert b"accept-encoding: identity" in translated
    assert b"accept-encoding" not in passthrough  # pass-through: the client's, or none


def test_connection_close_answer_is_not_reused() -> None:
    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
        return False

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        for _ in range(3):
            assert await fetch(pool, up) == (200, b"{}")
        assert pool.idle == 0

    assert run(script, test).connections == 3


def test_chunked_and_close_delimited_bodies_arrive_whole() -> None:
    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        if n == 0:
            w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for part in (b'{"a":', b"1}"):
                w.write(b"%x\r\n%s\r\n" % (len(part), part))
            w.write(b"0\r\n\r\n")
            return True
        w.write(b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 100_000)  # no length: read to close
        return False

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        assert await fetch(pool, up) == (200, b'{"a":1}')
        assert await fetch(pool, up) == (200, b"x" * 100_000)
        assert pool.idle == 0

    assert run(script, test).connections == 1


# ------------------------------------------------------------- stale connections


def test_idle_connection_the_server_closed_is_replaced() -> None:
    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        w.write(OK)
        return False  # a keep-alive timeout: closed without saying so

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        assert await fetch(pool, up) == (200, b"{}")
        await asyncio.sleep(0.05)  # the close reaches the parked connection
        assert await fetch(pool, up) == (200, b"{}")

    seen = run(script, test)
    assert seen.connections == 2 and len(seen.requests) == 2


def test_idle_connection_with_unsolicited_bytes_is_discarded() -> None:
    """A server that writes a 408 to an idle connection before closing it: that 408
    must not be taken as the answer to the next request."""

    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        w.write(OK)
        await w.drain()
        await asyncio.sleep(0.02)
        w.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
        await asyncio.sleep(0.5)
        return False

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        assert await fetch(pool, up) == (200, b"{}")
        await asyncio.sleep(0.1)
        assert await fetch(pool, up) == (200, b"{}")

    assert run(script, test).connections == 2


def test_reused_connection_closed_before_answering_is_retried_once_on_a_new_one() -> None:
    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        if n == 0:
            w.write(OK)
            return True
        return False  # the second request on this connection: closed unanswered

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        assert await fetch(pool, up) == (200, b"{}")
        assert await fetch(pool, up) == (200, b"{}")

    seen = run(script, test)
    assert seen.connections == 2 and len(seen.requests) == 3


def test_fresh_connection_closed_before_answering_is_a_502_without_retry() -> None:
    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        return False

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        with pytest.raises(ProxyError) as err:
            await fetch(pool, up)
        assert err.value.status == 502

    assert len(run(script, test).requests) == 1


TRANSPORTS = pytest.mark.parametrize("transport", ["lean", "httpx"])


@TRANSPORTS
def test_body_left_unread_by_a_failing_caller_closes_the_connection_at_once(
    transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client disconnect (or any error) must reach the upstream: no draining."""
    monkeypatch.setattr(http1, "_DRAIN_GRACE", 60.0)  # a drain would outlast the test
    monkeypatch.setattr(upstream, "_READ_OUT_GRACE", 60.0)

    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await w.drain()
        await r.read()  # until the pool closes its side
        return False

    async def test(pool: Http1Pool | HttpTransport, up: Upstream, seen: Seen) -> None:
        with pytest.raises(RuntimeError):
            async with pool.open(up, [], b"{}", raw=True) as resp:
                assert await anext(aiter(resp)) == b"hello"
                raise RuntimeError("the client went away")
        assert not isinstance(pool, Http1Pool) or (pool.idle == 0 and pool.in_flight == 0)
        for _ in range(200):
            if seen.open_now == 0:
                break
            await asyncio.sleep(0.01)
        assert seen.open_now == 0  # closed now, not after a drain

    run(script, test, transport=transport)


def test_httpx_lets_a_body_that_does_not_end_go_after_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The httpx transport reads a finished caller's rest in its own exit: a body that
    never ends is given up (its connection closed) after the grace, not waited for."""
    monkeypatch.setattr(upstream, "_READ_OUT_GRACE", 0.2)
    closed = asyncio.Event()

    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await w.drain()
        await r.read()
        closed.set()
        return False

    async def test(pool: HttpTransport, up: Upstream, seen: Seen) -> None:
        async with pool.open(up, [], b"{}", raw=True) as resp:
            assert await anext(aiter(resp)) == b"hello"
        await closed.wait()  # (bounded by run's timeout)

    run(script, test, transport="httpx")


@TRANSPORTS
def test_terminator_arriving_after_the_caller_is_done_keeps_the_connection(
    transport: str,
) -> None:
    """A translated stream stops at its protocol's last event; the chunked terminator
    that follows a little later is read after it (the lean pool: in the background)
    and the connection kept."""

    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await w.drain()
        await asyncio.sleep(0.05)
        w.write(b"0\r\n\r\n")

    async def test(pool: Http1Pool | HttpTransport, up: Upstream, seen: Seen) -> None:
        for _ in range(3):
            async with pool.open(up, [], b"{}", raw=True) as resp:
                assert await anext(aiter(resp)) == b"hello"
            await asyncio.sleep(0.15)
            assert not isinstance(pool, Http1Pool) or pool.idle == 1

    assert run(script, test, transport=transport).connections == 1


@TRANSPORTS
def test_terminator_read_with_the_last_event_keeps_the_connection_at_once(
    transport: str,
) -> None:
    """The usual end of a translated stream: its last event and the chunked terminator
    come in one read, and the caller stops at the event. The body is complete, so the
    connection goes back to the pool as the caller leaves (it used to wait out the
    drain grace for bytes that had already come, then close)."""

    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")

    async def test(pool: Http1Pool | HttpTransport, up: Upstream, seen: Seen) -> None:
        for _ in range(3):
            async with pool.open(up, [], b"{}", raw=True) as resp:
                assert await anext(aiter(resp)) == b"hello"
            assert not isinstance(pool, Http1Pool) or pool.idle == 1

    assert run(script, test, transport=transport).connections == 1


def test_closing_the_pool_closes_a_connection_still_being_drained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``aclose`` (a lifespan shutdown) ends connections whose body is still read in
    the background too: left open, they outlive the event loop and the upstream waits
    for them (a TLS upstream for a close_notify that never comes)."""
    monkeypatch.setattr(http1, "_DRAIN_GRACE", 60.0)  # only aclose can close it here
    closed = asyncio.Event()

    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await w.drain()
        await r.read()  # until the pool closes its side
        closed.set()
        return False

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        async with pool.open(up, [], b"{}", raw=True) as resp:
            assert await anext(aiter(resp)) == b"hello"
        await asyncio.sleep(0)
        assert seen.open_now == 1 and pool.idle == 0  # draining, not parked
        await pool.aclose()
        await closed.wait()  # (bounded by run's timeout, far below the grace)

    run(script, test)


def test_body_that_does_not_end_after_the_caller_is_done_is_closed_after_a_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rest of a body is read in the background until the grace runs out; then the
    connection is closed, not parked: what decides it is the grace's timer, whose
    handle the pool's loop holds (asserted as a state, not as a time)."""
    monkeypatch.setattr(http1, "_DRAIN_GRACE", 0.3)
    timers: list[asyncio.TimerHandle] = []

    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await w.drain()
        await r.read()
        return False

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        loop = asyncio.get_running_loop()
        call_later = loop.call_later

        def recorded(delay: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
            handle = call_later(delay, callback, *args)
            if delay == http1._DRAIN_GRACE:
                timers.append(handle)
            return handle

        monkeypatch.setattr(loop, "call_later", recorded)
        async with pool.open(up, [], b"{}", raw=True) as resp:
            assert await anext(aiter(resp)) == b"hello"
        (conn,) = pool._draining  # read on in the background, not closed at once
        assert conn.wire.transport is not None and not conn.wire.transport.is_closing()
        assert len(timers) == 1 and not timers[0].cancelled()
        for _ in range(300):
            if seen.open_now == 0:
                break
            await asyncio.sleep(0.01)
        assert seen.open_now == 0 and not pool._draining and pool.idle == 0

    run(script, test)


# ---------------------------------------------------------------- bodies, limits


def test_gzip_body_is_decoded_when_translating_and_relayed_as_is_in_pass_through() -> None:
    packed = gzip.compress(b'{"ok":true}')

    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> None:
        w.write(
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s"
            % (len(packed), packed)
        )

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        assert await fetch(pool, up, raw=False) == (200, b'{"ok":true}')
        assert await fetch(pool, up, raw=True) == (200, packed)

    run(script, test)


def _deflate(data: bytes, *, wrapped: bool) -> bytes:
    packer = zlib.compressobj(wbits=zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize("wrapped", [True, False], ids=["zlib", "raw"])
@pytest.mark.parametrize("first", [1, 2, None], ids=["1-byte-read", "2-byte-read", "one-read"])
def test_deflate_body_decodes_with_or_without_its_zlib_header(
    wrapped: bool, first: int | None
) -> None:
    """httpx decodes ``deflate`` raw when the zlib header is missing; so does the pool,
    however the first bytes are cut across reads (chunks flushed one by one)."""
    answer = b'{"ok":true,"text":"' + b"abc" * 50 + b'"}'
    packed = _deflate(answer, wrapped=wrapped)
    assert packed[:2] != answer[:2]
    pieces = [packed[:first], packed[first:]] if first else [packed]

    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> None:
        # sleep(0): each piece goes out as its own read
        await send_chunked(w, b"Content-Encoding: deflate\r\n", pieces, lambda _: asyncio.sleep(0))

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        assert await fetch(pool, up, raw=False) == (200, answer)
        assert await fetch(pool, up, raw=True) == (200, packed)

    run(script, test)


def test_a_body_that_is_not_deflate_is_a_502() -> None:
    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nContent-Length: 9\r\n\r\n")
        w.write(b"\xff" * 9)

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        with pytest.raises(ProxyError) as err:
            await fetch(pool, up, raw=False)
        assert err.value.status == 502 and "deflate" in str(err.value)

    run(script, test)


def test_unknown_content_encoding_is_a_502_when_translating() -> None:
    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 3\r\n\r\nabc")

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        with pytest.raises(ProxyError) as err:
            await fetch(pool, up, raw=False)
        assert err.value.status == 502 and "content-encoding" in str(err.value)
        assert await fetch(pool, up, raw=True) == (200, b"abc")

    run(script, test)


def test_at_most_max_connections_requests_are_in_flight() -> None:
    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.05)
        w.write(OK)

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        results = await asyncio.gather(*(fetch(pool, up) for _ in range(6)))
        assert results == [(200, b"{}")] * 6

    seen = run(script, test, max_connections=2)
    assert seen.most_open <= 2 and len(seen.requests) == 6


def test_header_wait_past_read_timeout_is_a_504() -> None:
    held = asyncio.Event()  # set once the upstream stops holding the request

    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(2)
        held.set()
        return False

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        with pytest.raises(ProxyError) as err:
            await fetch(pool, up)
        assert err.value.status == 504 and "timed out" in str(err.value)
        assert not held.is_set()  # the timeout decided, while the upstream still held it

    run(script, test, read_timeout=0.2)


def test_body_stalling_past_read_timeout_is_a_504() -> None:
    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{")
        await w.drain()
        await asyncio.sleep(2)
        return False

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        with pytest.raises(ProxyError) as err:
            await fetch(pool, up)
        assert err.value.status == 504 and "stopped sending" in str(err.value)

    run(script, test, read_timeout=0.2)


def test_invalid_http_from_the_upstream_is_a_502() -> None:
    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> bool:
        w.write(b"SMTP ready\r\n\r\n")
        return False

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        with pytest.raises(ProxyError) as err:
            await fetch(pool, up)
        assert err.value.status == 502

    run(script, test)


def test_refused_connection_is_a_502() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        pool = Http1Pool()
        up = Upstream("openai_chat_completions", f"http://127.0.0.1:{port}/v1")
        with pytest.raises(ProxyError) as err:
            await fetch(pool, up)
        assert err.value.status == 502 and "unreachable" in str(err.value)

    asyncio.run(main())


def test_a_connection_left_idle_by_another_event_loop_is_not_reused() -> None:
    """One pool, two ``asyncio.run`` calls (as Starlette's TestClient runs each
    request): the second gets a fresh connection instead of waiting on a dead loop."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    pool = Http1Pool()
    with serve(app) as url:
        up = Upstream("openai_chat_completions", url + "/v1", read_timeout=5)
        for _ in range(2):
            assert asyncio.run(fetch(pool, up)) == (200, b"{}")
            assert pool.idle == 1


# ------------------------------------------------------------------- who uses it


def test_http_and_https_upstreams_without_an_environment_proxy_use_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http", "https", "all", "no"):
        monkeypatch.delenv(f"{name}_proxy", raising=False)
        monkeypatch.delenv(f"{name.upper()}_PROXY", raising=False)
    plain = Upstream("openai_chat_completions", "http://10.0.0.5:8000/v1")
    tls = Upstream("openai_chat_completions", "https://api.openai.com/v1")
    other = Upstream("openai_chat_completions", "ftp://10.0.0.5/v1")

    async def serves(up: Upstream) -> bool:
        return Http1Pool().serves(up)

    assert asyncio.run(serves(plain)) and asyncio.run(serves(tls))
    assert not asyncio.run(serves(other))
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    assert not asyncio.run(serves(plain)) and asyncio.run(serves(tls))
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert not asyncio.run(serves(tls))
    monkeypatch.setenv("NO_PROXY", "10.0.0.5,api.openai.com")
    assert asyncio.run(serves(plain)) and asyncio.run(serves(tls))
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setenv("ALL_PROXY", "http://proxy.internal:3128")
    assert not asyncio.run(serves(plain)) and not asyncio.run(serves(tls))


def test_middleware_uses_the_pool_by_default_and_httpx_when_asked_or_given_a_client() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    up = Upstream("openai_chat_completions", "http://127.0.0.1:9/v1")
    assert ProxaiMiddleware(app, upstream=up).lean is not None
    assert ProxaiMiddleware(app, upstream=up, lean_http=False).lean is None
    given = httpx.AsyncClient()
    assert ProxaiMiddleware(app, upstream=up, http_client=given).lean is None
