"""The model and usage of a relayed Chat answer: the completion's own for a plain
one; for a stream, the last chunk that carries ``usage`` (the usage-only chunk a
client gets with ``stream_options.include_usage``; without it a Chat stream reports
none, so accounting asks for it and strips it: ``usage_ask``). Only those fields are
decoded."""

from __future__ import annotations

import msgspec

from ...codec import Relayed
from ...stream_tail import StreamTail
from . import wire
from .response import usage_from_wire


class _Answer(msgspec.Struct, gc=False):
    model: str = ""
    usage: wire.Usage | None = None


_answer = msgspec.json.Decoder(_Answer)


def relayed_usage(body: bytes) -> Relayed | None:
    try:
        answer = _answer.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return Relayed(answer.model, usage_from_wire(answer.usage)) if answer.usage else None


def relayed_stream_usage(tail: StreamTail) -> Relayed | None:
    for frame in reversed(tail.last_frames()):
        if frame.is_done or b'"usage"' not in frame.data:
            continue
        try:
            chunk = _answer.decode(frame.data)
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue
        if chunk.usage is not None:
            return Relayed(chunk.model, usage_from_wire(chunk.usage))
    return None
