"""Upstream Responses SSE -> canonical stream events."""

from __future__ import annotations

from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry
from proxai_asgi.codec import fold
from proxai_asgi.errors import ProxyError
from proxai_asgi.protocols.openai_responses import CODEC
from proxai_asgi.sse import SSEEvent
from tests.helpers.validate_responses import validate_responses_stream

from ._util import decode_stream, frames

RID = "resp_up"


def snapshot(status: str = "in_progress", **kw: Any) -> dict[str, Any]:
    snap: dict[str, Any] = {
        "id": RID,
        "object": "response",
        "created_at": 1700000002,
        "status": status,
        "model": "gpt-up",
        "output": [],
        "usage": None,
    }
    snap.update(kw)
    return snap


def created() -> list[dict[str, Any]]:
    return [
        {"type": "response.created", "sequence_number": 0, "response": snapshot()},
        {"type": "response.in_progress", "sequence_number": 1, "response": snapshot()},
    ]


def completed(status: str = "completed", **kw: Any) -> dict[str, Any]:
    usage = {
        "input_tokens": 5,
        "input_tokens_details": {"cached_tokens": 1},
        "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 8,
    }
    return {"type": f"response.{status}", "response": snapshot(status, usage=usage, **kw)}


def added(n: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": n, "item": item}


def done(n: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.done", "output_index": n, "item": item}


def fcall(item_id: str, call_id: str, name: str, arguments: str = "") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "in_progress",
    }


def args_delta(n: int, item_id: str, delta: str) -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.delta",
        "output_index": n,
        "item_id": item_id,
        "delta": delta,
    }


def text_stream(*deltas: str, n: int = 0, item_id: str = "msg_1") -> list[dict[str, Any]]:
    part = {"type": "output_text", "text": "", "annotations": []}
    out: list[dict[str, Any]] = [
        added(
            n,
            {
                "type": "message",
                "id": item_id,
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            },
        ),
        {
            "type": "response.content_part.added",
            "output_index": n,
            "item_id": item_id,
            "content_index": 0,
            "part": part,
        },
    ]
    for d in deltas:
        out.append(
            {
                "type": "response.output_text.delta",
                "output_index": n,
                "item_id": item_id,
                "content_index": 0,
                "delta": d,
            }
        )
    text = "".join(deltas)
    final = {"type": "output_text", "text": text, "annotations": []}
    out += [
        {
            "type": "response.output_text.done",
            "output_index": n,
            "item_id": item_id,
            "content_index": 0,
            "text": text,
        },
        {
            "type": "response.content_part.done",
            "output_index": n,
            "item_id": item_id,
            "content_index": 0,
            "part": final,
        },
        done(
            n,
            {
                "type": "message",
                "id": item_id,
                "status": "completed",
                "role": "assistant",
                "content": [final],
            },
        ),
    ]
    return out


def check_well_formed(events: list[c.StreamEvent]) -> None:
    """Decoder guarantees: unique indexes, every start stopped before the one terminal."""
    started: set[int] = set()
    stopped: set[int] = set()
    terminals = [e for e in events if isinstance(e, (c.Finish, c.StreamError))]
    assert len(terminals) == 1 and events[-1] is terminals[0]
    assert isinstance(events[0], (c.MessageStart, c.StreamError))
    for e in events:
        if isinstance(e, c.BlockStart):
            assert e.index not in started
            started.add(e.index)
        elif isinstance(e, (c.BlockDelta, c.BlockSignature, c.Citations)):
            assert e.index in started and e.index not in stopped
        elif isinstance(e, c.BlockStop):
            assert e.index in started and e.index not in stopped
            stopped.add(e.index)
    if isinstance(terminals[0], c.Finish):
        assert started == stopped


def test_created_gives_message_start_with_id_model_and_created() -> None:
    events = decode_stream(frames(*created(), *text_stream("Hi"), completed()))
    assert events[0] == c.MessageStart(id=RID, model="gpt-up", created=1700000002)
    check_well_formed(events)


def test_a_text_part_becomes_one_text_block_and_usage_comes_from_the_terminal_snapshot() -> None:
    events = decode_stream(frames(*created(), *text_stream("He", "llo"), completed()))
    assert events[1:] == [
        c.BlockStart(index=0, kind="text"),
        c.BlockDelta(index=0, text="He"),
        c.BlockDelta(index=0, text="llo"),
        c.BlockStop(index=0),
        c.Finish(
            stop_reason="end_turn", usage=c.Usage(input_tokens=5, output_tokens=3, cached_tokens=1)
        ),
    ]


