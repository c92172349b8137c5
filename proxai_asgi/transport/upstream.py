"""Reaching an upstream: header policy, auth, and the httpx transport. Every transport
(httpx, the lean pool in ``http1.py``, the wrapped app in ``inner_transport.py``)
implements ``base.Transport`` and hands back the same ``UpstreamResponse``, so
everything above them is transport-agnostic."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from ..client_values import check_header_values
from ..codec import ProtocolName
from ..errors import ProxyError
from ..routing import Upstream

if TYPE_CHECKING:
    import httpx  # imported when first used: upstreams on the lean pool never need it

    from .tls import Verify

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
RawHeaders = list[tuple[bytes, bytes]]

logger = logging.getLogger("proxai_asgi")

# Never forwarded in either direction (RFC 9110 §7.6.1, plus proxy bookkeeping).
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"forwarded",
        b"via",
        b"x-forwarded-for",
        b"x-forwarded-host",
        b"x-forwarded-proto",
        b"x-forwarded-port",
        b"x-real-ip",
    }
)
# Upstream response headers a translated answer keeps: what clients use to back off
# and to correlate requests. Everything else describes the upstream's own body.
_KEEP_ON_TRANSLATION = re.compile(
    rb"^(retry-after|retry-after-ms|request-id|x-request-id|openai-processing-ms|.*ratelimit.*)$"
)
# Headers the server in front of the client sets itself.
_SERVER_OWNED = frozenset({b"server", b"date", b"content-length", b"content-encoding"})


def _connection_named(headers: RawHeaders) -> frozenset[bytes]:
    """The headers a ``Connection`` header names: hop-by-hop too (RFC 9110 §7.6.1)."""
    names: set[bytes] = set()
    for k, v in headers:
        if k == b"connection":
            names.update(t.strip().lower() for t in v.split(b","))
    return frozenset(names)


@cache
def key_headers() -> frozenset[bytes]:
    """The headers besides ``authorization`` that carry a client's key: each protocol's
    own, as its codec declares them."""
    from ..protocols import all_codecs

    return frozenset(h for codec in all_codecs() for h in codec.credential_headers)


@cache
def credential_headers() -> frozenset[bytes]:
    """Every header that carries a credential: never forwarded beside a key of ours."""
    return key_headers() | {b"authorization", b"cookie"}


def client_credential(headers: RawHeaders) -> bytes | None:
    keys = key_headers()
    for k, v in headers:
        if k in keys:
            return v
        if k == b"authorization":
            scheme, _, token = v.partition(b" ")
            return token if scheme.lower() == b"bearer" and token else v
    return None


@cache
def _foreign_families(protocol: ProtocolName) -> tuple[bytes, ...]:
    """Header name prefixes of the other provider families than ``protocol``'s."""
    from ..protocols import all_codecs, get_codec

    own = get_codec(protocol).header_family
    return tuple(
        prefix
        for codec in all_codecs()
        if codec.header_family != own
        for prefix in codec.header_family
    )


def upstream_headers(
    client_headers: RawHeaders,
    upstream: Upstream,
    *,
    passthrough: bool,
    stream: bool,
) -> RawHeaders:
    """Headers for the upstream request.

    Hop-by-hop and proxy headers never pass. With a configured key the client's
    credentials are removed and the upstream's scheme is used; without one the
    client's credential is forwarded, re-expressed in the upstream's scheme when the
    protocols differ. Headers of the other provider families are not forwarded.
    """
    from ..protocols import get_codec

    target = get_codec(upstream.protocol)
    foreign = _foreign_families(upstream.protocol)
    auth_header = target.auth_header
    credentials = credential_headers()
    out: RawHeaders = []
    named = _connection_named(client_headers)
    for k, v in client_headers:
        if k in HOP_BY_HOP or k in credentials or k in named:
            continue
        if not passthrough and (
            k.startswith(b"content-")
            or k in (b"accept", b"accept-encoding")
            or k.startswith(foreign)
        ):
            continue
        if passthrough and k == b"content-length":
            continue  # recomputed: a model rewrite changes the length
        out.append((k, v))

    credential = upstream.key.encode() if upstream.key else client_credential(client_headers)
    if passthrough and upstream.api_key is None:
        # Same protocol, no key of ours: the client's credential headers go as they are.
        out.extend((k, v) for k, v in client_headers if k in credentials and k != b"cookie")
    elif credential:
        if auth_header == b"authorization":
            out.append((b"authorization", b"Bearer " + credential))
        else:
            out.append((auth_header, credential))
    for required, required_value in target.required_headers:
        if not any(k == required for k, _ in out):
            out.append((required, required_value))
    if not passthrough:
        out.append((b"content-type", b"application/json"))
        out.append((b"accept", b"text/event-stream" if stream else b"application/json"))
    for name, value in upstream.headers.items():
        key = name.lower().encode()
        out = [(k, v) for k, v in out if k != key]
        out.append((key, value.encode()))
    check_header_values(out)  # a client's CR/LF (a decoded ``?key=``) adds no header
    return out


