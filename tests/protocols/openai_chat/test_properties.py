"""Property tests: arbitrary input never raises anything but ProxyError, decoder output
always follows the canonical stream grammar, and any well-formed canonical stream
encodes to a valid Chat stream."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.openai_chat import CODEC
from proxai_asgi.sse import SSEEvent
from tests.helpers.validate_chat import validate_chat_stream

from ._util import encode_stream, req

FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_word = st.sampled_from(
    [
        "user",
        "assistant",
        "tool",
        "system",
        "developer",
        "function",
        "text",
        "image_url",
        "file",
        "function",
        "custom",
        "refusal",
        "x",
        "",
    ]
)
_value = _json | _word


def _msg() -> st.SearchStrategy[dict[str, Any]]:
    part = st.fixed_dictionaries(
        {"type": _word},
        optional={"text": _value, "image_url": _value, "file": _value, "refusal": _value},
    )
    return st.fixed_dictionaries(
        {"role": _word},
        optional={
            "content": _value | st.lists(part, max_size=3),
            "tool_calls": st.lists(
                st.fixed_dictionaries(
                    {"id": _value}, optional={"type": _word, "function": _value, "custom": _value}
                ),
                max_size=2,
            ),
            "tool_call_id": _value,
            "refusal": _value,
            "reasoning_content": _value,
            "name": _value,
        },
    )


_request = st.fixed_dictionaries(
    {"model": st.text(max_size=5) | _value, "messages": st.lists(_msg(), max_size=4) | _value},
    optional={
        "tools": st.lists(
            st.fixed_dictionaries({"type": _word}, optional={"function": _value, "custom": _value}),
            max_size=2,
        ),
        "tool_choice": _value,
        "stop": _value,
        "stream_options": _value,
        "response_format": st.fixed_dictionaries({"type": _word}, optional={"json_schema": _value}),
        "functions": _value,
        "function_call": _value,
        "max_tokens": _value,
        "temperature": _value,
    },
)


def _only_proxy_errors(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except ProxyError as e:
        assert 400 <= e.status <= 599


@FAST
@given(st.binary(max_size=200))
def test_property_arbitrary_bytes_into_every_decoder_raise_only_proxy_errors(data: bytes) -> None:
    _only_proxy_errors(CODEC.decode_request, data, TranslationReport())
    _only_proxy_errors(CODEC.decode_response, data)
    err = CODEC.decode_error(503, data)
    assert err.status == 503 and isinstance(err.message, str) and err.message
    dec = CODEC.stream_decoder()
    _only_proxy_errors(dec.feed, SSEEvent(None, data))


@FAST
@given(_json | _request)
def test_property_arbitrary_json_requests_raise_only_proxy_errors(obj: Any) -> None:
    _only_proxy_errors(CODEC.decode_request, json.dumps(obj).encode(), TranslationReport())


@FAST
@given(_request)
def test_property_requests_that_decode_re_encode_for_an_upstream(obj: Any) -> None:
    from proxai_asgi.codec import UpstreamOptions

    try:
        r = CODEC.decode_request(json.dumps(obj).encode(), TranslationReport())
    except ProxyError:
        return
    _only_proxy_errors(CODEC.encode_request, r, TranslationReport(), UpstreamOptions())


_choice = st.fixed_dictionaries(
    {"index": st.sampled_from([0, 0, 0, 1]) | _value},
    optional={
        "delta": st.fixed_dictionaries(
            {},
            optional={
                "role": st.sampled_from(["assistant", "assistant", "user"]),
                "content": st.text(max_size=4) | _value,
                "refusal": st.text(max_size=4),
                "reasoning_content": st.text(max_size=4),
                "tool_calls": st.lists(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "index": st.integers(0, 2),
                            "id": st.sampled_from(["a", "b", None]),
                            "type": st.sampled_from(["function", "custom"]),
                            "function": st.fixed_dictionaries(
                                {},
                                optional={
                                    "name": st.sampled_from(["f", None]),
                                    "arguments": st.text(max_size=3),
                                },
                            ),
                            "custom": st.fixed_dictionaries(
                                {}, optional={"name": st.just("p"), "input": st.text(max_size=3)}
                            ),
                        },
                    ),
                    max_size=2,
                ),
            },
        ),
        "finish_reason": st.sampled_from(
            [None, None, None, "stop", "length", "tool_calls", "weird"]
        ),
        "logprobs": st.none() | _value,
    },
)
_chunk = st.fixed_dictionaries(
    {},
    optional={
        "id": st.sampled_from(["c1", "c1", "c2"]),
        "model": st.sampled_from(["m", "m", "n"]),
        "created": st.integers(0, 10),
        "choices": st.lists(_choice, max_size=2),
        "usage": st.none()
        | st.fixed_dictionaries(
            {"prompt_tokens": st.integers(0, 9), "completion_tokens": st.integers(0, 9)}
        ),
        "error": _value,
        "object": st.sampled_from(["chat.completion.chunk", ""]),
    },
)
_frame = (
    _chunk.map(lambda d: SSEEvent(None, json.dumps(d).encode()))
    | st.just(SSEEvent(None, b"[DONE]"))
    | st.binary(max_size=10).map(lambda b: SSEEvent(None, b))
    | _json.map(lambda d: SSEEvent(None, json.dumps(d).encode()))
    | _json.map(lambda d: SSEEvent("error", json.dumps(d).encode()))
)


@FAST
@given(st.lists(_frame, max_size=12))
def test_property_stream_decoder_raises_only_proxy_errors_and_keeps_the_canonical_grammar(
    frames: list[SSEEvent],
) -> None:
    dec = CODEC.stream_decoder()
    out: list[c.StreamEvent] = []
    try:
        for f in frames:
            out += dec.feed(f)
        out += dec.close()
    except ProxyError as e:
        assert e.status == 502
        return
    open_: set[int] = set()
    seen: set[int] = set()
    terminals = 0
    started = False
    for ev in out:
        assert terminals == 0, f"{ev} after the terminal event"
        if isinstance(ev, c.MessageStart):
            assert not started
            started = True
        elif isinstance(ev, c.BlockStart):
            assert started and ev.index not in seen
            seen.add(ev.index)
            open_.add(ev.index)
        elif isinstance(ev, (c.BlockDelta, c.BlockStop)):
            assert ev.index in open_
            if isinstance(ev, c.BlockStop):
                open_.remove(ev.index)
        elif isinstance(ev, c.Finish):
            assert started and not open_, "Finish with open blocks"
            terminals += 1
        elif isinstance(ev, c.StreamError):
            terminals += 1
    assert terminals == 1
    assert sorted(seen) == list(range(len(seen)))


@st.composite
def canonical_streams(draw: st.DrawFn) -> list[c.StreamEvent]:
    """A well-formed canonical stream: blocks of any kind, deltas interleaved at random,
    some blocks never stopped, ended by a Finish or a StreamError at a random point."""
    kinds = draw(
        st.lists(
            st.sampled_from(["text", "reasoning", "redacted_reasoning", "tool_call", "refusal"]),
            max_size=5,
        )
    )
    blocks: list[tuple[int, list[c.StreamEvent]]] = []
    for i, kind in enumerate(kinds):
        start = c.BlockStart(
            index=i,
            kind=kind,  # type: ignore[arg-type]
            call_id=draw(st.sampled_from(["", f"call_{i}"])) if kind == "tool_call" else None,
            name=draw(st.sampled_from(["f", "apply_patch"])) if kind == "tool_call" else None,
            tool_kind=draw(st.sampled_from(["function", "custom"])),
        )
        evs: list[c.StreamEvent] = [start]
        texts = draw(st.lists(st.text(alphabet="ab é\n{}", max_size=5), max_size=3))
        if kind == "refusal":  # refusal wording never coincides with content wording
            texts = [f"no:{t}" for t in texts]
        evs += [c.BlockDelta(index=i, text=t) for t in texts]
        if draw(st.booleans()):
            evs.append(c.Citations(index=i, citations=[c.Citation(url="https://x.test")]))
        if draw(st.booleans()):
            evs.append(c.BlockSignature(index=i, signature="s"))
        if draw(st.integers(0, 3)):
            evs.append(c.BlockStop(index=i))
        blocks.append((i, evs))
    # interleave: repeatedly take the next event of a random block whose start is out
    body: list[c.StreamEvent] = []
    pending = [list(evs) for _, evs in blocks]
    while any(pending):
        j = draw(st.sampled_from([k for k, p in enumerate(pending) if p]))
        body.append(pending[j].pop(0))
    events: list[c.StreamEvent] = [
        c.MessageStart(id=draw(st.sampled_from(["msg_1", "resp_2", ""])), model="m", created=3),
        *body,
    ]
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(events)))
        return [*events[:cut], c.StreamError(status=500, kind="api_error", message="boom")]
    return [
        *events,
        c.Finish(
            stop_reason=draw(
                st.sampled_from([None, "end_turn", "tool_use", "refusal", "max_tokens"])
            ),
            usage=c.Usage(
                input_tokens=draw(st.integers(0, 99)), output_tokens=draw(st.integers(0, 99))
            ),
            refusal_explanation=draw(st.none() | st.just("no: explained")),
        ),
    ]


@FAST
@given(canonical_streams(), st.booleans())
def test_property_any_interleaving_of_blocks_encodes_to_a_valid_chat_stream(
    events: list[c.StreamEvent], include_usage: bool
) -> None:
    body = encode_stream(events, req(stream=True, include_usage=include_usage))
    s = validate_chat_stream(body, include_usage=include_usage)
    n_tools = sum(1 for e in events if isinstance(e, c.BlockStart) and e.kind == "tool_call")
    if s.error is None:
        assert len(s.tool_calls) == n_tools
