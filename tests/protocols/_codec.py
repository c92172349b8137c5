"""Helpers every codec's tests share: SSE framing at any byte step, and a codec's
stream decoder and encoder driven over a whole body or event list."""

from __future__ import annotations

from collections.abc import Iterable

from proxai_asgi import canonical as c
from proxai_asgi.codec import Codec
from proxai_asgi.sse import SSEDecoder, SSEEvent


def sse_events(body: bytes, step: int | None = None) -> list[SSEEvent]:
    """The frames of ``body``, fed whole or ``step`` bytes at a time."""
    dec = SSEDecoder()
    out: list[SSEEvent] = []
    if step is None:
        out.extend(dec.decode(body))
    else:
        for i in range(0, len(body), step):
            out.extend(dec.decode(body[i : i + step]))
    out.extend(dec.flush())
    return out


def decode_stream(codec: Codec, body: bytes, step: int | None = None) -> list[c.StreamEvent]:
    dec = codec.stream_decoder()
    out: list[c.StreamEvent] = []
    for e in sse_events(body, step):
        out.extend(dec.feed(e))
    out.extend(dec.close())
    return out


def encode_stream(codec: Codec, events: Iterable[c.StreamEvent], request: c.Request) -> bytes:
    enc = codec.stream_encoder(request)
    return b"".join(enc.encode(e) for e in events)