def without_contradicted_length(headers: RawHeaders) -> RawHeaders:
    """``headers`` without a Content-Length beside a Transfer-Encoding: the body was
    framed by the transfer coding (RFC 9112 §6.3), so that length is not the body's,
    and the client's framing is the server in front's to choose."""
    if not any(k == b"transfer-encoding" for k, _ in headers):
        return headers
    return [(k, v) for k, v in headers if k != b"content-length"]


def client_headers_from_upstream(headers: RawHeaders, *, passthrough: bool) -> RawHeaders:
    """Which upstream response headers reach the client."""
    out: RawHeaders = []
    named = _connection_named(headers)
    if passthrough:
        headers = without_contradicted_length(headers)
    for k, v in headers:
        if k in HOP_BY_HOP or (k in _SERVER_OWNED and not (passthrough and k != b"server")):
            continue
        if k in named:
            continue
        if passthrough or _KEEP_ON_TRANSLATION.match(k):
            out.append((k, v))
    return out


class UpstreamResponse:
    """Status, headers and a body iterator; the same shape for every transport.

    ``read_timeout``: a transport without its own per-read timeout (the lean pool)
    gives it here for ``read``; streams are watched by the middleware instead.
    """

    __slots__ = ("_chunks", "headers", "read_timeout", "status")

    def __init__(
        self,
        status: int,
        headers: RawHeaders,
        chunks: AsyncIterator[bytes],
        read_timeout: float | None = None,
    ) -> None:
        self.status = status
        self.headers = headers
        self._chunks = chunks
        self.read_timeout = read_timeout

    @property
    def is_event_stream(self) -> bool:
        for k, v in self.headers:
            if k == b"content-type":
                return v.split(b";", 1)[0].strip().lower() == b"text/event-stream"
        return False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks

    async def read(self, limit: int = 8 * 1024 * 1024) -> bytes:
        parts: list[bytes] = []
        size = 0
        if self.read_timeout is None:  # the transport times its own reads
            async for chunk in self._chunks:
                parts.append(chunk)
                size += len(chunk)
                if size > limit:
                    break
            return b"".join(parts)
        # Only the lean pool leaves reads to us, and it runs on asyncio: one timeout
        # pushed back before each read costs a fraction of a ``fail_after`` per read.
        timeout = self.read_timeout
        clock = asyncio.get_running_loop().time
        try:
            async with asyncio.timeout(None) as deadline:
                while size <= limit:
                    deadline.reschedule(clock() + timeout)
                    try:
                        chunk = await anext(self._chunks)
                    except StopAsyncIteration:
                        break
                    parts.append(chunk)
                    size += len(chunk)
        except TimeoutError:
            raise ProxyError(
                504, "upstream stopped sending (read timeout)", kind="timeout"
            ) from None
        return b"".join(parts)


# ------------------------------------------------------------------ httpx transport