def test_missing_event_lines_use_the_data_type() -> None:
    body = frames(*created(), *text_stream("x"), completed(), event_lines=False)
    assert fold(decode_stream(body)).content == [c.Text(text="x")]


def test_done_sentinel_and_unknown_events_are_ignored() -> None:
    events = decode_stream(
        frames(
            *created(),
            {"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws"},
            {"type": "response.audio.delta", "delta": {"weird": True}},
            {"type": "keepalive"},
            *text_stream("ok"),
            completed(),
            "[DONE]",
        )
    )
    check_well_formed(events)
    assert fold(events).content == [c.Text(text="ok")]


def test_interleaved_function_call_deltas_are_joined_by_item() -> None:
    events = decode_stream(
        frames(
            *created(),
            added(0, fcall("fc_a", "call_a", "get_weather")),
            added(1, fcall("fc_b", "call_b", "get_time")),
            args_delta(0, "fc_a", '{"city":'),
            args_delta(1, "fc_b", '{"tz":'),
            args_delta(0, "fc_a", '"Beijing"}'),
            args_delta(1, "fc_b", '"Asia/Shanghai"}'),
            done(0, fcall("fc_a", "call_a", "get_weather", '{"city":"Beijing"}')),
            done(1, fcall("fc_b", "call_b", "get_time", '{"tz":"Asia/Shanghai"}')),
            completed(),
        )
    )
    check_well_formed(events)
    r = fold(events)
    assert r.content == [
        c.ToolCall(id="call_a", name="get_weather", arguments='{"city":"Beijing"}', item_id="fc_a"),
        c.ToolCall(
            id="call_b", name="get_time", arguments='{"tz":"Asia/Shanghai"}', item_id="fc_b"
        ),
    ]
    assert r.stop_reason == "tool_use"


def test_a_function_call_without_argument_deltas_takes_them_from_its_done_item() -> None:
    events = decode_stream(
        frames(
            *created(),
            added(0, fcall("fc_a", "c", "f")),
            done(0, fcall("fc_a", "c", "f", '{"x":1}')),
            completed(),
        )
    )
    assert fold(events).content == [
        c.ToolCall(id="c", name="f", arguments='{"x":1}', item_id="fc_a")
    ]


def test_custom_tool_call_input_deltas_feed_a_custom_tool_call_block() -> None:
    item = {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "call_id": "c1",
        "name": "apply_patch",
        "input": "",
    }
    events = decode_stream(
        frames(
            *created(),
            added(0, item),
            {
                "type": "response.custom_tool_call_input.delta",
                "output_index": 0,
                "item_id": "ctc_1",
                "delta": "*** Begin",
            },
            {
                "type": "response.custom_tool_call_input.done",
                "output_index": 0,
                "item_id": "ctc_1",
                "input": "*** Begin",
            },
            done(0, {**item, "input": "*** Begin"}),
            completed(),
        )
    )
    assert events[1] == c.BlockStart(
        index=0,
        kind="tool_call",
        call_id="c1",
        name="apply_patch",
        tool_kind="custom",
        item_id="ctc_1",
    )
    assert fold(events).content == [
        c.ToolCall(
            id="c1", name="apply_patch", arguments="*** Begin", kind="custom", item_id="ctc_1"
        )
    ]


def reasoning_events(*summaries: list[str], encrypted: str | None = "enc") -> list[dict[str, Any]]:
    rs = {"type": "reasoning", "id": "rs_1", "summary": []}
    out: list[dict[str, Any]] = [added(0, rs)]
    for si, deltas in enumerate(summaries):
        base = {"output_index": 0, "item_id": "rs_1", "summary_index": si}
        out.append(
            {
                "type": "response.reasoning_summary_part.added",
                **base,
                "part": {"type": "summary_text", "text": ""},
            }
        )
        for d in deltas:
            out.append({"type": "response.reasoning_summary_text.delta", **base, "delta": d})
        text = "".join(deltas)
        out.append({"type": "response.reasoning_summary_text.done", **base, "text": text})
        out.append(
            {
                "type": "response.reasoning_summary_part.done",
                **base,
                "part": {"type": "summary_text", "text": text},
            }
        )
    final = {**rs, "summary": [{"type": "summary_text", "text": "".join(d)} for d in summaries]}
    if encrypted is not None:
        final["encrypted_content"] = encrypted
    out.append(done(0, final))
    return out


