"""The model and usage of a relayed Messages answer: ``message`` for a plain one;
``message_start`` (model, prompt figures) merged with the last ``message_delta``
(cumulative figures) for a stream. Only those fields are decoded."""

from __future__ import annotations

import msgspec

from ...codec import Relayed
from ...stream_tail import StreamTail
from . import wire
from .response import merge_usage, usage_in


class _Message(msgspec.Struct, gc=False):
    model: str = ""
    usage: wire.Usage | None = None


class _Start(msgspec.Struct, gc=False):
    message: _Message | None = None


class _Delta(msgspec.Struct, gc=False):
    usage: wire.Usage | None = None


_message = msgspec.json.Decoder(_Message)
_start = msgspec.json.Decoder(_Start)
_delta = msgspec.json.Decoder(_Delta)


def relayed_usage(body: bytes) -> Relayed | None:
    try:
        msg = _message.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return Relayed(msg.model, usage_in(msg.usage)) if msg.usage is not None else None


def relayed_stream_usage(tail: StreamTail) -> Relayed | None:
    first = tail.first_frame()
    try:
        start = _start.decode(first.data).message if first is not None else None
        usage = start.usage if start is not None else None
        for frame in reversed(tail.last_frames()):
            if frame.event == "message_delta":
                delta = _delta.decode(frame.data).usage
                if delta is not None:
                    usage = merge_usage(usage or wire.Usage(), delta)
                break
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if usage is None:
        return None
    return Relayed(start.model if start is not None else "", usage_in(usage))
