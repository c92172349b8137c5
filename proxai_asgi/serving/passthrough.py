"""The exchange around pass-through bytes, the same for both transports.

A same-protocol pair relays the upstream's bytes untouched, but how the exchange ends
is ours to get right:

- an error status whose body is not JSON (a load balancer's HTML page, an empty 503)
  becomes a JSON error in the client's own shape, status kept; JSON errors pass as is;
- a stream that ends, or breaks, before its protocol's terminal event ends with that
  protocol's terminal error (``Codec.stream_epilogue``), so it cannot pass for a
  complete answer;
- a plain body cut short (fewer bytes than its ``content-length``, or a transport
  error mid-body) aborts the client connection at once, so the client sees a transport
  error and can retry instead of waiting for bytes that will never come.

The HTTP transport feeds this from the upstream response, the wrapped-app transport
from the app's ``send``; neither knows the other exists.

With accounting on (``on_usage``), the answer's model and usage are read from its
bytes once it ended (``Codec.relayed_usage``, ``Codec.relayed_stream_usage``): a plain
body is kept until its end, a stream's tail as long as its protocol needs
(``Codec.usage_tail_bytes``). A stream whose request the proxy edited to ask for its
usage (``Codec.ask_usage``) goes through that protocol's ``UsageStrip`` first: the
client gets the stream it asked for, and the usage is the strip's.
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable

import msgspec

from ..codec import Codec, Relayed, UsageStrip
from ..errors import ProxyError, ResponseAborted
from ..stream_tail import TAIL_BYTES, StreamTail
from ..transport.upstream import RawHeaders, client_headers_from_upstream

MAX_ERROR_BODY = 1024 * 1024
MAX_ACCOUNTED_BODY = 64 * 1024 * 1024  # a longer plain answer is relayed unread
_JSON = (b"content-type", b"application/json")

Start = Callable[[int, RawHeaders], Awaitable[None]]
Body = Callable[[bytes, bool], Awaitable[None]]
OnUsage = Callable[[Relayed | None], None]


def relayed_usage(codec: Codec, headers: RawHeaders, body: bytes) -> Relayed | None:
    """The model and usage of a relayed plain answer. A pass-through keeps the body's
    content-encoding: gzip and deflate are read through; another coding reads as no
    usage."""
    coding = (_header(headers, b"content-encoding") or b"").strip().lower()
    if coding in (b"gzip", b"x-gzip", b"deflate"):
        try:  # wbits 47: a zlib or gzip header, whichever it has
            inflater = zlib.decompressobj(47 if coding != b"deflate" else 15)
            body = inflater.decompress(body, MAX_ACCOUNTED_BODY)
        except zlib.error:
            return None
    elif coding not in (b"", b"identity"):
        return None
    return codec.relayed_usage(body)


def _header(headers: RawHeaders, name: bytes) -> bytes | None:
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


class PassthroughRelay:
    __slots__ = (
        "_body",
        "_codec",
        "_error_body",
        "_expected",
        "_headers",
        "_on_usage",
        "_plain",
        "_received",
        "_start",
        "_status",
        "_strip",
        "_tail",
        "started",
    )

    def __init__(
        self,
        codec: Codec,
        start: Start,
        body: Body,
        on_usage: OnUsage | None = None,
        strip: UsageStrip | None = None,
    ) -> None:
        self._codec = codec
        self._on_usage = on_usage  # accounting: told the answer's usage at its end
        self._strip = strip  # a stream asked for usage the client did not ask for
        self._plain: bytearray | None = None  # a plain body kept for its usage
        self._start = start
        self._body = body
        self._status = 0
        self._headers: RawHeaders = []
        self._error_body: bytearray | None = None  # an error body held until its end
        self._tail: StreamTail | None = None  # a stream's ends
        self._expected: int | None = None  # a plain body's content-length
        self._received = 0
        self.started = False

    async def start(self, status: int, headers: RawHeaders) -> None:
        self._status, self._headers = status, headers
        if not 200 <= status < 300:
            self._error_body = bytearray()  # decided at the end: JSON or not
            return
        ctype = _header(headers, b"content-type") or b""
        if ctype.split(b";", 1)[0].strip().lower() == b"text/event-stream":
            on = self._on_usage is not None
            self._tail = StreamTail(self._codec.usage_tail_bytes if on else TAIL_BYTES)
        else:
            length = _header(headers, b"content-length")
            self._expected = int(length) if length is not None and length.isdigit() else None
            if self._on_usage is not None:
                self._plain = bytearray()
        await self._send_start(status, headers)

    async def chunk(self, data: bytes, last: bool = False) -> None:
        """``last``: the body's end follows (nothing is held back for later)."""
        if self._error_body is not None:
            self._error_body += data
            if len(self._error_body) > MAX_ERROR_BODY:  # not a page to rewrite: relay it
                held, self._error_body = bytes(self._error_body), None
                await self._send_start(self._status, self._headers)
                await self._body(held, True)
            return
        if self._tail is not None:
            if self._strip is not None:
                data = self._strip.feed(data, last)
                if not data:
                    return
            self._tail.feed(data)
        else:
            self._received += len(data)
            if self._plain is not None:
                self._plain += data
                if len(self._plain) > MAX_ACCOUNTED_BODY:
                    self._plain = None
        await self._body(data, True)

    def complete(self) -> bool:
        """Whether the stream relayed so far reached its protocol's successful end."""
        return self._tail is not None and self._codec.stream_complete(self._tail)

    def ended_by_upstream(self) -> bool:
        """Whether the stream relayed so far ended with the upstream's own terminal
        event, an error included (nothing of ours would be added at its end)."""
        if self._tail is None:
            return False
        return b'"error"' not in self._codec.stream_epilogue(self._tail, None)

    async def end(self) -> None:
        """The upstream body ended normally."""
        if self._error_body is not None:
            await self._finish_error(bytes(self._error_body))
            return
        if self._tail is not None:
            await self._release()
            self.note_usage()
            await self._body(self._codec.stream_epilogue(self._tail, None), False)
            return
        if self._expected is not None and self._received < self._expected:
            raise ResponseAborted(
                f"upstream body ended after {self._received} of {self._expected} bytes"
            )
        if self._on_usage is not None and self._plain is not None:
            self._on_usage(relayed_usage(self._codec, self._headers, bytes(self._plain)))
        await self._body(b"", False)

    async def fail(self, err: ProxyError) -> None:
        """The upstream body broke (transport error, stall): end the exchange."""
        if not self.started:
            raise err  # nothing sent yet: the client gets it in its own shape
        if self._tail is not None:
            await self._release()
            self.note_usage()  # what the cut answer used so far is billed all the same
            await self._body(self._codec.stream_epilogue(self._tail, err), False)
            return
        raise ResponseAborted(err.message)

    def note_usage(self) -> None:
        """Accounting: the usage the stream relayed so far tells (its whole usage at
        its end; at a cut, what its first and last frames say: a prompt's tokens, a
        Gemini chunk's running count)."""
        if self._on_usage is not None and self._tail is not None:
            usage = self._strip.usage if self._strip is not None else None
            self._on_usage(usage or self._codec.relayed_stream_usage(self._tail))

    async def _release(self) -> None:
        """A frame the strip still holds (the body ended without its blank line)."""
        if self._strip is not None:
            await self.chunk(b"", last=True)

    async def _send_start(self, status: int, headers: RawHeaders) -> None:
        self.started = True
        await self._start(status, headers)

    async def _finish_error(self, body: bytes) -> None:
        try:
            msgspec.json.decode(body)
        except msgspec.DecodeError:
            pass
        else:  # the upstream's own JSON error: its bytes, untouched
            await self._send_start(self._status, self._headers)
            await self._body(body, False)
            return
        err = self._codec.decode_error(self._status, body)
        rendered = self._codec.encode_error(err)
        kept = client_headers_from_upstream(self._headers, passthrough=False)
        headers = [_JSON, (b"content-length", str(len(rendered)).encode()), *kept]
        await self._send_start(self._status, headers)
        await self._body(rendered, False)
