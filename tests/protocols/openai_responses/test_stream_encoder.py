"""Canonical stream events -> Responses SSE for a client (validated by the strict
grammar validator and the openai SDK's own stream accumulator)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.responses import Response

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry
from proxai_asgi.codec import fold, unfold
from proxai_asgi.protocols.openai_responses import CODEC

from ._util import encode_stream, encode_validated, req, response, sdk_accumulate, sdk_events

START = c.MessageStart(id="msg_01XYZ", model="claude-up", created=1700000003)
USAGE = c.Usage(input_tokens=12, output_tokens=4)


def finish(stop: c.StopReason | None = "end_turn") -> c.Finish:
    return c.Finish(stop_reason=stop, usage=USAGE)


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_message_start_gives_created_then_in_progress_with_an_in_progress_snapshot() -> None:
    s = encode_validated([START, finish()])
    created, in_progress = s.events[0], s.events[1]
    assert types(s.events[:2]) == ["response.created", "response.in_progress"]
    snap = created["response"]
    assert snap["id"] == "resp_01XYZ" and snap["model"] == "claude-up"
    assert snap["status"] == "in_progress" and snap["output"] == [] and snap["usage"] is None
    assert snap["created_at"] == 1700000003 and in_progress["response"] == snap


def test_a_text_block_streams_as_item_part_deltas_and_dones() -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(index=0, text="Hel"),
            c.BlockDelta(index=0, text="lo"),
            c.BlockStop(index=0),
            finish(),
        ]
    )
    assert types(s.events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert s.events[2]["item"] == {
        "type": "message",
        "id": "msg_01XYZ_0",
        "status": "in_progress",
        "role": "assistant",
        "content": [],
    }
    assert s.events[4] == {
        "type": "response.output_text.delta",
        "sequence_number": 4,
        "item_id": "msg_01XYZ_0",
        "output_index": 0,
        "content_index": 0,
        "delta": "Hel",
        "logprobs": [],
    }
    assert s.items == [
        {
            "type": "message",
            "id": "msg_01XYZ_0",
            "status": "completed",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}
            ],
        }
    ]


def test_a_text_block_without_text_is_a_message_item_with_an_empty_part() -> None:
    """The item is announced at the block's start (before anyone knows whether text
    follows), so a block that never has text ends as an empty output_text part; the
    non-streamed answer has the same item."""
    events: list[c.StreamEvent] = [
        START,
        c.BlockStart(index=0, kind="text"),
        c.BlockDelta(index=0, text=""),
        c.BlockStop(index=0),
        finish(),
    ]
    s = encode_validated(events)
    assert types(s.events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert s.items[0]["content"] == [
        {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    ]
    assert s.response is not None
    whole = json.loads(CODEC.encode_response(fold(events), req()))
    assert s.response["output"] == whole["output"]


def test_a_refusal_started_while_its_text_is_open_is_that_message_items_second_part() -> None:
    """Chat content + refusal (and a Responses message's text + refusal parts) are one
    message item: the refusal's part waits for the text part to be done (parts stream one
    at a time), then the item is done with both."""
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(index=0, text="safe"),
            c.BlockStart(index=1, kind="refusal"),
            c.BlockDelta(index=1, text="n"),
            c.BlockDelta(index=0, text="!"),
            c.BlockStop(index=0),
            c.BlockDelta(index=1, text="o"),
            c.BlockStop(index=1),
            finish("refusal"),
        ]
    )
    assert [(e["type"], e.get("content_index")) for e in s.events[2:-1]] == [
        ("response.output_item.added", None),
        ("response.content_part.added", 0),
        ("response.output_text.delta", 0),
        ("response.output_text.delta", 0),
        ("response.output_text.done", 0),
        ("response.content_part.done", 0),
        ("response.content_part.added", 1),
        ("response.refusal.delta", 1),  # what it held while the text part was open
        ("response.refusal.delta", 1),
        ("response.refusal.done", 1),
        ("response.content_part.done", 1),
        ("response.output_item.done", None),
    ]
    assert len(s.items) == 1
    assert s.items[0]["content"] == [
        {"type": "output_text", "text": "safe!", "annotations": [], "logprobs": []},
        {"type": "refusal", "refusal": "no"},
    ]
    assert s.response is not None and s.response["status"] == "failed"


def test_a_refusal_after_its_text_stopped_is_a_message_item_of_its_own() -> None:
    """The text's item was done at its stop; a refusal meant for it starts before that
    stop (``codec.RefusalJoin``), so one starting later is a new item."""
    s = encode_validated(
        [
            START,
            *[c.BlockStart(index=0, kind="text"), c.BlockDelta(index=0, text="safe")],
            c.BlockStop(index=0),
            *[c.BlockStart(index=1, kind="refusal"), c.BlockDelta(index=1, text="no")],
            c.BlockStop(index=1),
            finish("refusal"),
        ]
    )
    assert [[p["type"] for p in i["content"]] for i in s.items] == [["output_text"], ["refusal"]]


def test_a_joined_refusal_that_stops_before_its_text_is_sent_whole_after_the_text() -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.BlockStart(index=1, kind="refusal"),
            c.BlockDelta(index=1, text="no"),
            c.BlockStop(index=1),
            c.BlockDelta(index=0, text="safe"),
            c.BlockStop(index=0),
            finish(),
        ]
    )
    assert s.items[0]["content"] == [
        {"type": "output_text", "text": "safe", "annotations": [], "logprobs": []},
        {"type": "refusal", "refusal": "no"},
    ]


def test_reasoning_summary_blocks_stream_as_a_summary_part_and_carry_their_token() -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="reasoning", summary=True, item_id="rs_own"),
            c.BlockDelta(index=0, text="plan"),
            c.BlockSignature(index=0, encrypted_content="enc"),
            c.BlockStop(index=0),
            finish(),
        ]
    )
    assert types(s.events)[2:-1] == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
    ]
    assert s.items == [
        {
            "type": "reasoning",
            "id": "rs_own",
            "summary": [{"type": "summary_text", "text": "plan"}],
            "encrypted_content": "enc",
        }
    ]


def test_raw_reasoning_streams_as_a_reasoning_text_part_and_packs_a_signature() -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="reasoning"),
            c.BlockDelta(index=0, text="hmm"),
            c.BlockSignature(index=0, signature="sig"),
            c.BlockStop(index=0),
            finish(),
        ]
    )
    assert "response.reasoning_text.delta" in types(s.events)
    (item,) = s.items
    assert item["id"] == "rs_01XYZ_0" and item["content"] == [
        {"type": "reasoning_text", "text": "hmm"}
    ]
    assert reasoning_carry.unpack(item["encrypted_content"]) == {
        "signature": "sig",
        "t": "hmm",  # the streamed text it signs rides along (issue 17 defect 6)
    }


def test_redacted_reasoning_becomes_an_item_whose_encrypted_content_carries_it() -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="redacted_reasoning", redacted="blob"),
            c.BlockStop(index=0),
            finish(),
        ]
    )
    assert types(s.events)[2:4] == ["response.output_item.added", "response.output_item.done"]
    assert reasoning_carry.unpack(s.items[0]["encrypted_content"]) == {
        "redacted": "blob",
    }


def test_a_tool_call_streams_argument_deltas_then_done_with_name_and_arguments() -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="tool_call", call_id="toolu_1", name="f"),
            c.BlockDelta(index=0, text='{"a":'),
            c.BlockDelta(index=0, text="1}"),
            c.BlockStop(index=0),
            finish("tool_use"),
        ]
    )
    added = s.events[2]["item"]
    assert added == {
        "type": "function_call",
        "id": "fc_01XYZ_0",
        "call_id": "toolu_1",
        "name": "f",
        "arguments": "",
        "status": "in_progress",
    }
    args_done = next(e for e in s.events if e["type"] == "response.function_call_arguments.done")
    assert args_done["arguments"] == '{"a":1}' and args_done["name"] == "f"
    assert s.items[0]["status"] == "completed" and s.items[0]["arguments"] == '{"a":1}'


def test_a_responses_item_id_on_a_tool_call_is_kept() -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="tool_call", call_id="c", name="f", item_id="fc_up"),
            c.BlockStop(index=0),
            finish(),
        ]
    )
    assert s.items[0]["id"] == "fc_up"


def test_a_custom_tool_call_streams_input_deltas() -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(
                index=0, kind="tool_call", call_id="c", name="apply_patch", tool_kind="custom"
            ),
            c.BlockDelta(index=0, text="*** Begin"),
            c.BlockStop(index=0),
            finish("tool_use"),
        ]
    )
    assert "response.custom_tool_call_input.delta" in types(s.events)
    assert s.items == [
        {
            "type": "custom_tool_call",
            "id": "ctc_01XYZ_0",
            "call_id": "c",
            "name": "apply_patch",
            "input": "*** Begin",
        }
    ]


def test_interleaved_tool_calls_keep_their_own_output_index_and_item_id() -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(index=0, text="Looking up"),
            c.BlockStart(index=1, kind="tool_call", call_id="toolu_a", name="get_weather"),
            c.BlockStart(index=2, kind="tool_call", call_id="toolu_b", name="get_time"),
            c.BlockDelta(index=1, text='{"city":'),
            c.BlockDelta(index=2, text='{"tz":'),
            c.BlockDelta(index=1, text='"Beijing"}'),
            c.BlockDelta(index=2, text='"Asia/Shanghai"}'),
            c.BlockStop(index=0),
            c.BlockStop(index=1),
            c.BlockStop(index=2),
            finish("tool_use"),
        ]
    )
    deltas = [
        (e["output_index"], e["item_id"], e["delta"])
        for e in s.events
        if e["type"] == "response.function_call_arguments.delta"
    ]
    assert deltas == [
        (1, "fc_01XYZ_1", '{"city":'),
        (2, "fc_01XYZ_2", '{"tz":'),
        (1, "fc_01XYZ_1", '"Beijing"}'),
        (2, "fc_01XYZ_2", '"Asia/Shanghai"}'),
    ]
    assert [i["type"] for i in s.items] == ["message", "function_call", "function_call"]
    assert s.items[1]["arguments"] == '{"city":"Beijing"}'


def test_text_after_a_tool_call_opens_a_new_message_item() -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(index=0, text="a"),
            c.BlockStop(index=0),
            c.BlockStart(index=1, kind="tool_call", call_id="x", name="f"),
            c.BlockStop(index=1),
            c.BlockStart(index=2, kind="text"),
            c.BlockDelta(index=2, text="b"),
            c.BlockStop(index=2),
            finish(),
        ]
    )
    assert [(i["type"], i["id"]) for i in s.items] == [
        ("message", "msg_01XYZ_0"),
        ("function_call", "fc_01XYZ_1"),
        ("message", "msg_01XYZ_2"),
    ]


def test_citations_become_annotation_added_events_even_before_the_text() -> None:
    cite = c.Citation(url="https://x", title="X", start_index=0, end_index=1)
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.Citations(index=0, citations=[cite]),
            c.BlockDelta(index=0, text="x"),
            c.Citations(index=0, citations=[cite]),
            c.BlockStop(index=0),
            finish(),
        ]
    )
    anns = [e for e in s.events if e["type"] == "response.output_text.annotation.added"]
    assert [a["annotation_index"] for a in anns] == [0, 1]
    assert (
        s.items[0]["content"][0]["annotations"]
        == [
            {
                "type": "url_citation",
                "url": "https://x",
                "title": "X",
                "start_index": 0,
                "end_index": 1,
            }
        ]
        * 2
    )


def test_citations_without_offsets_are_announced_at_the_part_end_spanning_the_whole_text() -> None:
    whole = c.Citation(url="https://a", title="A")  # Anthropic: no offsets
    own = c.Citation(url="https://b", title="B", start_index=0, end_index=2)
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.Citations(index=0, citations=[whole, own]),
            c.BlockDelta(index=0, text="abc"),
            c.BlockDelta(index=0, text="def"),
            c.BlockStop(index=0),
            finish(),
        ]
    )
    types_ = [e["type"] for e in s.events]
    anns = [e for e in s.events if e["type"] == "response.output_text.annotation.added"]
    assert [(a["annotation_index"], a["annotation"]["url"]) for a in anns] == [
        (0, "https://b"),
        (1, "https://a"),
    ]
    # The whole-part one comes after the last delta, before the text is done.
    last = len(types_) - 1 - types_[::-1].index("response.output_text.annotation.added")
    assert types_[last - 1] == "response.output_text.delta"
    assert types_[last + 1] == "response.output_text.done"
    assert [
        (a["url"], a["start_index"], a["end_index"])
        for a in s.items[0]["content"][0]["annotations"]
    ] == [("https://b", 0, 2), ("https://a", 0, 6)]


def test_a_refusal_with_only_an_explanation_streams_a_refusal_message_item() -> None:
    s = encode_validated(
        [
            START,
            c.Finish(stop_reason="refusal", usage=USAGE, refusal_explanation="Declined by policy."),
        ]
    )
    assert s.items == [
        {
            "type": "message",
            "id": "msg_01XYZ_0",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "refusal", "refusal": "Declined by policy."}],
        }
    ]
    assert [e["type"] for e in s.events if "refusal" in e["type"]] == [
        "response.refusal.delta",
        "response.refusal.done",
    ]
    assert s.events[-1]["type"] == "response.failed"


def test_no_explanation_item_when_the_refusal_already_streamed_text() -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(index=0, text="I can't."),
            c.BlockStop(index=0),
            c.Finish(stop_reason="refusal", usage=USAGE, refusal_explanation="Declined."),
        ]
    )
    assert len(s.items) == 1 and "Declined" not in json.dumps(s.items)


def test_blocks_still_open_at_finish_are_closed_properly() -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(index=0, text="cut"),
            c.BlockStart(index=1, kind="tool_call", call_id="x", name="f"),
            c.BlockDelta(index=1, text="{"),
            finish("max_tokens"),
        ]
    )
    assert s.response is not None and s.response["status"] == "incomplete"
    assert s.response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [i["status"] for i in s.items] == ["incomplete", "incomplete"]


@pytest.mark.parametrize(
    ("stop", "event", "reason"),
    [
        ("end_turn", "response.completed", None),
        ("stop_sequence", "response.completed", None),
        ("tool_use", "response.completed", None),
        ("pause_turn", "response.completed", None),
        (None, "response.completed", None),
        ("max_tokens", "response.incomplete", "max_output_tokens"),
        ("content_filter", "response.incomplete", "content_filter"),
        ("refusal", "response.failed", None),
    ],
)
def test_the_terminal_event_follows_the_status_mapping(
    stop: c.StopReason | None, event: str, reason: str | None
) -> None:
    s = encode_validated(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(index=0, text="x"),
            c.BlockStop(index=0),
            finish(stop),
        ]
    )
    assert s.events[-1]["type"] == event
    snap = s.events[-1]["response"]
    assert snap["incomplete_details"] == ({"reason": reason} if reason else None)
    assert snap["usage"]["input_tokens"] == 12 and snap["usage"]["total_tokens"] == 16


def test_stop_reason_and_usage_arrive_only_in_the_terminal_snapshot() -> None:
    s = encode_validated(unfold(response(c.Text(text="hi"), stop_reason="max_tokens")))
    for ev in s.events[:-1]:
        if "response" in ev:
            assert ev["response"]["usage"] is None and ev["response"]["status"] == "in_progress"


@pytest.mark.parametrize("cut", range(0, 9))
def test_a_stream_error_at_any_point_ends_with_error_then_response_failed(cut: int) -> None:
    all_events: list[c.StreamEvent] = [
        START,
        c.BlockStart(index=0, kind="reasoning", summary=True),
        c.BlockDelta(index=0, text="r"),
        c.BlockStop(index=0),
        c.BlockStart(index=1, kind="text"),
        c.BlockDelta(index=1, text="partial"),
        c.BlockStart(index=2, kind="tool_call", call_id="x", name="f"),
        c.BlockDelta(index=2, text="{"),
    ]
    err = c.StreamError(status=529, kind="overloaded", message="Overloaded")
    s = encode_validated([*all_events[:cut], err])
    assert types(s.events)[-2:] == ["error", "response.failed"]
    assert s.error == {
        "type": "error",
        "sequence_number": len(s.events) - 2,
        "code": "server_is_overloaded",
        "message": "Overloaded",
        "param": None,
    }
    assert s.response is not None and s.response["error"] == {
        "code": "server_error",
        "message": "Overloaded",
    }


def test_a_rate_limit_error_keeps_its_code_in_the_failed_snapshot() -> None:
    s = encode_validated([START, c.StreamError(status=429, kind="rate_limit", message="slow down")])
    assert s.error is not None and s.error["code"] == "rate_limit_exceeded"
    assert s.response is not None and s.response["error"]["code"] == "rate_limit_exceeded"


def test_nothing_is_emitted_after_the_terminal_event() -> None:
    enc = CODEC.stream_encoder(req())
    assert enc.encode(START) and enc.encode(finish())
    for ev in (
        c.BlockStart(index=0, kind="text"),
        c.BlockDelta(index=0, text="x"),
        finish(),
        c.StreamError(status=500, kind="api_error", message="m"),
    ):
        assert enc.encode(ev) == b""


def test_the_stream_ends_with_a_typed_terminal_event_and_no_done_sentinel() -> None:
    body = encode_stream(unfold(response(c.Text(text="hi"))))
    assert b"[DONE]" not in body
    assert body.split(b"\n\n")[-2].startswith(b"event: response.completed\ndata: ")


def test_a_stream_without_message_start_uses_the_request_model_and_consistent_ids() -> None:
    s = encode_validated(
        [
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(index=0, text="x"),
            c.BlockStop(index=0),
            finish(),
        ],
        req(model="asked"),
    )
    assert s.response is not None and s.response["model"] == "asked"
    base = s.response["id"][len("resp_") :]
    assert s.items[0]["id"] == f"msg_{base}_0"


def test_repeated_and_unknown_block_events_are_harmless() -> None:
    s = encode_validated(
        [
            START,
            START,
            c.BlockDelta(index=9, text="orphan"),
            c.BlockStop(index=9),
            c.BlockStart(index=0, kind="text"),
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(index=0, text="x"),
            c.BlockStop(index=0),
            c.BlockStop(index=0),
            finish(),
        ]
    )
    assert len(s.items) == 1


def test_every_frame_parses_as_an_sdk_stream_event() -> None:
    body = encode_stream(
        unfold(
            response(
                c.Reasoning(text="s", summary=True, encrypted_content="e"),
                c.Reasoning(text="raw"),
                c.Text(text="hi", citations=[c.Citation(url="https://x")]),
                c.Refusal(text="no"),
                c.ToolCall(id="a", name="f", arguments="{}"),
                c.ToolCall(id="b", name="p", arguments="in", kind="custom"),
            )
        )
    )
    for ev in sdk_events(body):
        type(ev).model_validate(ev.model_dump(mode="json", by_alias=True))


def test_the_sdk_stream_accumulator_gets_the_final_response() -> None:
    r = response(
        c.Text(text="Calling."),
        c.ToolCall(id="call_1", name="exec_command", arguments='{"cmd":"ls"}'),
        c.ToolCall(id="call_2", name="apply_patch", arguments="*** Begin Patch", kind="custom"),
        stop_reason="tool_use",
    )
    final = sdk_accumulate(encode_stream(unfold(r)))
    assert isinstance(final, Response)
    assert final.output_text == "Calling."
    calls = [o for o in final.output if o.type in ("function_call", "custom_tool_call")]
    assert [(o.type, o.call_id) for o in calls] == [
        ("function_call", "call_1"),
        ("custom_tool_call", "call_2"),
    ]
    assert final.model_dump(mode="json", exclude_none=True) == Response.model_validate(
        json.loads(CODEC.encode_response(r, req(stream=True)))
    ).model_dump(mode="json", exclude_none=True)
