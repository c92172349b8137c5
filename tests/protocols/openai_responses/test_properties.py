"""Arbitrary input into every decoder raises nothing but ProxyError; the strict validator
itself catches broken streams."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.codec import unfold
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.openai_responses import CODEC
from proxai_asgi.sse import SSEEvent
from tests.helpers.validate_responses import validate_responses_stream

from ._util import encode_stream, response
from .test_request_decode import CODEX_REQUEST
from .test_stream_decoder import created

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
EVENT_TYPES = [
    "response.created",
    "response.in_progress",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.refusal.delta",
    "response.output_text.annotation.added",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.reasoning_text.delta",
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
    "response.unknown",
]
ITEM_TYPES = ["message", "reasoning", "function_call", "custom_tool_call", "web_search_call", "x"]
shaped_events = st.fixed_dictionaries(
    {"type": st.sampled_from(EVENT_TYPES)},
    optional={
        "output_index": st.integers(-1, 3) | json_values,
        "content_index": st.integers(0, 2) | json_values,
        "summary_index": st.integers(0, 2),
        "item_id": st.sampled_from(["a", "b"]) | json_values,
        "delta": st.text(max_size=4) | json_values,
        "item": st.fixed_dictionaries(
            {"type": st.sampled_from(ITEM_TYPES)},
            optional={
                "id": st.sampled_from(["a", "b"]),
                "call_id": st.text(max_size=3),
                "name": st.text(max_size=3),
                "content": json_values,
                "summary": json_values,
                "encrypted_content": json_values,
            },
        )
        | json_values,
        "part": st.fixed_dictionaries(
            {"type": st.sampled_from(["output_text", "refusal", "reasoning_text", "x"])},
            optional={"text": json_values},
        )
        | json_values,
        "response": st.fixed_dictionaries(
            {}, optional={"status": st.sampled_from(["completed", "failed"]), "error": json_values}
        )
        | json_values,
        "error": json_values,
        "code": json_values,
        "message": json_values,
    },
)


def _only_proxy_errors(fn: Any, *args: Any) -> None:
    with contextlib.suppress(ProxyError):
        fn(*args)


@settings(max_examples=120, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_into_the_request_decoder_raise_only_proxy_error(body: bytes) -> None:
    _only_proxy_errors(CODEC.decode_request, body, TranslationReport())


@settings(max_examples=120, deadline=None)
@given(json_values)
def test_arbitrary_json_into_the_request_decoder_raises_only_proxy_error(value: Any) -> None:
    _only_proxy_errors(CODEC.decode_request, json.dumps(value).encode(), TranslationReport())


@settings(max_examples=150, deadline=None)
@given(
    st.lists(json_values, max_size=4),
    st.sampled_from(["input", "tools", "tool_choice", "text", "reasoning"]),
)
def test_arbitrary_json_in_request_fields_raises_only_proxy_error(
    items: list[Any], key: str
) -> None:
    body = {
        **CODEX_REQUEST,
        key: items if key in ("input", "tools") else (items[0] if items else None),
    }
    _only_proxy_errors(CODEC.decode_request, json.dumps(body).encode(), TranslationReport())


@settings(max_examples=120, deadline=None)
@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_arbitrary_upstream_bodies_raise_only_proxy_error(body: bytes) -> None:
    _only_proxy_errors(CODEC.decode_response, body)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(100, 599),
    st.binary(max_size=100) | json_values.map(lambda v: json.dumps(v).encode()),
)
def test_arbitrary_error_bodies_become_a_proxy_error_with_their_status(
    status: int, body: bytes
) -> None:
    err = CODEC.decode_error(status, body)
    assert isinstance(err, ProxyError) and err.message


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.none() | st.text(max_size=10), st.binary(max_size=60)), max_size=6))
def test_arbitrary_sse_events_into_the_stream_decoder_raise_only_proxy_error(
    events: list[tuple[str | None, bytes]],
) -> None:
    dec = CODEC.stream_decoder()

    def run() -> None:
        for event, data in events:
            dec.feed(SSEEvent(event, data))
        dec.close()

    _only_proxy_errors(run)


@settings(max_examples=150, deadline=None)
@given(st.lists(shaped_events, max_size=8))
def test_protocol_shaped_garbage_into_the_stream_decoder_raises_only_proxy_error(
    events: list[dict[str, Any]],
) -> None:
    dec = CODEC.stream_decoder()
    out: list[c.StreamEvent] = []

    def run() -> None:
        for ev in [*created(), *events]:
            out.extend(dec.feed(SSEEvent(None, json.dumps(ev).encode())))
        out.extend(dec.close())

    try:
        run()
    except ProxyError:
        return
    terminals = [e for e in out if isinstance(e, (c.Finish, c.StreamError))]
    assert len(terminals) == 1 and out[-1] is terminals[0]


# ------------------------------------------------------------- the validator can fail


def _valid() -> bytes:
    return encode_stream(
        unfold(response(c.Text(text="hi"), c.ToolCall(id="a", name="f", arguments="{}")))
    )


def _frames(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(f.split(b"data: ", 1)[1]) for f in body.split(b"\n\n") if f]


def _render(events: list[dict[str, Any]]) -> bytes:
    return b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(e).encode() + b"\n\n"
        for e in events
    )


def _without(kind: str) -> bytes:
    evs = [e for e in _frames(_valid()) if e["type"] != kind]
    for i, e in enumerate(evs):
        e["sequence_number"] = i
    return _render(evs)


def test_the_validator_accepts_a_valid_stream() -> None:
    assert validate_responses_stream(_valid()).response is not None


@pytest.mark.parametrize(
    ("broken", "complaint"),
    [
        (lambda: _valid() + b"data: [DONE]\n\n", "DONE"),
        (
            lambda: _valid().replace(b'"sequence_number":3', b'"sequence_number":4', 1),
            "sequence_number",
        ),
        (
            lambda: _valid().replace(b"event: response.in_progress", b"event: response.created", 1),
            "event line",
        ),
        (lambda: _without("response.content_part.added"), "content part"),
        (lambda: _without("response.output_text.done"), "text was done"),
        (lambda: _without("response.output_item.done"), "never done"),
        (lambda: _without("response.completed"), "without a terminal"),
        (
            lambda: _valid().replace(
                b'"arguments":"{}","status":"completed"}',
                b'"arguments":"{!}","status":"completed"}',
                1,
            ),
            "arguments differ",
        ),
        (lambda: _valid().replace(b'"id":"fc_abc123_1"', b'"id":"call_x"'), "lacks"),
    ],
)
def test_the_validator_rejects_broken_streams(broken: Any, complaint: str) -> None:
    with pytest.raises(AssertionError, match=complaint):
        validate_responses_stream(broken())