class HttpTransport:
    """Pooled ``httpx.AsyncClient`` s for the HTTP upstreams of a middleware: one for
    upstreams with the default ``verify``, one per other setting (or only the client
    the user gave, whose own TLS settings then apply)."""

    def __init__(
        self, client: httpx.AsyncClient | None = None, max_connections: int = 1000
    ) -> None:
        self._client = client
        self._owned = client is None
        self._max_connections = max_connections
        self._by_verify: dict[object, httpx.AsyncClient] = {}

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = self._new_client(True)
        return self._client

    def client_for(self, upstream: Upstream) -> httpx.AsyncClient:
        """The client that reaches ``upstream`` with its ``verify`` setting."""
        verify = upstream.verify
        if verify is True or not self._owned:
            return self.client
        client = self._by_verify.get(verify)
        if client is None:
            client = self._by_verify[verify] = self._new_client(verify)
        return client

    def _new_client(self, verify: Verify) -> httpx.AsyncClient:
        import httpx

        from .tls import httpx_verify

        return httpx.AsyncClient(
            timeout=httpx.Timeout(600.0, connect=10.0),
            limits=httpx.Limits(
                max_connections=self._max_connections, max_keepalive_connections=100
            ),
            follow_redirects=False,
            verify=httpx_verify(verify),
        )

    def serves(self, upstream: Upstream, url: str | None = None) -> bool:
        """Every HTTP upstream (the last resort after the lean pool)."""
        return not upstream.inner

    async def aclose(self) -> None:
        if self._client is not None and self._owned:
            await self._client.aclose()
            self._client = None
        for client in self._by_verify.values():
            await client.aclose()
        self._by_verify.clear()

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
        """Send the request (to ``url``, default the upstream's); yields once headers
        arrived. ``raw`` keeps the body's content-encoding (pass-through) instead of
        decoding it."""
        import httpx

        timeout = httpx.Timeout(upstream.read_timeout, connect=upstream.connect_timeout)
        client = self.client_for(upstream)
        request = client.build_request(
            method.decode(), url or upstream.url, content=body, headers=headers, timeout=timeout
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise ProxyError(
                504, f"upstream timed out ({type(exc).__name__})", kind="timeout"
            ) from None
        except httpx.HTTPError as exc:
            raise ProxyError(
                502, f"upstream unreachable ({type(exc).__name__})", kind="bad_gateway"
            ) from None
        response.stream = _framing_checked(cast("httpx.AsyncByteStream", response.stream))
        try:
            # aiter_bytes only where there is something to decode: it adds a decoder
            # and a chunker to every chunk.
            coding = response.headers.get("content-encoding", "").strip().lower()
            plain = raw or coding in ("", "identity")
            chunks = response.aiter_raw() if plain else response.aiter_bytes()
            # Servers write names in any case (Go, Node: "Content-Type"); everything
            # downstream compares lowercase names, as ASGI has them.
            headers = [(k.lower(), v) for k, v in response.headers.raw]
            yield UpstreamResponse(response.status_code, headers, _guard(chunks))
            if not response.is_closed:  # done at its protocol's last event, bytes still due
                await _read_out(chunks)
        finally:
            await response.aclose()


# A body's rest is read (briefly, and not much of it) so that its connection is kept:
# a translated stream stops at its protocol's last event, and the chunked terminator
# comes with it or just after. Closed unread, the connection would be dropped, and
# the next request would pay a new connect (over https a handshake). The client's
# answer is complete by then; only this exchange's task waits.
_READ_OUT_MAX = 64 * 1024
_READ_OUT_GRACE = 1.0


async def _read_out(chunks: AsyncIterator[bytes]) -> None:
    import anyio
    import httpx

    budget = _READ_OUT_MAX
    with anyio.move_on_after(_READ_OUT_GRACE), contextlib.suppress(httpx.HTTPError):
        async for chunk in chunks:
            budget -= len(chunk)
            if budget < 0:
                return


def _framing_checked(stream: httpx.AsyncByteStream) -> httpx.AsyncByteStream:
    """``stream``, which at its end makes sure the connection is not reused when the
    upstream sent bytes after this answer (past its Content-Length, after the chunked
    terminator): kept, it would hand them to the next request as that request's
    answer. (Checked before httpx closes the response at the end of the stream, which
    is when httpcore decides whether to keep the connection.)"""
    return _checked_stream_class()(stream)


@cache
def _checked_stream_class() -> Callable[[httpx.AsyncByteStream], httpx.AsyncByteStream]:
    import httpx

    class FramingChecked(httpx.AsyncByteStream):
        def __init__(self, inner: httpx.AsyncByteStream) -> None:
            self._inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._inner:
                yield chunk
            _spoil_if_over_sent(self._inner)

        async def aclose(self) -> None:
            await self._inner.aclose()

    return FramingChecked


def _spoil_if_over_sent(stream: object) -> None:
    """httpx reads over-sent bytes into the connection's h11 buffer, which no public
    API shows: reached through httpcore's HTTP/1.1 connection behind the stream
    (another version's layout: the check finds nothing and is skipped). h11's
    ``send_failed`` puts our side in ERROR, so httpcore closes the connection instead
    of keeping it when the response closes."""
    import h11

    node: object | None = stream
    for _ in range(6):  # httpx's stream -> httpcore's pool stream -> its connection
        state = getattr(node, "_h11_state", None)
        if isinstance(state, h11.Connection):
            if state.their_state is h11.DONE and state.trailing_data[0]:
                state.send_failed()
            return
        node = next(
            (
                getattr(node, name)
                for name in ("_stream", "_httpcore_stream", "_connection")
                if hasattr(node, name)
            ),
            None,
        )


async def _guard(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Body iteration with transport failures turned into ``ProxyError``."""
    import httpx

    try:
        async for chunk in chunks:
            yield chunk
    except httpx.TimeoutException:
        raise ProxyError(504, "upstream stopped sending (read timeout)", kind="timeout") from None
    except httpx.HTTPError as exc:
        raise ProxyError(
            502, f"upstream connection failed mid-body ({type(exc).__name__})", kind="bad_gateway"
        ) from None
