"""The lean HTTP/1.1 client: the middleware's default transport for ``http://`` and
``https://`` upstreams (vLLM, Ollama, gateways on the LAN, the providers' APIs).

Why not httpx here: on loopback ``httpx.AsyncClient`` spends about 0.5 ms per request
above the round trip (client, transport and connection-pool layers, an
``anyio.fail_after`` of ~12 µs around every read). What each layer does here:

- ``http1_head`` writes the request and parses the answer's head, accepting and
  refusing what h11 does (h11 itself judges any head out of the ordinary);
- the body is framed by ``http1_body`` (Content-Length, chunked, or until close), and
  keep-alive is decided here from the answer's version, its ``Connection`` header and
  whether the body ended cleanly: h11 yields one event per chunk, which costs a
  yield and a client write per SSE event;
- connections are asyncio transports with a bare protocol (``_Wire``), TLS by
  asyncio's ``ssl`` with the context ``tls.client_context`` builds (certificates
  checked as httpx checks them), kept idle per host, port and TLS context, and only
  for the event loop that opened them. asyncio's SSL transport decrypts every record
  a socket read brought and hands them over at once (httpx reads one TLS record, so
  one SSE frame, per call);
- no per-read timer: a stalled body is caught by the middleware's one watchdog per
  stream, a stalled head by one ``asyncio.timeout``.

Upstreams an environment proxy applies to, an ``http_client`` given by the user,
``lean_http=False`` and event loops other than asyncio use httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import sys
import urllib.request
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

from ..bounded_cache import BoundedCache
from ..errors import ProxyError
from ..routing import Upstream, split_url
from .http1_body import BodyError, Chunked, Framing, Length, UntilClose
from .http1_head import Hangup, Head, Malformed, Sent, Unsendable, read_head, write_request
from .tls import client_context
from .upstream import RawHeaders, UpstreamResponse

logger = logging.getLogger("proxai_asgi")

# A reused connection that ends with no byte of answer is resent on a new one only if
# it ended within this many seconds of our writing the request: the server closed it
# (its keep-alive timeout) as the request crossed, and cannot have processed it. Later,
# the upstream held the request and may have processed (and billed) it: a 502, the
# retry being the caller's to decide.
RESEND_WINDOW = 0.01
_HIGH_WATER = 256 * 1024  # bytes buffered from an upstream before we stop reading it
# A body left unread when the client's answer was already complete is read in the
# background, up to this much for this long, so that its connection can be reused.
_DRAIN_MAX = 64 * 1024
_DRAIN_GRACE = 1.0
_Target = tuple[str, int, bytes, bytes, bool]  # host, port, request target, Host header, TLS
_PoolKey = tuple[str, int, ssl.SSLContext | None]


class _Wire(asyncio.Protocol):
    """The socket side of one connection: what arrived, whether it ended, and a waiter
    for the one task reading it. (A bare protocol rather than ``StreamReader``: the
    pool must see bytes a server wrote to an idle connection, e.g. a 408 before it
    closed, and one wake-up per read is all a reader needs.)"""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: list[bytes] = []
        self.size = 0
        self.eof = False
        self.ended_at: float | None = None  # the loop's time when the connection ended
        self.error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self.on_data: Callable[[bytes], None] | None = None  # set while draining

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A cast, not an isinstance check: uvloop's transports (what uvicorn runs on
        # when uvloop is installed) have the methods but not the base class.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.on_data is not None:
            self.on_data(data)
            return
        self.chunks.append(data)
        self.size += len(data)
        if self.size > _HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()  # back-pressure: the client reads slowly
            self._paused = True
        self._wake()

    def eof_received(self) -> bool:
        self._ended()
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended()
        self.error = exc
        self._wake()

    def _ended(self) -> None:
        if not self.eof:  # (protocol callbacks run on the connection's loop)
            self.eof = True
            self.ended_at = asyncio.get_running_loop().time()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def take(self) -> bytes:
        """Everything received and not yet taken."""
        chunks = self.chunks
        if not chunks:
            return b""
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self.chunks = []
        self.size = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    async def read(self, deadline: float | None = None) -> bytes:
        """Everything received so far (waiting for something, until the loop's time
        ``deadline`` if given: then TimeoutError), or b"" at the end."""
        if not self.chunks and not self.eof:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            # A bare timer: ``asyncio.timeout`` costs several times as much per request.
            timer = None if deadline is None else loop.call_at(deadline, _expire, waiter)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
        data = self.take()
        if data:
            return data
        if self.error is not None:
            raise ConnectionResetError(str(self.error))
        return b""


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class _Conn:
    """One keep-alive connection."""

    __slots__ = ("framing", "loop", "reusable", "reused", "wire")

    def __init__(self, wire: _Wire) -> None:
        self.wire = wire
        self.loop = asyncio.get_running_loop()  # the only loop that can serve it
        self.reused = False
        self.reusable = False  # set once a keep-alive answer was read to its end
        self.framing: Framing | None = None  # of a keep-alive answer being read

    def stale(self) -> bool:
        """An idle connection the server closed or wrote to since we parked it."""
        wire = self.wire
        return (
            wire.eof or bool(wire.chunks) or wire.transport is None or wire.transport.is_closing()
        )

    def close(self) -> None:
        if self.wire.transport is not None:
            with contextlib.suppress(RuntimeError):  # its event loop is closed
                self.wire.transport.close()


class _Stale(Exception):
    """A reused connection closed at once, before any byte of the answer: safe to
    retry."""


def _parse_target(url: str) -> _Target | None:
    """Where the pool connects for ``url`` (host, port, request target, Host header,
    TLS), or None when it is not the pool's: another scheme, credentials in the URL,
    or an environment proxy that applies to the host (httpx handles those)."""
    parts = split_url(url)
    scheme = parts.scheme
    if scheme not in ("http", "https") or not parts.hostname or parts.username:
        return None
    proxies = urllib.request.getproxies()
    if (proxies.get(scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(
        parts.hostname
    ):
        return None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    tls = scheme == "https"
    return (
        parts.hostname,
        parts.port or (443 if tls else 80),
        path.encode(),
        parts.netloc.rpartition("@")[2].encode(),
        tls,
    )


_UNPARSED: Any = object()


def _target_size(url: str, target: _Target | None) -> int:
    """The URL, and its parts held as bytes."""
    return 2 * sys.getsizeof(url)


class Http1Pool:
    """Keep-alive HTTP/1.1 connections to HTTP and HTTPS upstreams.

    At most ``max_connections`` requests are in flight (the rest wait, up to the
    upstream's ``read_timeout``), and at most ``max_idle`` connections are kept open
    between requests.
    """

    def __init__(self, max_connections: int = 1000, max_idle: int = 100) -> None:
        self._slots = asyncio.Semaphore(max_connections)
        # Requests not resent because a reused connection ended after the upstream
        # held them (see RESEND_WINDOW): each a 502, logged.
        self.not_resent = 0
        self._max_idle = max_idle
        self._idle: dict[_PoolKey, list[_Conn]] = {}
        self._n_idle = 0
        self._draining: set[_Conn] = set()  # read to their end in the background
        # URLs that name models (Gemini's path), so the client's: bounded by bytes.
        self._targets: BoundedCache[str, _Target | None] = BoundedCache(
            max_bytes=1 << 20, max_entries=4096, max_item_bytes=16 << 10, size=_target_size
        )
        self.in_flight = 0  # requests holding a connection (for tests and metrics)

    # ---------------------------------------------------------------- routing

    def serves(self, upstream: Upstream, url: str | None = None) -> bool:
        """Whether this pool takes ``upstream`` (http or https, no environment proxy
        for it, running on asyncio); otherwise the caller uses httpx."""
        if self._target(url or upstream.url) is None:
            return False
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # another event loop (trio)
            return False
        return True

    def _target(self, url: str) -> _Target | None:
        target = self._targets.recent(url, _UNPARSED)
        if target is _UNPARSED:
            target = self._targets.get(url, _UNPARSED)
            if target is _UNPARSED:
                target = _parse_target(url)
                self._targets.put(url, target)
        return target

    # ---------------------------------------------------------------- requests

    @asynccontextmanager
    async def open(
        self,
        upstream: Upstream,
        headers: RawHeaders,
        body: bytes,
        *,
        raw: bool,
        url: str | None = None,
        method: bytes = b"POST",
    ) -> AsyncIterator[UpstreamResponse]:
        """Send the request (to ``url``, default the upstream's); yields once the
        answer's headers arrived. ``raw`` keeps the body's content-encoding
        (pass-through) instead of decoding it."""
        target = self._target(url or upstream.url)
        assert target is not None, "serves() decides which upstreams come here"
        key = (target[0], target[1], client_context(upstream.verify) if target[4] else None)
        if self._slots.locked():
            await self._wait_for_slot(upstream.read_timeout)
        else:
            await self._slots.acquire()
        conn: _Conn | None = None
        finished = False
        self.in_flight += 1
        try:
            for _ in range(2):  # a second try only when a reused connection was stale
                conn = await self._checkout(key, upstream.connect_timeout)
                sent = Sent(method, target[2], target[3], headers, body, not raw)
                request = _request(sent)
                try:
                    head = await self._exchange_head(conn, sent, request, upstream.read_timeout)
                    break
                except _Stale:
                    conn.close()
                    conn = None
            else:  # pragma: no cover - the second connection is always fresh
                raise ProxyError(502, "upstream hung up on a fresh connection", kind="bad_gateway")
            chunks = self._body(conn, head)
            coding = _content_coding(head.headers)
            if coding and not raw:
                chunks = _decoded(chunks, coding)
            yield UpstreamResponse(head.status, head.headers, chunks, upstream.read_timeout)
            finished = True  # not reached when the caller raised (a disconnect, an error)
        finally:
            if conn is not None:
                self._release(key, conn, drain=finished)
            self.in_flight -= 1
            self._slots.release()

    async def _wait_for_slot(self, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise ProxyError(
                504,
                "upstream timed out: no connection slot free within read_timeout",
                kind="timeout",
            ) from None

    async def _checkout(self, key: _PoolKey, connect_timeout: float) -> _Conn:
        idle = self._idle.get(key)
        loop = asyncio.get_running_loop()
        while idle:
            conn = idle.pop()
            self._n_idle -= 1
            # A middleware outlives event loops where each test or request runs its
            # own (Starlette's TestClient): a connection of another loop never wakes.
            if conn.loop is not loop or conn.stale():
                conn.close()
                continue
            conn.reused = True
            return conn
        host, port, context = key
        try:
            async with asyncio.timeout(connect_timeout):
                _, wire = await asyncio.get_running_loop().create_connection(
                    _Wire, host, port, ssl=context
                )
        except OSError as exc:  # TimeoutError and ssl.SSLError are OSErrors too
            raise _connect_error(exc) from None
        return _Conn(wire)

    async def _exchange_head(
        self, conn: _Conn, sent: Sent, request: bytes, read_timeout: float
    ) -> Head:
        received = False
        buffer = b""
        written_at = conn.loop.time()
        deadline = written_at + read_timeout
        try:
            assert conn.wire.transport is not None
            conn.wire.transport.write(request)
            while True:
                data = await conn.wire.read(deadline)
                if not data and not received and conn.reused:
                    raise self._unanswered(conn, written_at)
                received = True
                buffer += data
                head = read_head(sent, buffer, not data)
                if head is not None:
                    return head
        except Hangup:
            raise ProxyError(
                502, "upstream hung up without answering", kind="bad_gateway"
            ) from None
        except TimeoutError:
            raise ProxyError(
                504, "upstream timed out: no answer within read_timeout", kind="timeout"
            ) from None
        except (ConnectionError, OSError):
            if conn.reused and not received:
                raise self._unanswered(conn, written_at) from None
            raise ProxyError(
                502, "upstream connection broke before the answer", kind="bad_gateway"
            ) from None
        except Malformed:
            raise ProxyError(
                502, "upstream answer is not well-formed HTTP/1.1", kind="bad_gateway"
            ) from None

    def _unanswered(self, conn: _Conn, written_at: float) -> Exception:
        """What a reused connection that ended without a byte of answer raises:
        ``_Stale`` (resend) when it ended at once, else a 502, counted and logged."""
        ended_at = conn.wire.ended_at
        held = (conn.loop.time() if ended_at is None else ended_at) - written_at
        if held <= RESEND_WINDOW:
            return _Stale()
        self.not_resent += 1
        peer = conn.wire.transport.get_extra_info("peername") if conn.wire.transport else None
        logger.warning(
            "upstream %s closed a reused connection %.0f ms after the request without "
            "answering; not resent (it may have been processed): 502",
            f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "?",
            held * 1000,
        )
        return ProxyError(
            502, "upstream closed the connection without answering", kind="bad_gateway"
        )

    async def _body(self, conn: _Conn, head: Head) -> AsyncIterator[bytes]:
        """The body, framed here rather than by h11: one piece per read, however
        many chunks the read completed."""
        framing = _framing(head)
        keep_alive = head.version == b"1.1" and not _closes(head.headers)
        conn.framing = framing if keep_alive and framing.reusable else None
        pending = head.rest  # body bytes that came with the head
        read = conn.wire.read
        try:
            if pending:
                data = framing.feed(pending)
                if data:
                    yield data
            while not framing.done:
                received = await read()
                if not received:
                    framing.eof()
                    break
                data = framing.feed(received)
                if data:
                    yield data
        except BodyError as exc:
            raise ProxyError(
                502, f"upstream body cut or garbled mid-body: {exc}", kind="bad_gateway"
            ) from None
        except (ConnectionError, OSError):
            raise ProxyError(
                502, "upstream connection broke mid-body", kind="bad_gateway"
            ) from None
        conn.reusable = keep_alive and framing.reusable and not framing.leftover

    def _release(self, key: _PoolKey, conn: _Conn, *, drain: bool) -> None:
        if conn.reusable and self._n_idle < self._max_idle and not conn.stale():
            conn.reusable = False
            conn.framing = None
            self._idle.setdefault(key, []).append(conn)
            self._n_idle += 1
        elif drain and conn.framing is not None and not conn.wire.eof:
            _drain(conn, conn.framing, self._draining, lambda c: self._release(key, c, drain=False))
        else:  # the client left, connection: close, or an error
            conn.close()

    @property
    def idle(self) -> int:
        """Connections kept open between requests."""
        return self._n_idle

    async def aclose(self) -> None:
        """Close every connection: idle ones and those still read to their end (left
        open, they would outlive the event loop and keep the upstream waiting)."""
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
        self._n_idle = 0
        for conn in self._draining:
            conn.wire.on_data = None
            conn.close()
        self._draining.clear()


def _drain(
    conn: _Conn, framing: Framing, draining: set[_Conn], park: Callable[[_Conn], None]
) -> None:
    """The caller finished without reading the whole body: a translated stream ends at
    its protocol's last event, and the chunked terminator may still be on its way.
    Read the rest in the background, briefly (``conn`` is in ``draining`` meanwhile),
    then ``park`` the connection (a new TCP connection per stream would cost a connect,
    over https a handshake, and a TIME_WAIT)."""
    if framing.done:  # the terminator came in the read of the last event
        conn.reusable = not framing.leftover
        park(conn)
        return
    wire = conn.wire
    budget = _DRAIN_MAX
    draining.add(conn)

    def give_up() -> None:
        wire.on_data = None
        draining.discard(conn)
        conn.close()

    def on_data(data: bytes) -> None:
        nonlocal budget
        budget -= len(data)
        try:
            framing.feed(data)
        except BodyError:
            budget = -1
        if budget < 0 or framing.leftover:
            timer.cancel()
            give_up()
        elif framing.done:
            timer.cancel()
            wire.on_data = None
            draining.discard(conn)
            conn.reusable = True
            park(conn)

    timer = asyncio.get_running_loop().call_later(_DRAIN_GRACE, give_up)
    wire.on_data = on_data
    pending = wire.take()
    if pending:
        on_data(pending)


_NAME_MISMATCH = frozenset({62, 64})  # X509_V_ERR_HOSTNAME_MISMATCH, ..._IP_ADDRESS_MISMATCH


def _connect_error(exc: OSError) -> ProxyError:
    """What the client is told when no connection could be made. A certificate's
    fault is named, never anything of the request or the upstream's address."""
    if isinstance(exc, TimeoutError):
        return ProxyError(
            504, "upstream timed out: not connected within connect_timeout", kind="timeout"
        )
    if isinstance(exc, ssl.SSLCertVerificationError):
        # OpenSSL's text for a name mismatch quotes the upstream's host: not for clients.
        why = "name mismatch" if exc.verify_code in _NAME_MISMATCH else exc.verify_message
        return ProxyError(502, f"upstream certificate rejected ({why})", kind="bad_gateway")
    if isinstance(exc, ssl.SSLError):
        return ProxyError(502, f"upstream TLS handshake failed ({exc.reason})", kind="bad_gateway")
    return ProxyError(
        502, "upstream unreachable: the connection was refused or failed", kind="bad_gateway"
    )


def _request(sent: Sent) -> bytes:
    """The whole request (translated answers are parsed here: ``sent`` asks for them
    uncompressed)."""
    try:
        return write_request(sent)
    except Unsendable:
        # h11's reason quotes the refused header, whose value may be the upstream key.
        raise ProxyError(502, "cannot send this request upstream", kind="bad_gateway") from None


def _framing(head: Head) -> Framing:
    """How the body ends (RFC 9112 §6.3); heads that mix or garble Content-Length and
    Transfer-Encoding were refused with the head."""
    if head.status in (204, 304):
        return Length(0)
    length: bytes | None = None
    for k, v in head.headers:
        if k == b"transfer-encoding":
            return Chunked() if v.strip().lower().endswith(b"chunked") else UntilClose()
        if k == b"content-length":
            length = v
    return Length(int(length)) if length is not None else UntilClose()


def _closes(headers: RawHeaders) -> bool:
    for k, v in headers:
        if k == b"connection" and b"close" in (t.strip().lower() for t in v.split(b",")):
            return True
    return False


def _content_coding(headers: RawHeaders) -> bytes:
    """The body's content-encoding, b"" for none or identity."""
    for k, v in headers:
        if k == b"content-encoding":
            coding = v.strip().lower()
            return b"" if coding == b"identity" else coding
    return b""


async def _decoded(chunks: AsyncIterator[bytes], coding: bytes) -> AsyncIterator[bytes]:
    """The body without its content-encoding (we ask for identity; gzip and deflate
    are still undone for servers that compress regardless)."""
    if coding not in (b"gzip", b"x-gzip", b"deflate"):
        raise ProxyError(502, f"upstream body has unsupported content-encoding {coding.decode()!r}")
    inflater = _Inflater(deflate=coding == b"deflate")
    try:
        async for chunk in chunks:
            out = inflater.feed(chunk)
            if out:
                yield out
        tail = inflater.flush()
    except zlib.error:
        raise ProxyError(502, f"upstream body does not decode as {coding.decode()}") from None
    if tail:
        yield tail


class _Inflater:
    """Undo gzip or deflate. ``deflate`` means zlib-wrapped data (RFC 9110 §8.4.1.2),
    but some servers send it raw, without the zlib header; httpx accepts both, and so
    do we: when the first two bytes are no zlib header, the body is raw deflate."""

    def __init__(self, *, deflate: bool) -> None:
        # 32 + MAX_WBITS: a gzip or a zlib header, whichever the body has.
        self._z = zlib.decompressobj(zlib.MAX_WBITS if deflate else 32 + zlib.MAX_WBITS)
        self._head = b"" if deflate else None  # bytes before the zlib header was accepted

    def feed(self, data: bytes) -> bytes:
        head = self._head
        if head is None:
            return self._z.decompress(data)
        try:
            out = self._z.decompress(data)
        except zlib.error:  # no zlib header: start again as raw deflate
            self._head = None
            self._z = zlib.decompressobj(-zlib.MAX_WBITS)
            return self._z.decompress(head + data)
        head += data
        self._head = head if len(head) < 2 else None  # two bytes in: the header passed
        return out

    def flush(self) -> bytes:
        return self._z.flush()
