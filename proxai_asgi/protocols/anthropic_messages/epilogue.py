"""How a relayed Messages stream must end: ``message_stop``, or ``event: error`` when
the upstream stopped short or broke (an upstream ``error`` event is already an end)."""

from __future__ import annotations

from ... import canonical as c
from ...errors import ProxyError
from ...stream_tail import StreamTail
from .stream import AnthropicStreamEncoder

_TERMINAL = frozenset({"message_stop", "error"})


def stream_complete(tail: StreamTail) -> bool:
    frames = tail.last_frames()
    return bool(frames) and frames[-1].event == "message_stop"


def stream_epilogue(tail: StreamTail, error: ProxyError | None) -> bytes:
    frames = tail.last_frames()
    if frames and frames[-1].event in _TERMINAL:
        return b""
    err = error or ProxyError(502, "upstream stream ended before message_stop", kind="bad_gateway")
    encoder = AnthropicStreamEncoder(c.Request(model="", messages=[], stream=True))
    return tail.separator() + encoder.encode(
        c.StreamError(status=err.status, kind=err.kind, message=err.message)
    )