def test_reasoning_summary_parts_form_one_block_joined_by_blank_lines_then_its_token() -> None:
    events = decode_stream(frames(*created(), *reasoning_events(["A", "b"], ["C"]), completed()))
    assert events[1:-1] == [
        c.BlockStart(index=0, kind="reasoning", summary=True, item_id="rs_1"),
        c.BlockDelta(index=0, text="A"),
        c.BlockDelta(index=0, text="b"),
        c.BlockDelta(index=0, text="\n\n"),
        c.BlockDelta(index=0, text="C"),
        c.BlockSignature(index=0, encrypted_content="enc"),
        c.BlockStop(index=0),
    ]


def test_a_reasoning_item_with_only_encrypted_content_is_one_block() -> None:
    events = decode_stream(frames(*created(), *reasoning_events(), completed()))
    assert fold(events).content == [
        c.Reasoning(summary=True, encrypted_content="enc", item_id="rs_1")
    ]


def test_raw_reasoning_text_deltas_give_a_non_summary_block() -> None:
    base = {"output_index": 0, "item_id": "rs_1", "content_index": 0}
    events = decode_stream(
        frames(
            *created(),
            added(0, {"type": "reasoning", "id": "rs_1", "summary": []}),
            {
                "type": "response.content_part.added",
                **base,
                "part": {"type": "reasoning_text", "text": ""},
            },
            {"type": "response.reasoning_text.delta", **base, "delta": "think"},
            {"type": "response.reasoning_text.done", **base, "text": "think"},
            {
                "type": "response.content_part.done",
                **base,
                "part": {"type": "reasoning_text", "text": "think"},
            },
            done(
                0,
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": "think"}],
                },
            ),
            completed(),
        )
    )
    check_well_formed(events)
    assert fold(events).content == [c.Reasoning(text="think", summary=False, item_id="rs_1")]


def test_an_anthropic_token_carried_in_encrypted_content_comes_back_as_signature_or_redacted() -> (
    None
):
    signed = decode_stream(
        frames(
            *created(),
            *reasoning_events(
                ["t"], encrypted=reasoning_carry.pack_tokens(c.Reasoning(signature="sig"))
            ),
            completed(),
        )
    )
    assert fold(signed).content == [
        c.Reasoning(text="t", summary=True, signature="sig", item_id="rs_1")
    ]
    redacted = decode_stream(
        frames(
            *created(),
            *reasoning_events(encrypted=reasoning_carry.pack_tokens(c.Reasoning(redacted="blob"))),
            completed(),
        )
    )
    assert redacted[1] == c.BlockStart(index=0, kind="redacted_reasoning", redacted="blob")
    assert fold(redacted).content == [c.Reasoning(redacted="blob")]


def test_annotation_added_becomes_citations_on_the_text_block() -> None:
    evs = text_stream("hi")
    ann = {
        "type": "url_citation",
        "url": "https://x",
        "title": "X",
        "start_index": 0,
        "end_index": 2,
    }
    evs.insert(
        3,
        {
            "type": "response.output_text.annotation.added",
            "output_index": 0,
            "item_id": "msg_1",
            "content_index": 0,
            "annotation_index": 0,
            "annotation": ann,
        },
    )
    events = decode_stream(frames(*created(), *evs, completed()))
    assert fold(events).content == [
        c.Text(
            text="hi",
            citations=[c.Citation(url="https://x", title="X", start_index=0, end_index=2)],
        )
    ]


def test_a_refusal_part_gives_a_refusal_block_and_a_refusal_stop() -> None:
    base = {"output_index": 0, "item_id": "msg_1", "content_index": 0}
    events = decode_stream(
        frames(
            *created(),
            added(
                0,
                {
                    "type": "message",
                    "id": "msg_1",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                },
            ),
            {
                "type": "response.content_part.added",
                **base,
                "part": {"type": "refusal", "refusal": ""},
            },
            {"type": "response.refusal.delta", **base, "delta": "No."},
            {"type": "response.refusal.done", **base, "refusal": "No."},
            {
                "type": "response.content_part.done",
                **base,
                "part": {"type": "refusal", "refusal": "No."},
            },
            done(
                0,
                {
                    "type": "message",
                    "id": "msg_1",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "refusal", "refusal": "No."}],
                },
            ),
            completed(),
        )
    )
    r = fold(events)
    assert r.content == [c.Refusal(text="No.")] and r.stop_reason == "refusal"


def test_parts_seen_only_in_their_done_events_are_not_lost() -> None:
    final = {"type": "output_text", "text": "whole", "annotations": []}
    events = decode_stream(
        frames(
            *created(),
            added(
                0,
                {
                    "type": "message",
                    "id": "m",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                },
            ),
            done(
                0,
                {
                    "type": "message",
                    "id": "m",
                    "status": "completed",
                    "role": "assistant",
                    "content": [final],
                },
            ),
            completed(),
        )
    )
    check_well_formed(events)
    assert fold(events).content == [c.Text(text="whole")]


