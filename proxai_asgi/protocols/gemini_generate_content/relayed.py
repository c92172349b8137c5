"""The model and usage of a relayed generateContent answer: its ``usageMetadata``
and ``modelVersion``; for a stream, the last chunk's (each chunk's figures are
cumulative). Only those fields are decoded."""

from __future__ import annotations

import msgspec

from ...codec import Relayed
from ...stream_tail import StreamTail
from . import wire
from .response import usage_in


class _Answer(msgspec.Struct, gc=False, rename="camel"):
    model_version: str = ""
    usage_metadata: wire.UsageMetadata | None = None


_answer = msgspec.json.Decoder(_Answer)
_chunks = msgspec.json.Decoder(list[_Answer])


def _relayed(body: bytes) -> Relayed | None:
    try:
        if body.lstrip()[:1] == b"[":  # a stream without alt=sse: one JSON array
            answer = next((a for a in reversed(_chunks.decode(body)) if a.usage_metadata), None)
        else:
            answer = _answer.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if answer is None or answer.usage_metadata is None:
        return None
    return Relayed(answer.model_version, usage_in(answer.usage_metadata))


relayed_usage = _relayed


def relayed_stream_usage(tail: StreamTail) -> Relayed | None:
    for frame in reversed(tail.last_frames()):
        if b"usageMetadata" in frame.data:
            return _relayed(frame.data)
    return None
