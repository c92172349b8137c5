"""Client stream encode: canonical stream events -> Anthropic SSE.

Every encoder output here goes through the strict grammar validator
(tests/helpers/validate_anthropic.py) and the SDK's own event types."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry
from proxai_asgi.codec import fold, unfold
from proxai_asgi.protocols._kit import tokens
from proxai_asgi.protocols.anthropic_messages import CODEC
from tests.helpers import captures as cap
from tests.helpers.validate_anthropic import validate_anthropic_stream

from ._util import checked_stream, decode_stream, req, sdk_fold, sdk_message

START = c.MessageStart(id="chatcmpl-9", model="gpt-x")
FINISH = c.Finish(stop_reason="end_turn", usage=c.Usage(input_tokens=10, output_tokens=4))


def _fold_agrees(r: c.Response, request: c.Request | None = None) -> None:
    """The non-streamed answer equals what a client folds from the streamed one."""
    request = request or req()
    raw, _ = checked_stream(unfold(r), request)
    assert sdk_fold(raw) == sdk_message(CODEC.encode_response(r, request))


RESPONSES = [
    c.Response(id="chatcmpl-1", model="m", content=[c.Text(text="hello")], stop_reason="end_turn"),
    c.Response(
        id="resp_2",
        model="m",
        content=[
            c.Reasoning(text="think", encrypted_content="gAAA", item_id="rs_2_0"),
            c.Text(text="a", citations=[c.Citation(url="https://u", title="T", cited_text="q")]),
            c.Text(text=""),
            c.ToolCall(id="call_1", name="f", arguments='{"x": [1, 2]}'),
            c.ToolCall(id="", name="g", arguments=""),
            c.ServerToolUse(id="ws", name="web_search"),
        ],
        stop_reason="end_turn",
        usage=c.Usage(input_tokens=50, output_tokens=9, cached_tokens=20),
    ),
    c.Response(
        id="msg_3",
        model="m",
        content=[c.Reasoning(redacted="EvgF"), c.Reasoning(text="t", signature="EvMC")],
        stop_reason="max_tokens",
    ),
    c.Response(id="x4", model="m", content=[c.Refusal(text="No.")], stop_reason="end_turn"),
    c.Response(
        id="x5", model="m", content=[], stop_reason="refusal", refusal_explanation="Policy."
    ),
    c.Response(
        id="x6",
        model="",
        content=[c.ToolCall(id="t", name="apply_patch", arguments="*** Begin", kind="custom")],
        stop_reason="tool_use",
        stop_sequence=None,
    ),
    c.Response(
        id="x7",
        model="m",
        content=[c.Text(text="a")],
        stop_reason="stop_sequence",
        stop_sequence="Z",
    ),
]


@pytest.mark.parametrize("r", RESPONSES, ids=[r.id for r in RESPONSES])
def test_non_streamed_answer_equals_the_fold_of_the_streamed_answer(r: c.Response) -> None:
    _fold_agrees(r)


@pytest.mark.parametrize("name", cap.capture_names("anthropic_json_"))
def test_fold_agrees_for_every_json_capture(name: str) -> None:
    _fold_agrees(CODEC.decode_response(cap.response_body(name)))


@pytest.mark.parametrize("name", cap.capture_names("anthropic_sse_"))
def test_sse_captures_decoded_and_re_encoded_give_the_same_message(name: str) -> None:
    raw = cap.response_body(name)
    events = decode_stream(raw)
    out, _ = checked_stream(events)
    original = sdk_fold(raw)
    keep = (
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    )
    original["usage"] = {k: original["usage"][k] for k in keep}  # no service_tier etc.
    assert sdk_fold(out) == original


def test_message_start_usage_comes_from_the_upstream_or_an_estimate() -> None:
    usage = c.Usage(input_tokens=100, cached_tokens=70, cache_creation_tokens=10)
    _, s = checked_stream(
        [c.MessageStart(id="msg_a", model="m", usage=usage), FINISH],
    )
    assert s.message is not None
    assert s.message["usage"] == {
        "input_tokens": 20,
        "output_tokens": 1,
        "cache_creation_input_tokens": 10,
        "cache_read_input_tokens": 70,
        "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 0},
    }
    r = req(messages=[c.Message(role="user", content=[c.Text(text="x" * 400)])])
    _, s = checked_stream([c.MessageStart(id="chatcmpl-1", model=""), FINISH], r)
    assert s.message is not None
    assert s.message["usage"]["input_tokens"] == tokens.estimate_input_tokens(r)
    assert s.message["id"] == "msg_1"
    assert s.message["model"] == "claude-test"  # the request's model when upstream has none


def test_frames_carry_event_lines_equal_to_the_data_type_and_no_done() -> None:
    raw, _ = checked_stream(unfold(RESPONSES[1]))
    assert b"[DONE]" not in raw
    for frame in raw.split(b"\n\n")[:-1]:
        event, data = frame.split(b"\n")
        assert json.loads(data[6:])["type"] == event[7:].decode()


def test_interleaved_parallel_tool_calls_come_out_as_sequential_blocks() -> None:
    events: list[c.StreamEvent] = [
        START,
        c.BlockStart(index=0, kind="text"),
        c.BlockStart(index=1, kind="tool_call", call_id="call_a", name="get_weather"),
        c.BlockStart(index=2, kind="tool_call", call_id="call_b", name="get_time"),
        c.BlockDelta(index=0, text="Looking up"),
        c.BlockDelta(index=1, text='{"city":'),
        c.BlockDelta(index=2, text='{"tz":'),
        c.BlockDelta(index=1, text='"Beijing"}'),
        c.BlockDelta(index=2, text='"Asia/Shanghai"}'),
        c.BlockStop(index=0),
        c.BlockStop(index=1),
        c.BlockStop(index=2),
        FINISH,
    ]
    raw, s = checked_stream(events)
    assert [b.type for b in s.blocks] == ["text", "tool_use", "tool_use"]
    assert s.blocks[0].text == "Looking up"
    assert json.loads(s.blocks[1].partial_json) == {"city": "Beijing"}
    assert json.loads(s.blocks[2].partial_json) == {"tz": "Asia/Shanghai"}
    assert [b.start["id"] for b in s.blocks[1:]] == ["call_a", "call_b"]
    assert s.stop_reason == "tool_use"
    assert sdk_fold(raw)["content"][1]["input"] == {"city": "Beijing"}


def test_a_later_block_that_stops_first_waits_for_the_open_one() -> None:
    events: list[c.StreamEvent] = [
        START,
        c.BlockStart(index=0, kind="tool_call", call_id="a", name="f"),
        c.BlockStart(index=1, kind="tool_call", call_id="b", name="f"),
        c.BlockDelta(index=1, text="{}"),
        c.BlockStop(index=1),
        c.BlockStart(index=2, kind="text"),
        c.BlockDelta(index=2, text="after"),
        c.BlockDelta(index=0, text='{"n": 0}'),
        c.BlockStop(index=0),
        c.BlockStop(index=2),
        FINISH,
    ]
    _, s = checked_stream(events)
    assert [(b.type, b.partial_json or b.text) for b in s.blocks] == [
        ("tool_use", '{"n": 0}'),
        ("tool_use", "{}"),
        ("text", "after"),
    ]


def test_blocks_still_open_or_waiting_at_finish_are_closed_properly() -> None:
    events: list[c.StreamEvent] = [
        START,
        c.BlockStart(index=0, kind="reasoning"),
        c.BlockDelta(index=0, text="hmm"),
        c.BlockSignature(index=0, signature="EvMC"),
        c.BlockStart(index=1, kind="text"),
        c.BlockDelta(index=1, text="answer"),
        FINISH,
    ]
    raw, s = checked_stream(events)
    assert [(b.type, b.signature, b.text) for b in s.blocks] == [
        ("thinking", "EvMC", ""),
        ("text", None, "answer"),
    ]
    assert sdk_fold(raw)["content"][0] == {
        "type": "thinking",
        "thinking": "hmm",
        "signature": "EvMC",
    }


def test_empty_text_blocks_emit_nothing_and_use_no_index() -> None:
    events: list[c.StreamEvent] = [
        START,
        c.BlockStart(index=0, kind="text"),
        c.BlockDelta(index=0, text=""),
        c.Citations(index=0, citations=[c.Citation(url="https://u")]),
        c.BlockStop(index=0),
        c.BlockStart(index=1, kind="refusal"),
        c.BlockStop(index=1),
        c.BlockStart(index=2, kind="tool_call", call_id="t", name="f"),
        c.BlockStop(index=2),
        FINISH,
    ]
    raw, s = checked_stream(events)
    assert [b.type for b in s.blocks] == ["tool_use"]
    assert b'"index":0' in raw and b'"index":1' not in raw


def test_reasoning_signature_is_sent_before_the_block_stops() -> None:
    packed = reasoning_carry.pack_tokens(c.Reasoning(encrypted_content="gAAA", item_id="rs_1"))
    events: list[c.StreamEvent] = [
        START,
        c.BlockStart(index=0, kind="reasoning", summary=True, item_id="rs_1"),
        c.BlockDelta(index=0, text="summary"),
        c.BlockSignature(index=0, encrypted_content="gAAA"),
        c.BlockStop(index=0),
        c.BlockStart(index=1, kind="reasoning", encrypted_content="gBBB", item_id="rs_2"),
        c.BlockStop(index=1),
        c.BlockStart(index=2, kind="reasoning"),
        c.BlockDelta(index=2, text="no signature at all"),
        c.BlockStop(index=2),
        c.BlockStart(index=3, kind="redacted_reasoning", redacted="EvgF"),
        c.BlockStop(index=3),
        FINISH,
    ]
    raw, s = checked_stream(events)
    assert [(b.type, b.signature) for b in s.blocks] == [
        ("thinking", packed),
        (
            "thinking",
            reasoning_carry.pack_tokens(c.Reasoning(encrypted_content="gBBB", item_id="rs_2")),
        ),
        ("thinking", None),
        ("redacted_thinking", None),
    ]
    assert s.blocks[3].start["data"] == "EvgF"
    # a client replaying the packed signature gives the Responses token back
    replay = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": sdk_fold(raw)["content"]},
        ],
    }
    from proxai_asgi.errors import TranslationReport

    r = CODEC.decode_request(json.dumps(replay).encode(), TranslationReport())
    assert r.messages[1].content[0] == c.Reasoning(
        text="summary", encrypted_content="gAAA", item_id="rs_1"
    )


def test_tool_use_blocks_start_with_empty_input_and_stream_input_json_delta() -> None:
    events: list[c.StreamEvent] = [
        START,
        c.BlockStart(index=0, kind="tool_call", call_id="call/1", name="f"),
        c.BlockDelta(index=0, text='{"a"'),
        c.BlockDelta(index=0, text=": 1}"),
        c.BlockStop(index=0),
        FINISH,
    ]
    raw, s = checked_stream(events)
    assert s.blocks[0].start == {"type": "tool_use", "id": "call_1", "name": "f", "input": {}}
    assert raw.count(b"input_json_delta") == 2


def test_custom_tool_calls_stream_their_raw_input_as_one_object() -> None:
    events: list[c.StreamEvent] = [
        START,
        c.BlockStart(index=0, kind="tool_call", call_id="t", name="p", tool_kind="custom"),
        c.BlockDelta(index=0, text="*** Begin"),
        c.BlockDelta(index=0, text=" Patch"),
        c.BlockStop(index=0),
        FINISH,
    ]
    _, s = checked_stream(events)
    assert json.loads(s.blocks[0].partial_json) == {"input": "*** Begin Patch"}


def test_citations_become_citations_deltas() -> None:
    cite = c.Citation(url="https://u", title="T", cited_text="q")
    events: list[c.StreamEvent] = [
        START,
        c.BlockStart(index=0, kind="text"),
        c.BlockDelta(index=0, text="fact"),
        c.Citations(index=0, citations=[cite, c.Citation(url="https://v")]),
        c.BlockStop(index=0),
        FINISH,
    ]
    raw, s = checked_stream(events)
    assert [x["url"] for x in s.blocks[0].citations] == ["https://u", "https://v"]
    assert sdk_fold(raw)["content"][0]["citations"][0]["type"] == "web_search_result_location"


def test_message_delta_always_carries_usage_and_the_stop() -> None:
    fin = c.Finish(
        stop_reason="stop_sequence",
        stop_sequence="END",
        usage=c.Usage(input_tokens=30, output_tokens=3, cached_tokens=10, cache_creation_tokens=5),
    )
    _, s = checked_stream([START, fin])
    assert (s.stop_reason, s.stop_sequence) == ("stop_sequence", "END")
    assert s.usage == {
        "input_tokens": 15,
        "output_tokens": 3,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 10,
        "cache_creation": {"ephemeral_5m_input_tokens": 5, "ephemeral_1h_input_tokens": 0},
    }
    _, s = checked_stream([START, c.Finish(stop_reason=None, usage=c.Usage())])
    assert s.stop_reason == "end_turn"
    _, s = checked_stream(
        [START, c.Finish(stop_reason="content_filter", usage=c.Usage(output_tokens=1))]
    )
    assert s.stop_reason == "refusal"


def test_refusal_stop_with_explanation_and_no_text_emits_the_explanation_first() -> None:
    fin = c.Finish(stop_reason="refusal", usage=c.Usage(), refusal_explanation="Not allowed.")
    _, s = checked_stream([START, fin])
    assert [b.text for b in s.blocks] == ["Not allowed."]
    assert s.stop_details == {"type": "refusal", "category": None, "explanation": "Not allowed."}
    _, s = checked_stream(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(index=0, text="Sorry."),
            c.BlockStop(index=0),
            fin,
        ]
    )
    assert [b.text for b in s.blocks] == ["Sorry."]


def test_refusal_blocks_are_text_with_stop_reason_refusal() -> None:
    _, s = checked_stream(
        [
            START,
            c.BlockStart(index=0, kind="refusal"),
            c.BlockDelta(index=0, text="I can't"),
            c.BlockDelta(index=0, text=" help."),
            c.BlockStop(index=0),
            FINISH,
        ]
    )
    assert [(b.type, b.text) for b in s.blocks] == [("text", "I can't help.")]
    assert s.stop_reason == "refusal"
    assert s.stop_details is not None and s.stop_details["explanation"] == "I can't help."


def test_stream_error_before_message_start_is_a_valid_error_frame() -> None:
    err = c.StreamError(status=429, kind="rate_limit", message="slow down")
    raw, s = checked_stream([err, START, FINISH])
    assert raw == (
        b"event: error\n"
        b'data: {"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}\n\n'
    )
    assert s.error == {"type": "rate_limit_error", "message": "slow down"}


def test_stream_error_mid_block_ends_the_stream_and_nothing_follows() -> None:
    err = c.StreamError(status=502, kind="bad_gateway", message="upstream broke")
    raw, s = checked_stream(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(index=0, text="par"),
            err,
            c.BlockDelta(index=0, text="tial"),
            c.BlockStop(index=0),
            FINISH,
        ]
    )
    assert s.error == {"type": "api_error", "message": "upstream broke"}
    assert raw.endswith(b'"message":"upstream broke"}}\n\n')


def test_nothing_is_emitted_after_finish() -> None:
    enc = CODEC.stream_encoder(req())
    out = enc.encode(START) + enc.encode(FINISH)
    late: list[c.StreamEvent] = [
        c.BlockStart(index=5, kind="text"),
        c.BlockDelta(index=5, text="x"),
        FINISH,
    ]
    assert all(enc.encode(e) == b"" for e in late)
    assert enc.encode(c.StreamError(status=500, kind="api_error", message="x")) == b""
    validate_anthropic_stream(out)


def test_finish_without_message_start_still_makes_a_valid_stream() -> None:
    _, s = checked_stream(
        [c.BlockStart(index=0, kind="text"), c.BlockDelta(index=0, text="x"), FINISH]
    )
    assert s.message is not None and s.message["id"].startswith("msg_")
    assert [b.text for b in s.blocks] == ["x"]


def test_duplicate_and_unknown_block_events_are_ignored() -> None:
    _, s = checked_stream(
        [
            START,
            c.BlockDelta(index=9, text="orphan"),
            c.BlockStart(index=0, kind="text"),
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(index=0, text="a"),
            c.BlockStop(index=0),
            c.BlockStart(index=0, kind="tool_call", call_id="t", name="f"),
            c.BlockStop(index=0),
            c.BlockStop(index=7),
            FINISH,
        ]
    )
    assert [(b.type, b.text) for b in s.blocks] == [("text", "a")]


# ---------------------------------------------------------------- property

_KINDS: tuple[c.BlockKind, ...] = (
    "text",
    "tool_call",
    "reasoning",
    "refusal",
    "redacted_reasoning",
)
_block_kinds = st.sampled_from(_KINDS)
_fragments = st.lists(st.text(max_size=4), max_size=4)


@st.composite
def interleaved_streams(draw: st.DrawFn) -> list[c.StreamEvent]:
    """A canonical stream of several blocks whose events interleave arbitrarily
    (each block's own events stay in order)."""
    n = draw(st.integers(min_value=0, max_value=4))
    queues: list[list[c.StreamEvent]] = []
    for i in range(n):
        kind = draw(_block_kinds)
        redacted = "R" if kind == "redacted_reasoning" else None
        start = c.BlockStart(index=i, kind=kind, call_id=f"c{i}", name=f"f{i}", redacted=redacted)
        evs: list[c.StreamEvent] = [start]
        if kind == "tool_call":
            value = draw(st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
            text = json.dumps(value)
            cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=3)))
            pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
            evs += [c.BlockDelta(index=i, text=p) for p in pieces]
        elif kind != "redacted_reasoning":
            evs += [c.BlockDelta(index=i, text=t) for t in draw(_fragments)]
        if kind == "reasoning" and draw(st.booleans()):
            evs.append(c.BlockSignature(index=i, signature="sig"))
        if draw(st.booleans()):  # some blocks are never stopped: Finish closes them
            evs.append(c.BlockStop(index=i))
        queues.append(evs)
    out: list[c.StreamEvent] = [START]
    while any(queues):
        q = draw(st.sampled_from([q for q in queues if q]))
        out.append(q.pop(0))
    out.append(
        c.Finish(
            stop_reason=draw(st.sampled_from([None, "end_turn", "max_tokens", "tool_use"])),
            usage=c.Usage(input_tokens=3, output_tokens=2),
        )
    )
    return out


@settings(max_examples=150, deadline=None)
@given(interleaved_streams())
def test_any_interleaving_gives_a_valid_stream_that_folds_to_the_same_message(
    events: list[c.StreamEvent],
) -> None:
    raw, _ = checked_stream(events)
    expected = CODEC.encode_response(fold(events), req())
    assert sdk_fold(raw) == sdk_message(expected)


@settings(max_examples=100, deadline=None)
@given(interleaved_streams(), st.integers(min_value=0, max_value=40))
def test_a_stream_error_at_any_point_ends_the_stream_validly(
    events: list[c.StreamEvent], at: int
) -> None:
    cut = min(at, len(events) - 1)
    events = [*events[:cut], c.StreamError(status=529, kind="overloaded", message="Overloaded")]
    _, s = checked_stream(events)
    assert s.error == {"type": "overloaded_error", "message": "Overloaded"}
