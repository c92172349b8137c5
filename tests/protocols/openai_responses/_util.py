"""Shared helpers of the Responses codec tests."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from openai import omit
from openai._models import construct_type_unchecked
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent

from proxai_asgi import canonical as c
from proxai_asgi.codec import unfold
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols.openai_responses import CODEC
from tests.helpers.validate_responses import ResponsesStream, validate_responses_stream
from tests.protocols import _codec
from tests.protocols._codec import sse_events


def req(**kw: Any) -> c.Request:
    kw.setdefault("model", "gpt-test")
    kw.setdefault("messages", [c.Message(role="user", content=[c.Text(text="hi")])])
    return c.Request(**kw)


def decode_req(body: dict[str, Any], lossy: bool = False) -> tuple[c.Request, TranslationReport]:
    report = TranslationReport(lossy)
    return CODEC.decode_request(json.dumps(body).encode(), report), report


def encode_req(request: c.Request, lossy: bool = False) -> tuple[dict[str, Any], TranslationReport]:
    from proxai_asgi.codec import UpstreamOptions

    report = TranslationReport(lossy)
    body = CODEC.encode_request(request, report, UpstreamOptions(lossy=lossy))
    out: dict[str, Any] = json.loads(body)
    return out, report


def frames(*events: dict[str, Any] | str, event_lines: bool = True) -> bytes:
    """Responses SSE from event objects (a str is sent verbatim as data)."""
    out = b""
    for ev in events:
        if isinstance(ev, str):
            out += b"data: " + ev.encode() + b"\n\n"
            continue
        data = json.dumps(ev).encode()
        if event_lines:
            out += b"event: " + str(ev["type"]).encode() + b"\n"
        out += b"data: " + data + b"\n\n"
    return out


def encode_validated(
    events: Iterable[c.StreamEvent], request: c.Request | None = None
) -> ResponsesStream:
    """Encode a canonical stream and run it through the strict grammar validator and
    the SDK's stream accumulator."""
    body = encode_stream(events, request)
    stream = validate_responses_stream(body)
    sdk_accumulate(body)
    return stream


def stream_of(response: c.Response, request: c.Request | None = None) -> ResponsesStream:
    return encode_validated(unfold(response), request)


def sdk_events(body: bytes) -> list[Any]:
    """Every frame parsed as the SDK's stream event union."""
    return [
        construct_type_unchecked(type_=ResponseStreamEvent, value=json.loads(ev.data))  # type: ignore[arg-type]
        for ev in sse_events(body)
    ]


def sdk_accumulate(body: bytes) -> Response | None:
    """Feed the stream to the openai SDK's own accumulator; the final response when the
    stream completed."""
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    final: Response | None = None
    for raw in sse_events(body):
        data = json.loads(raw.data)
        if data["type"] == "error":
            continue  # the SDK raises on it before accumulating
        event: Any = construct_type_unchecked(type_=ResponseStreamEvent, value=data)  # type: ignore[arg-type]
        for out in state.handle_event(event):
            if out.type == "response.completed":
                final = Response.model_validate(out.response.to_dict())
    return final


def response(*content: c.Part, **kw: Any) -> c.Response:
    kw.setdefault("id", "resp_abc123")
    kw.setdefault("model", "gpt-test")
    kw.setdefault("created", 1700000000)
    kw.setdefault("stop_reason", "end_turn")
    kw.setdefault("usage", c.Usage(input_tokens=10, output_tokens=5))
    return c.Response(content=list(content), **kw)


def client_json(resp: c.Response, request: c.Request | None = None) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(CODEC.encode_response(resp, request or req()))
    Response.model_validate(out)
    return out


def decode_stream(body: bytes, step: int | None = None) -> list[c.StreamEvent]:
    return _codec.decode_stream(CODEC, body, step)


def encode_stream(events: Iterable[c.StreamEvent], request: c.Request | None = None) -> bytes:
    return _codec.encode_stream(CODEC, events, request or req(stream=True))
