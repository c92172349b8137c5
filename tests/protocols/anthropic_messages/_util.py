"""Shared helpers of the Anthropic codec tests."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pydantic
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from anthropic.types.shared import ErrorResponse

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols.anthropic_messages import CODEC
from tests.helpers.validate_anthropic import AnthropicStream, validate_anthropic_stream
from tests.protocols import _codec
from tests.protocols._codec import sse_events

_EVENT = pydantic.TypeAdapter(RawMessageStreamEvent)


def req(**kw: Any) -> c.Request:
    kw.setdefault("model", "claude-test")
    kw.setdefault("messages", [c.Message(role="user", content=[c.Text(text="hi")])])
    return c.Request(**kw)


def body(**kw: Any) -> dict[str, Any]:
    """A minimal valid client request body, overridden by ``kw``."""
    out: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "hi"}],
    }
    out.update(kw)
    return out


def decode_req(b: dict[str, Any]) -> tuple[c.Request, TranslationReport]:
    report = TranslationReport()
    return CODEC.decode_request(json.dumps(b).encode(), report), report


def encode_req(
    r: c.Request, lossy: bool = False, **options: Any
) -> tuple[dict[str, Any], TranslationReport]:
    report = TranslationReport(lossy)
    out = CODEC.encode_request(r, report, UpstreamOptions(**options))
    return json.loads(out), report


def frames(*events: dict[str, Any], event_lines: bool = True) -> bytes:
    """Anthropic SSE from event objects."""
    out = b""
    for ev in events:
        if event_lines:
            out += b"event: " + ev["type"].encode() + b"\n"
        out += b"data: " + json.dumps(ev).encode() + b"\n\n"
    return out


def sdk_events(raw: bytes) -> list[Any]:
    """Every frame parsed with the SDK's own event types (error frames included)."""
    out: list[Any] = []
    for e in sse_events(raw):
        data = json.loads(e.data)
        if data["type"] == "ping":
            continue  # the SDK skips pings too
        if data["type"] == "error":
            out.append(ErrorResponse.model_validate(data))
        else:
            out.append(_EVENT.validate_python(data))
    return out


def sdk_fold(raw: bytes) -> dict[str, Any]:
    """The message an SDK client assembles from the stream (``accumulate_event``)."""
    snapshot: Any = None
    bufs: dict[int, bytes] = {}
    for ev in sdk_events(raw):
        assert not isinstance(ev, ErrorResponse), f"stream ended with an error: {ev}"
        snapshot = accumulate_event(event=ev, current_snapshot=snapshot, json_bufs=bufs)
    return normalise(Message.model_validate(snapshot.model_dump()))


def normalise(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = msg.model_dump(exclude_none=True)
    for block in out["content"]:
        block.pop("parsed_output", None)
    return out


def sdk_message(raw: bytes) -> dict[str, Any]:
    return normalise(Message.model_validate_json(raw))


def checked_stream(
    events: Iterable[c.StreamEvent], request: c.Request | None = None
) -> tuple[bytes, AnthropicStream]:
    """Encode, then run the strict grammar validator and the SDK parser on the bytes."""
    raw = encode_stream(events, request)
    stream = validate_anthropic_stream(raw)
    sdk_events(raw)
    return raw, stream


def decode_stream(body: bytes, step: int | None = None) -> list[c.StreamEvent]:
    return _codec.decode_stream(CODEC, body, step)


def encode_stream(events: Iterable[c.StreamEvent], request: c.Request | None = None) -> bytes:
    return _codec.encode_stream(CODEC, events, request or req(stream=True))
