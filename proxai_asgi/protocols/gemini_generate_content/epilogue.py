"""How a relayed Gemini stream must end. Gemini has no terminal event: its last chunk
carries the candidate's ``finishReason`` (or ``promptFeedback.blockReason``). A stream
that stops before one gets the error chunk Gemini clients read."""

from __future__ import annotations

from ... import canonical as c
from ...errors import ProxyError
from ...stream_tail import StreamTail
from .stream import GeminiStreamEncoder

_ENDINGS = (b'"finishReason"', b'"blockReason"', b'"error"')


def stream_complete(tail: StreamTail) -> bool:
    frames = tail.last_frames()
    last = frames[-1].data if frames else b""
    return b'"error"' not in last and any(mark in last for mark in _ENDINGS)


def stream_epilogue(tail: StreamTail, error: ProxyError | None) -> bytes:
    frames = tail.last_frames()
    if frames and any(mark in frames[-1].data for mark in _ENDINGS):
        return b""
    err = error or ProxyError(
        502, "upstream stream ended before its finishReason", kind="bad_gateway"
    )
    encoder = GeminiStreamEncoder(c.Request(model="", messages=[], stream=True))
    return tail.separator() + encoder.encode(
        c.StreamError(status=err.status, kind=err.kind, message=err.message)
    )
