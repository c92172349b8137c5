"""A non-streamed client response equals the fold of the streamed one (same ids,
created, content, refusal, reasoning, tool calls, annotations, finish_reason, usage)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion

from proxai_asgi import canonical as c
from proxai_asgi.codec import unfold
from proxai_asgi.protocols.openai_chat import CODEC
from tests.helpers.validate_chat import validate_chat_stream

from ._util import (
    encode_stream,
    normalized_response,
    normalized_stream,
    req,
    sdk_accumulate,
    sdk_calls,
)

STOPS: list[c.StopReason | None] = [
    None,
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "content_filter",
]


def both(r: c.Response) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    request = req(stream=True, include_usage=True)
    body = CODEC.encode_response(r, request)
    stream = encode_stream(unfold(r), request)
    s = validate_chat_stream(stream, include_usage=True)
    return normalized_response(body), normalized_stream(s), body, stream


def diverges_by_spec(r: c.Response) -> bool:
    """The spec's streaming refusal rule: text already streamed as content cannot become
    the refusal afterwards, so a refused turn with plain text differs (documented)."""
    texts = "".join(p.text for p in r.content if isinstance(p, c.Text))
    refusals = "".join(p.text for p in r.content if isinstance(p, c.Refusal))
    if r.stop_reason == "refusal" and texts and not refusals:
        return True
    return bool(texts) and texts == refusals


CASES = [
    c.Response(
        id="msg_1", model="m", created=7, content=[c.Text(text="hello")], stop_reason="end_turn"
    ),
    c.Response(
        id="resp_2",
        model="m",
        created=7,
        content=[
            c.Reasoning(text="a", signature="s"),
            c.Reasoning(text="b", summary=True),
            c.Text(text="x", citations=[c.Citation(url="https://u.test", title="U")]),
            c.ToolCall(id="call_1", name="f", arguments='{"a":1}'),
            c.ToolCall(id="", name="p", arguments="raw", kind="custom"),
        ],
        stop_reason="tool_use",
        usage=c.Usage(input_tokens=5, output_tokens=6, cached_tokens=1, reasoning_tokens=2),
    ),
    c.Response(
        id="chatcmpl-3",
        model="m",
        created=7,
        content=[c.Refusal(text="No.")],
        stop_reason="refusal",
    ),
    c.Response(
        id="x4",
        model="m",
        created=7,
        content=[],
        stop_reason="refusal",
        refusal_explanation="unsafe",
    ),
    c.Response(
        id="x5",
        model="m",
        created=7,
        content=[c.Text(text="ok"), c.Refusal(text="but no")],
        stop_reason="refusal",
    ),
    c.Response(
        id="x6",
        model="m",
        created=7,
        content=[c.ToolCall(id="t", name="f")],
        stop_reason="end_turn",
    ),
    c.Response(
        id="x7", model="m", created=7, content=[c.Text(text="cut")], stop_reason="max_tokens"
    ),
    c.Response(
        id="x8", model="m", created=7, content=[], stop_reason="refusal", refusal_explanation=""
    ),
]


@pytest.mark.parametrize("r", CASES, ids=[r.id for r in CASES])
def test_non_streamed_response_equals_the_fold_of_the_stream(r: c.Response) -> None:
    whole, folded, _, _ = both(r)
    assert whole == folded


@pytest.mark.parametrize("r", CASES, ids=[r.id for r in CASES])
def test_openai_sdk_sees_the_same_completion_streamed_and_not(r: c.Response) -> None:
    _, _, body, stream = both(r)
    assume_function_only = all(
        not (isinstance(p, c.ToolCall) and p.kind == "custom") for p in r.content
    )
    if not assume_function_only:
        pytest.skip("the SDK's chunk type only models function tool call deltas")
    whole = ChatCompletion.model_validate_json(body)
    streamed = sdk_accumulate(stream)
    for a, b in ((whole, streamed),):
        assert (a.id, a.created, a.model) == (b.id, b.created, b.model)
        ma, mb = a.choices[0].message, b.choices[0].message
        assert (ma.content or None, ma.refusal) == (mb.content or None, mb.refusal)
        assert sdk_calls(ma.tool_calls) == sdk_calls(mb.tool_calls)
        assert a.choices[0].finish_reason == b.choices[0].finish_reason
        assert a.usage == b.usage


def test_refused_turn_with_plain_text_is_the_documented_divergence() -> None:
    r = c.Response(
        id="x",
        model="m",
        created=7,
        content=[c.Text(text="I won't.")],
        stop_reason="refusal",
        refusal_explanation="e",
    )
    whole, folded, _, _ = both(r)
    assert (whole["content"], whole["refusal"]) == (None, "I won't.")
    assert (folded["content"], folded["refusal"]) == ("I won't.", None)  # never duplicated


# ------------------------------------------------------------------------ property


_text = st.text(max_size=12)
_citation = st.builds(
    c.Citation, url=st.sampled_from(["https://a.test", "https://b.test"]), title=st.none() | _text
)
_part = st.one_of(
    st.builds(
        c.Text, text=_text, citations=st.none() | st.lists(_citation, min_size=1, max_size=2)
    ),
    st.builds(c.Refusal, text=_text),
    st.builds(c.Reasoning, text=_text, summary=st.booleans(), signature=st.none() | st.just("SIG")),
    st.builds(c.Reasoning, redacted=st.just("RED")),
    st.builds(
        c.ToolCall,
        id=st.just("?"),
        name=st.sampled_from(["f", "g", "apply_patch"]),
        arguments=_text,
        kind=st.sampled_from(["function", "custom"]),
    ),
)


@st.composite
def responses(draw: st.DrawFn) -> c.Response:
    parts: list[c.Part] = list(draw(st.lists(_part, max_size=6)))
    n = 0
    for p in parts:
        if isinstance(p, c.ToolCall):
            p.id = draw(st.sampled_from(["", f"call_{n}"]))
            n += 1
    return c.Response(
        id=draw(st.sampled_from(["msg_01", "resp_x", "chatcmpl-y", "plain"])),
        model=draw(st.sampled_from(["m", "gpt-4o"])),
        created=draw(st.integers(1, 2**31)),
        content=parts,
        stop_reason=draw(st.sampled_from(STOPS)),
        refusal_explanation=draw(st.none() | _text),
        usage=draw(
            st.builds(
                c.Usage,
                input_tokens=st.integers(0, 10**6),
                output_tokens=st.integers(0, 10**6),
                cached_tokens=st.integers(0, 100),
                reasoning_tokens=st.integers(0, 100),
            )
        ),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses())
def test_property_non_streamed_response_equals_the_fold_of_the_stream(r: c.Response) -> None:
    assume(not diverges_by_spec(r))
    whole, folded, _, _ = both(r)
    assert whole == folded