def test_a_web_search_call_is_one_server_tool_event_once_done() -> None:
    ws = {"type": "web_search_call", "id": "ws_1", "status": "in_progress"}
    events = decode_stream(
        frames(
            *created(),
            added(0, ws),
            done(0, {**ws, "status": "completed"}),
            *text_stream("r", n=1),
            completed(),
        )
    )
    search = c.ServerToolUse(id="ws_1", name="web_search")
    assert fold(events).content == [search, c.Text(text="r")]
    assert [type(e) for e in events].count(c.ServerTool) == 1


@pytest.mark.parametrize(
    ("status", "reason", "stop"),
    [
        ("completed", None, "end_turn"),
        ("incomplete", "max_output_tokens", "max_tokens"),
        ("incomplete", "content_filter", "content_filter"),
        ("failed", None, "refusal"),
    ],
)
def test_terminal_events_map_status_to_the_stop_reason_like_the_json_path(
    status: str, reason: str | None, stop: str
) -> None:
    details = {"reason": reason} if reason else None
    events = decode_stream(
        frames(*created(), *text_stream("x"), completed(status, incomplete_details=details))
    )
    finish = events[-1]
    assert isinstance(finish, c.Finish) and finish.stop_reason == stop


def test_open_blocks_are_closed_before_finish() -> None:
    evs = text_stream("cut")[:3]  # added, part added, one delta; nothing done
    events = decode_stream(
        frames(
            *created(),
            *evs,
            completed("incomplete", incomplete_details={"reason": "max_output_tokens"}),
        )
    )
    check_well_formed(events)
    assert events[-2] == c.BlockStop(index=0)


@pytest.mark.parametrize(
    ("event", "status", "message"),
    [
        (
            {"type": "error", "code": "rate_limit_exceeded", "message": "slow", "param": None},
            429,
            "slow",
        ),
        ({"type": "error", "code": "server_is_overloaded", "message": "busy"}, 529, "busy"),
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            529,
            "Overloaded",
        ),
        (
            {
                "type": "error",
                "error": {"type": "server_error", "code": "server_error", "message": "x"},
            },
            500,
            "x",
        ),
        ({"type": "error", "code": "invalid_request_error", "message": "bad"}, 400, "bad"),
        ({"type": "error", "code": "weird", "message": "w"}, 500, "w"),
        ({"type": "error"}, 500, "the upstream stream failed"),
    ],
)
def test_upstream_error_events_in_both_shapes_become_a_stream_error(
    event: dict[str, Any], status: int, message: str
) -> None:
    events = decode_stream(frames(*created(), *text_stream("partial")[:3], event, completed()))
    check_well_formed(events)
    err = events[-1]
    assert isinstance(err, c.StreamError) and (err.status, err.message) == (status, message)


def test_response_failed_with_an_error_is_a_stream_error() -> None:
    events = decode_stream(
        frames(
            *created(),
            completed("failed", error={"code": "rate_limit_exceeded", "message": "quota"}),
        )
    )
    assert events[-1] == c.StreamError(
        status=429, kind="rate_limit", message="quota", code="rate_limit_exceeded"
    )


def test_an_error_before_response_created_is_still_a_stream_error() -> None:
    events = decode_stream(frames({"type": "error", "code": "server_error", "message": "down"}))
    assert events == [
        c.StreamError(status=500, kind="api_error", message="down", code="server_error")
    ]


def test_eof_before_the_terminal_event_is_a_502_stream_error() -> None:
    events = decode_stream(frames(*created(), *text_stream("x")))
    err = events[-1]
    assert isinstance(err, c.StreamError) and err.status == 502 and err.kind == "bad_gateway"


def test_nothing_follows_the_terminal_event() -> None:
    dec = CODEC.stream_decoder()
    out: list[c.StreamEvent] = []
    for raw in frames(*created(), *text_stream("x"), completed()).split(b"\n\n"):
        if raw:
            event, _, data = raw.partition(b"\ndata: ")
            out.extend(dec.feed(SSEEvent(event[7:].decode(), data)))
    assert (
        dec.feed(SSEEvent("response.output_text.delta", b'{"type":"response.output_text.delta"}'))
        == []
    )
    assert dec.close() == []
    check_well_formed(out)


