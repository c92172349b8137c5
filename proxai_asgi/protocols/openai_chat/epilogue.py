"""How a relayed Chat stream must end: ``data: [DONE]``, or an error chunk and then
``[DONE]`` when the upstream stopped short or broke.

Chat's last word is ``[DONE]``, but what makes an answer complete is its
``finish_reason`` chunk (and the usage chunk after it): a stream that ends cleanly
after those is whole and only lacks the ``[DONE]``, and one that ends after an error
chunk of the upstream's already has its terminal error. Only a stream that ends before
either is cut, and gets an error of ours.
"""

from __future__ import annotations

import enum

import msgspec

from ... import canonical as c
from ...errors import ProxyError
from ...sse import DONE_FRAME, SSEEvent
from ...stream_tail import StreamTail
from .stream import ChatStreamEncoder


class _End(enum.Enum):
    DONE = "done"  # data: [DONE]
    FINISHED = "finished"  # the finish_reason chunk (and chunks without choices) last
    FAILED = "failed"  # the upstream's own error chunk last
    CUT = "cut"  # anything else


def stream_complete(tail: StreamTail) -> bool:
    return _how_it_ended(tail.last_frames()) in (_End.DONE, _End.FINISHED)


def stream_epilogue(tail: StreamTail, error: ProxyError | None) -> bytes:
    end = _how_it_ended(tail.last_frames())
    if end is _End.DONE:
        return b""
    if end is _End.FAILED or (end is _End.FINISHED and error is None):
        return tail.separator() + DONE_FRAME
    err = error or ProxyError(502, "upstream stream ended before data: [DONE]", kind="bad_gateway")
    encoder = ChatStreamEncoder(c.Request(model="", messages=[], stream=True))
    return tail.separator() + encoder.encode(
        c.StreamError(status=err.status, kind=err.kind, message=err.message)
    )


def _how_it_ended(frames: list[SSEEvent]) -> _End:
    """From the last frame back: the usage-only chunk, Azure's filter annotations and
    keep-alives after the finish chunk are passed over."""
    for frame in reversed(frames):
        if frame.is_done:
            return _End.DONE
        if frame.event == "error":
            return _End.FAILED
        if not frame.data.strip():
            continue  # a keep-alive
        try:
            chunk = msgspec.json.decode(frame.data)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return _End.CUT
        if not isinstance(chunk, dict):
            return _End.CUT
        if chunk.get("error") is not None:
            return _End.FAILED
        choices = chunk.get("choices")
        if choices == [] or chunk.get("object") == "":
            continue  # usage-only, prompt filter results, content-filter annotations
        if (
            isinstance(choices, list)
            and len(choices) == 1
            and isinstance(choices[0], dict)
            and choices[0].get("finish_reason") is not None
        ):
            return _End.FINISHED
        return _End.CUT
    return _End.CUT
