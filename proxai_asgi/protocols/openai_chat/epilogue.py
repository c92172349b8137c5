"""How a relayed Chat stream must end: ``data: [DONE]``, or an error chunk and then
``[DONE]`` when the upstream stopped short or broke."""

from __future__ import annotations

from ... import canonical as c
from ...errors import ProxyError
from ...stream_tail import StreamTail
from .stream import ChatStreamEncoder


def stream_epilogue(tail: StreamTail, error: ProxyError | None) -> bytes:
    frames = tail.last_frames()
    if frames and frames[-1].is_done:
        return b""
    err = error or ProxyError(502, "upstream stream ended before data: [DONE]", kind="bad_gateway")
    encoder = ChatStreamEncoder(c.Request(model="", messages=[], stream=True))
    return tail.separator() + encoder.encode(
        c.StreamError(status=err.status, kind=err.kind, message=err.message)
    )