@pytest.mark.parametrize(
    "body",
    [
        b"data: {not json}\n\n",
        frames(
            *created(),
            {
                "type": "response.output_text.delta",
                "output_index": 7,
                "item_id": "nope",
                "delta": "x",
            },
        ),
        frames(*created(), added(0, fcall("fc", "c", "f")), added(0, fcall("fc2", "c2", "g"))),
        frames(
            *created(),
            *text_stream("x")[:2],
            {
                "type": "response.content_part.added",
                "output_index": 0,
                "item_id": "msg_1",
                "content_index": 0,
                "part": {"type": "output_text"},
            },
        ),
        frames(added(0, fcall("fc", "c", "f"))),
        frames(*created(), {"type": "response.output_text.delta", "output_index": "zero"}),
        frames(*created(), added(0, {"type": "function_call", "id": "fc"})),
    ],
    ids=[
        "bad-json",
        "unknown-item",
        "duplicate-index",
        "duplicate-part",
        "before-created",
        "bad-field",
        "nameless-call",
    ],
)
def test_stream_protocol_violations_are_502(body: bytes) -> None:
    with pytest.raises(ProxyError) as exc:
        decode_stream(body)
    assert exc.value.status == 502 and exc.value.kind == "bad_gateway"


def test_content_events_of_items_we_do_not_carry_are_ignored() -> None:
    item = {"type": "future_item", "id": "fi_1"}
    base = {"output_index": 0, "item_id": "fi_1", "content_index": 0}
    events = decode_stream(
        frames(
            *created(),
            added(0, item),
            {
                "type": "response.content_part.added",
                **base,
                "part": {"type": "output_text", "text": ""},
            },
            {"type": "response.output_text.delta", **base, "delta": "x"},
            {"type": "response.function_call_arguments.delta", **base, "delta": "{"},
            {
                "type": "response.reasoning_summary_text.delta",
                **base,
                "summary_index": 0,
                "delta": "s",
            },
            {
                "type": "response.content_part.done",
                **base,
                "part": {"type": "output_text", "text": "x"},
            },
            done(0, item),
            *text_stream("kept", n=1),
            completed(),
        )
    )
    check_well_formed(events)
    assert fold(events).content == [c.Text(text="kept")]


def test_a_delta_on_an_item_of_another_kind_is_a_502() -> None:
    with pytest.raises(ProxyError) as exc:
        decode_stream(
            frames(
                *created(),
                added(0, fcall("fc", "c", "f")),
                {
                    "type": "response.reasoning_summary_text.delta",
                    "output_index": 0,
                    "item_id": "fc",
                    "summary_index": 0,
                    "delta": "x",
                },
            )
        )
    assert exc.value.status == 502


def test_a_refusal_part_after_a_text_part_starts_before_the_text_block_stops() -> None:
    """The overlap (``codec.RefusalJoin``) keeps the two parts in one message item for a
    Responses client, as the non-streamed answer has them; the text block stops at the
    next event, so every block is still stopped before the terminal."""
    parts = [
        {"type": "output_text", "text": "Sure.", "annotations": []},
        {"type": "refusal", "refusal": "But not that."},
    ]
    msg = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    body: list[dict[str, Any]] = [*created(), added(0, {**msg, "status": "in_progress"})]
    for ci, part in enumerate(parts):
        key = "text" if part["type"] == "output_text" else "refusal"
        kind = "output_text" if key == "text" else "refusal"
        base = {"output_index": 0, "item_id": "msg_1", "content_index": ci}
        body += [
            {"type": "response.content_part.added", **base, "part": {**part, key: ""}},
            {"type": f"response.{kind}.delta", **base, "delta": part[key]},
            {"type": f"response.{kind}.done", **base, key: part[key]},
            {"type": "response.content_part.done", **base, "part": part},
        ]
    body += [done(0, {**msg, "status": "completed", "content": parts}), completed()]
    events = decode_stream(frames(*body))
    check_well_formed(events)
    kinds = [
        (type(e).__name__, e.index) for e in events if isinstance(e, (c.BlockStart, c.BlockStop))
    ]
    assert kinds == [("BlockStart", 0), ("BlockStart", 1), ("BlockStop", 0), ("BlockStop", 1)]
    assert fold(events).content == [c.Text(text="Sure."), c.Refusal(text="But not that.")]
    enc = CODEC.stream_encoder(c.Request(model="m", messages=[]))
    streamed = validate_responses_stream(b"".join(enc.encode(e) for e in events))
    assert streamed.response is not None
    (item,) = streamed.response["output"]
    assert [p["type"] for p in item["content"]] == ["output_text", "refusal"]
