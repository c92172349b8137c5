"""Streamed and non-streamed answers agree: the non-streamed client response equals the
fold of the streamed one (same ids, status, content, usage), and an upstream answer
decodes to the same canonical response either way."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from openai.types.responses import Response

from proxai_asgi import canonical as c
from proxai_asgi.codec import fold, unfold
from proxai_asgi.protocols.openai_responses import CODEC
from proxai_asgi.protocols.openai_responses.response import refused_wording

from ._util import decode_stream, encode_stream, encode_validated, req, response, sdk_accumulate

text = st.text(min_size=0, max_size=12)
nonempty = st.text(min_size=1, max_size=12)
citation = st.builds(
    c.Citation,
    url=st.just("https://example.test/a"),
    title=st.one_of(st.none(), text),
    start_index=st.one_of(st.none(), st.integers(0, 50)),
    end_index=st.one_of(st.none(), st.integers(0, 50)),
)
parts = st.one_of(
    st.builds(c.Text, text=text, citations=st.one_of(st.none(), st.lists(citation, max_size=2))),
    st.builds(c.Refusal, text=text),
    st.builds(
        c.Reasoning,
        text=text,
        summary=st.booleans(),
        encrypted_content=st.one_of(st.none(), nonempty),
        item_id=st.one_of(st.none(), st.just("rs_up_1")),
    ),
    st.builds(c.Reasoning, text=text, signature=nonempty),
    st.builds(c.Reasoning, redacted=nonempty),
    st.builds(
        c.ToolCall,
        id=st.sampled_from(["call_1", "toolu_2", "c3"]),
        name=st.sampled_from(["f", "apply_patch"]),
        arguments=text,
        kind=st.sampled_from(["function", "custom"]),
        item_id=st.one_of(st.none(), st.sampled_from(["fc_up", "ctc_up", "toolu_x"])),
    ),
)
stops: st.SearchStrategy[c.StopReason | None] = st.sampled_from(
    [
        None,
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "content_filter",
    ]
)
usages = st.builds(
    c.Usage,
    input_tokens=st.integers(0, 10_000),
    output_tokens=st.integers(0, 10_000),
    cached_tokens=st.integers(0, 100),
    cache_creation_tokens=st.integers(0, 100),
    reasoning_tokens=st.integers(0, 100),
)


@st.composite
def responses(draw: st.DrawFn) -> c.Response:
    content = draw(st.lists(parts, max_size=6))
    for i, p in enumerate(content):  # call ids and item ids are unique in one answer
        if isinstance(p, c.ToolCall):
            p.id = f"{p.id}_{i}"
            if p.item_id is not None:
                p.item_id = f"{p.item_id}_{i}"
        elif isinstance(p, c.Reasoning) and p.item_id is not None:
            p.item_id = f"{p.item_id}_{i}"
    return c.Response(
        id=draw(st.sampled_from(["resp_abc", "msg_01XYZ", "chatcmpl-9z", "plain"])),
        model=draw(st.sampled_from(["gpt-x", "claude-y", ""])),
        content=content,
        stop_reason=draw(stops),
        usage=draw(usages),
        created=draw(st.integers(1, 2_000_000_000)),
    )


EXAMPLES = [
    response(c.Text(text="hi")),
    response(c.Text(text="a"), c.Text(text=""), c.Text(text="b"), c.Refusal(text="r")),
    response(
        c.Reasoning(text="s", summary=True, encrypted_content="e", item_id="rs_1"), c.Text(text="x")
    ),
    response(
        c.Text(text="x"), c.ToolCall(id="a", name="f", arguments="{}"), c.ToolCall(id="b", name="g")
    ),
    response(
        c.Reasoning(redacted="blob"), c.Reasoning(text="t", signature="sig"), c.Text(text="y")
    ),
    response(c.Text(text="cut"), stop_reason="max_tokens"),
    response(c.Refusal(text="no"), stop_reason="refusal"),
    response(),
]


def diverges_by_spec(r: c.Response) -> bool:
    """A refused turn's visible text is a refusal part only when the whole answer is
    known; a stream has sent it as output_text (documented, as for Chat clients)."""
    return refused_wording(r) and any(type(p) is c.Text and p.text for p in r.content)


def test_a_refused_turns_wording_is_a_refusal_part_only_non_streamed() -> None:
    r = response(c.Text(text="I can't."), stop_reason="refusal")
    assert diverges_by_spec(r)
    non_stream = json.loads(CODEC.encode_response(r, req()))
    assert non_stream["output"][0]["content"] == [{"type": "refusal", "refusal": "I can't."}]
    streamed = encode_validated(unfold(r), req(stream=True)).response
    assert streamed is not None
    assert [p["type"] for p in streamed["output"][0]["content"]] == ["output_text"]


def _check_parity(r: c.Response, request: c.Request) -> None:
    stream = encode_validated(unfold(r), request)
    non_stream: dict[str, Any] = json.loads(CODEC.encode_response(r, request))
    assert stream.response == non_stream


@pytest.mark.parametrize("r", EXAMPLES)
def test_non_stream_response_equals_the_fold_of_the_stream(r: c.Response) -> None:
    _check_parity(r, req(stream=True))


@pytest.mark.parametrize("r", EXAMPLES)
def test_the_sdk_accumulated_stream_equals_the_non_stream_response(r: c.Response) -> None:
    final = sdk_accumulate(encode_stream(unfold(r)))
    status = json.loads(CODEC.encode_response(r, req()))["status"]
    if status != "completed":
        assert final is None  # the SDK only returns a final response for completed
        return
    assert final is not None
    non_stream = Response.model_validate_json(CODEC.encode_response(r, req()))
    assert final.model_dump(exclude_none=True) == non_stream.model_dump(exclude_none=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses())
def test_property_non_stream_response_equals_the_fold_of_the_stream(r: c.Response) -> None:
    assume(not diverges_by_spec(r))
    _check_parity(r, req(stream=True, model="fallback"))


@settings(max_examples=100, deadline=None)
@given(responses())
def test_property_an_answer_decodes_the_same_streamed_or_not(r: c.Response) -> None:
    assume(not diverges_by_spec(r))
    from_json = CODEC.decode_response(CODEC.encode_response(r, req()))
    from_stream = fold(decode_stream(encode_stream(unfold(r))))
    assert from_stream.content == from_json.content
    assert (from_stream.id, from_stream.model, from_stream.created) == (
        from_json.id,
        from_json.model,
        from_json.created,
    )
    assert from_stream.stop_reason == from_json.stop_reason
    assert from_stream.usage == from_json.usage


# --------------------------------------------------- any interleaving of canonical blocks

block_kinds = st.sampled_from(
    ["text", "refusal", "reasoning", "summary", "redacted", "tool", "custom"]
)


@st.composite
def interleaved_streams(draw: st.DrawFn) -> list[c.StreamEvent]:
    kinds = draw(st.lists(block_kinds, max_size=5))
    queues: list[list[c.StreamEvent]] = []
    for i, kind in enumerate(kinds):
        if kind in ("text", "refusal"):
            start = c.BlockStart(index=i, kind="text" if kind == "text" else "refusal")
        elif kind in ("reasoning", "summary"):
            start = c.BlockStart(index=i, kind="reasoning", summary=kind == "summary")
        elif kind == "redacted":
            start = c.BlockStart(index=i, kind="redacted_reasoning", redacted="blob")
        else:
            start = c.BlockStart(
                index=i,
                kind="tool_call",
                call_id=f"call_{i}",
                name="f",
                tool_kind="custom" if kind == "custom" else "function",
            )
        q: list[c.StreamEvent] = [start]
        q += [c.BlockDelta(index=i, text=t) for t in draw(st.lists(text, max_size=3))]
        if kind in ("text", "refusal") and draw(st.booleans()):
            q.append(c.Citations(index=i, citations=[c.Citation(url="https://x")]))
        if kind in ("reasoning", "summary") and draw(st.booleans()):
            q.append(c.BlockSignature(index=i, signature="sig", encrypted_content="enc"))
        if draw(st.booleans()):
            q.append(c.BlockStop(index=i))  # else left open for the terminal to close
        queues.append(q)
    events: list[c.StreamEvent] = [c.MessageStart(id="msg_1", model="m", created=1)]
    while any(queues):
        q = draw(st.sampled_from([q for q in queues if q]))
        events.append(q.pop(0))
    if draw(st.booleans()):
        events.append(c.Finish(stop_reason=draw(stops), usage=c.Usage(input_tokens=1)))
    else:
        cut = draw(st.integers(0, len(events)))
        events = [*events[:cut], c.StreamError(status=500, kind="api_error", message="boom")]
    return events


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(interleaved_streams())
def test_property_any_interleaving_of_blocks_encodes_to_a_valid_stream(
    events: list[c.StreamEvent],
) -> None:
    stream = encode_validated(events)
    assert stream.response is not None
    if isinstance(events[-1], c.StreamError):
        assert stream.response["status"] == "failed" and stream.error is not None
