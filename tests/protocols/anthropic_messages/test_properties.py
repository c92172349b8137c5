"""Robustness and round-trip properties (hypothesis)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.anthropic_messages import CODEC, wire
from proxai_asgi.sse import SSEEvent
from tests.helpers import captures as cap
from tests.helpers.schemas import plain_tools

from ._util import decode_req, encode_req

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_keys = st.sampled_from(
    ["type", "index", "delta", "content_block", "message", "text", "error", "usage", "id", "x"]
)
_types = st.sampled_from(
    [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
        "text",
        "tool_use",
        "thinking",
        "text_delta",
        "input_json_delta",
        "nope",
    ]
)
# objects shaped roughly like the protocol's, so the fuzz reaches deep code paths
_shaped: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.integers(-1, 3) | st.text(max_size=5) | _types,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(_keys, inner, max_size=5)
        | st.builds(
            lambda t, d: {"type": t, **d}, _types, st.dictionaries(_keys, inner, max_size=4)
        )
    ),
    max_leaves=25,
)


def _only_proxy_errors(fn: Any, *args: Any) -> None:
    with contextlib.suppress(ProxyError):
        fn(*args)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), _json_values.map(lambda v: json.dumps(v).encode())))
def test_arbitrary_bytes_into_every_decoder_raise_nothing_but_proxy_error(raw: bytes) -> None:
    _only_proxy_errors(CODEC.decode_request, raw, TranslationReport())
    _only_proxy_errors(CODEC.decode_response, raw)
    assert isinstance(CODEC.decode_error(500, raw), ProxyError)
    dec = CODEC.stream_decoder()
    _only_proxy_errors(dec.feed, SSEEvent(None, raw))


@settings(max_examples=300, deadline=None)
@given(st.lists(_shaped, max_size=8))
def test_arbitrary_event_sequences_raise_nothing_but_proxy_error_and_end_once(
    objs: list[Any],
) -> None:
    dec = CODEC.stream_decoder()
    out: list[c.StreamEvent] = []
    try:
        for o in objs:
            out.extend(dec.feed(SSEEvent(None, json.dumps(o).encode())))
        out.extend(dec.close())
    except ProxyError:
        return
    assert sum(isinstance(e, (c.Finish, c.StreamError)) for e in out) == 1
    assert isinstance(out[-1], (c.Finish, c.StreamError))


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "model",
                "max_tokens",
                "messages",
                "system",
                "tools",
                "tool_choice",
                "thinking",
                "stream",
            ]
        ),
        _shaped,
    )
)
def test_arbitrary_request_shapes_raise_nothing_but_proxy_error(b: dict[str, Any]) -> None:
    _only_proxy_errors(CODEC.decode_request, json.dumps(b).encode(), TranslationReport())


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["id", "content", "usage", "stop_reason", "model"]), _shaped)
)
def test_arbitrary_message_shapes_raise_nothing_but_proxy_error(b: dict[str, Any]) -> None:
    _only_proxy_errors(CODEC.decode_response, json.dumps(b).encode())


# ------------------------------------------------------- wire-type round trip


def _wire_stable(raw: bytes, typ: Any) -> None:
    first = msgspec.json.decode(raw, type=typ)
    again = msgspec.json.decode(msgspec.json.encode(first), type=typ)
    assert again == first


def test_decode_encode_decode_of_the_wire_types_is_stable_on_captures() -> None:
    for name in cap.capture_names("anthropic_"):
        record = cap.load(name)
        _wire_stable(cap.request_body(name), wire.MessagesRequest)
        body = cap.response_body(name)
        if record["response"]["status"] != 200:
            _wire_stable(body, wire.ErrorEvent)
        elif record["stream"]:
            for frame in body.split(b"\n\n"):
                if b"data: " in frame:
                    _wire_stable(frame.split(b"data: ", 1)[1], wire.StreamEvent)
        else:
            _wire_stable(body, wire.Message)


# ---------------------------------------------- canonical -> Anthropic -> canonical

_text = st.text(min_size=1, max_size=6)
_args = st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=3).map(
    lambda d: msgspec.json.encode(d).decode()
)
_user_part = st.one_of(
    _text.map(lambda t: c.Text(text=t)),
    st.builds(c.Image, url=st.just("https://x/i.png")),
    st.builds(c.File, data=st.just("JVBERi0"), media_type=st.just("application/pdf")),
)
_assistant_part = st.one_of(
    _text.map(lambda t: c.Text(text=t)),
    st.builds(c.Reasoning, text=st.text(max_size=4), signature=_text),
    st.builds(c.Reasoning, redacted=_text),
    st.builds(
        c.ToolCall,
        id=st.from_regex(r"toolu_[a-z0-9]{1,4}", fullmatch=True),
        name=_text,
        arguments=_args,
    ),
)


@st.composite
def conversations(draw: st.DrawFn) -> c.Request:
    messages: list[c.Message] = []
    for _ in range(draw(st.integers(1, 4))):
        messages.append(
            c.Message(role="user", content=draw(st.lists(_user_part, min_size=1, max_size=3)))
        )
        parts: list[c.Part] = draw(st.lists(_assistant_part, min_size=1, max_size=3))
        messages.append(c.Message(role="assistant", content=parts))
        calls = [p for p in parts if isinstance(p, c.ToolCall)]
        if calls:
            results: list[c.Part] = [
                c.ToolResult(call_id=p.id, content=[c.Text(text=draw(_text))]) for p in calls
            ]
            messages.append(c.Message(role="tool", content=results))
    return c.Request(
        model="claude-x",
        max_tokens=draw(st.integers(1, 9999)),
        messages=messages,
        system=draw(st.lists(_text.map(lambda t: c.Text(text=t)), max_size=2)),
        tools=[c.Tool(name="f", description="d", parameters={"type": "object", "properties": {}})],
        tool_choice=draw(
            st.sampled_from(
                [None, c.ToolChoice(mode="required"), c.ToolChoice(mode="tool", name="f")]
            )
        ),
        temperature=draw(st.sampled_from([None, 0.5])),
        stop=draw(st.lists(_text, max_size=2)),
        stream=draw(st.booleans()),
        user=draw(st.sampled_from([None, "u"])),
    )


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_canonical_to_anthropic_to_canonical_round_trips(r: c.Request) -> None:
    body, report = encode_req(r)
    assert report.dropped == []
    back, report = decode_req(body)
    assert report.dropped == []
    assert back.messages == r.messages  # tool results + next user text share a turn
    assert back.system == r.system
    assert (back.max_tokens, back.temperature, back.stop, back.stream, back.user) == (
        r.max_tokens,
        r.temperature,
        r.stop,
        r.stream,
        r.user,
    )
    assert plain_tools(back.tools) == r.tools
    assert back.tool_choice == r.tool_choice
