"""The model and usage of a relayed generateContent answer: its ``usageMetadata``
and ``modelVersion``; for a stream, the last chunk's (each chunk's figures are
cumulative). Only those fields are decoded, and the grounding's search queries (the
searches billed: ``grounding.search_count``)."""

from __future__ import annotations

import contextlib

import msgspec

from ...codec import Relayed
from ...stream_tail import StreamTail
from . import wire
from .response import usage_in


class _Grounding(msgspec.Struct, gc=False, rename="camel"):
    web_search_queries: list[msgspec.Raw] = []
    grounding_chunks: list[msgspec.Raw] = []


class _Candidate(msgspec.Struct, gc=False, rename="camel"):
    grounding_metadata: _Grounding | None = None


class _Answer(msgspec.Struct, gc=False, rename="camel"):
    model_version: str = ""
    usage_metadata: wire.UsageMetadata | None = None
    candidates: list[_Candidate] | None = None


def _searches(answer: _Answer) -> int:
    g = answer.candidates[0].grounding_metadata if answer.candidates else None
    if g is None:
        return 0
    return len(g.web_search_queries) or (1 if g.grounding_chunks else 0)


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
    usage = usage_in(answer.usage_metadata)
    usage.server_tool_requests = _searches(answer)
    return Relayed(answer.model_version, usage)


relayed_usage = _relayed


def relayed_stream_usage(tail: StreamTail) -> Relayed | None:
    frames = tail.last_frames()
    for frame in reversed(frames):
        if b"usageMetadata" in frame.data:
            got = _relayed(frame.data)
            if got is not None and not got.usage.server_tool_requests:
                grounded = [f for f in frames if b"groundingMetadata" in f.data]
                if grounded:  # grounding on a chunk of its own, before the usage
                    with contextlib.suppress(msgspec.DecodeError, UnicodeDecodeError):
                        got.usage.server_tool_requests = _searches(
                            _answer.decode(grounded[-1].data)
                        )
            return got
    return None
