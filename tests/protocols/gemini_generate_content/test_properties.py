"""Robustness and round-trip properties of the Gemini codec (hypothesis)."""

from __future__ import annotations

import base64
import contextlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions, fold, unfold
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.gemini_generate_content import CODEC, signatures
from proxai_asgi.sse import SSEEvent
from tests.helpers.validate_gemini import validate_gemini_stream

from ._util import stream_events

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_keys = st.sampled_from(
    [
        "candidates",
        "content",
        "parts",
        "text",
        "thought",
        "thoughtSignature",
        "functionCall",
        "functionResponse",
        "name",
        "args",
        "finishReason",
        "promptFeedback",
        "blockReason",
        "usageMetadata",
        "error",
        "role",
        "contents",
        "tools",
        "functionDeclarations",
    ]
)
_atoms = (
    st.none()
    | st.integers(-1, 3)
    | st.text(max_size=5)
    | st.sampled_from(
        ["STOP", "MAX_TOKENS", "SAFETY", "MALFORMED_FUNCTION_CALL", "model", "user", "AUTO", "ANY"]
    )
)
# objects shaped roughly like the protocol's, so the fuzz reaches deep code paths
_shaped: st.SearchStrategy[Any] = st.recursive(
    _atoms,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=5),
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
    _only_proxy_errors(CODEC.stream_decoder().feed, SSEEvent(None, raw))


@settings(max_examples=300, deadline=None)
@given(st.lists(_shaped, max_size=6))
def test_arbitrary_frame_sequences_end_once(objs: list[Any]) -> None:
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


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _shaped))
def test_arbitrary_request_and_answer_shapes_raise_nothing_but_proxy_error(
    b: dict[str, Any],
) -> None:
    raw = json.dumps(b).encode()
    _only_proxy_errors(CODEC.decode_request, raw, TranslationReport())
    _only_proxy_errors(CODEC.decode_response, raw)


# --------------------------------------------------- canonical round trips

_words = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1, max_size=12)
_names = st.sampled_from(["get", "put", "run_shell_command"])
# Gemini's signatures are base64 bytes
_sig = st.binary(min_size=1, max_size=24).map(lambda b: base64.b64encode(b).decode())


@st.composite
def conversations(draw: st.DrawFn) -> c.Request:
    """What Gemini can express: text turns, model turns with text and calls (with ids),
    their results, and Gemini's own signatures on the calls."""
    messages: list[c.Message] = []
    n = 0
    for _ in range(draw(st.integers(1, 3))):
        messages.append(c.Message(role="user", content=[c.Text(text=draw(_words))]))
        parts: list[c.Part] = []
        if draw(st.booleans()):
            parts.append(c.Text(text=draw(_words)))
        calls = []
        for k in range(draw(st.integers(0, 3))):
            if k == 0 and draw(st.booleans()):
                parts.append(c.Reasoning(summary=True, thought_signature=draw(_sig)))
            call = c.ToolCall(id=f"call_{n}", name=draw(_names), arguments='{"a":1}')
            n += 1
            calls.append(call)
            parts.append(call)
        if not parts:
            parts.append(c.Text(text=draw(_words)))  # a model turn between user turns
        messages.append(c.Message(role="assistant", content=parts))
        if calls:
            results: list[c.Part] = [
                c.ToolResult(
                    call_id=x.id, content=[c.Text(text=draw(_words))], is_error=draw(st.booleans())
                )
                for x in calls
            ]
            messages.append(c.Message(role="tool", content=results))
    return c.Request(
        model="gemini-x",
        messages=messages,
        system=[c.Text(text=draw(_words))] if draw(st.booleans()) else [],
        max_tokens=draw(st.none() | st.integers(1, 10_000)),
        temperature=draw(st.none() | st.sampled_from([0.0, 0.5, 1.0])),
        stop=draw(st.lists(_words, max_size=2)),
    )


def _with_sentinels(req: c.Request) -> c.Request:
    """The request as it comes back: a model turn whose first call had no signature now
    carries the documented sentinel."""
    for m in req.messages:
        if m.role != "assistant":
            continue
        first = next((i for i, p in enumerate(m.content) if isinstance(p, c.ToolCall)), None)
        if first is None:
            continue
        before = m.content[first - 1] if first else None
        if not isinstance(before, c.Reasoning):
            sentinel = c.Reasoning(summary=True, thought_signature=signatures.SKIP_VALIDATOR)
            m.content.insert(first, sentinel)
    return req


@settings(max_examples=200, deadline=None)
@given(conversations())
def test_what_gemini_can_express_survives_encode_then_decode(req: c.Request) -> None:
    body = CODEC.encode_request(req, TranslationReport(), UpstreamOptions())
    again = CODEC.decode_request(body, TranslationReport(), "gemini-x", False)  # type: ignore[call-arg]
    assert again == _with_sentinels(req)


@st.composite
def answers(draw: st.DrawFn) -> c.Response:
    parts: list[c.Part] = []
    if draw(st.booleans()):
        parts.append(c.Reasoning(text=draw(_words), summary=True))
    if draw(st.booleans()):
        parts.append(c.Text(text=draw(_words)))
    calls = draw(st.integers(0, 2))
    for k in range(calls):
        if k == 0 and draw(st.booleans()):
            parts.append(c.Reasoning(summary=True, thought_signature=draw(_sig)))
        parts.append(c.ToolCall(id=f"toolu_{k}", name=draw(_names), arguments='{"q":"x"}'))
    stop: c.StopReason = "tool_use" if calls else draw(st.sampled_from(["end_turn", "max_tokens"]))
    usage = c.Usage(input_tokens=draw(st.integers(0, 99)), output_tokens=draw(st.integers(0, 99)))
    return c.Response(id="resp-p", model="gemini-x", content=parts, stop_reason=stop, usage=usage)


@settings(max_examples=200, deadline=None)
@given(answers())
def test_a_gemini_client_stream_decodes_back_to_the_answer(r: c.Response) -> None:
    enc = CODEC.stream_encoder(c.Request(model="m", messages=[], stream=True))
    raw = b"".join(enc.encode(e) for e in unfold(r))
    assert validate_gemini_stream(raw).error is None
    assert fold(stream_events(raw)) == r
    whole = CODEC.encode_response(r, c.Request(model="m", messages=[]))
    assert CODEC.decode_response(whole) == r
