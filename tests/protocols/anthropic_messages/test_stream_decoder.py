"""Upstream stream decode: Anthropic SSE -> canonical stream events."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import fold
from proxai_asgi.errors import ProxyError
from proxai_asgi.protocols.anthropic_messages import CODEC
from proxai_asgi.sse import SSEDecoder, SSEEvent
from tests.helpers import captures as cap

from ._util import decode_stream, frames

SSE_CAPTURES = cap.capture_names("anthropic_sse_")

START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 5,
            "output_tokens": 1,
            "cache_read_input_tokens": 20,
            "cache_creation_input_tokens": 3,
        },
    },
}
DELTA = {
    "type": "message_delta",
    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
    "usage": {"output_tokens": 9},
}
STOP = {"type": "message_stop"}


def _text_block(i: int, *texts: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}}
            for t in texts
        ),
        {"type": "content_block_stop", "index": i},
    ]


def _violation(*events: dict[str, Any]) -> ProxyError:
    dec = CODEC.stream_decoder()
    with pytest.raises(ProxyError) as info:
        for e in [START, *events]:
            dec.feed(SSEEvent(e["type"], json.dumps(e).encode()))
    assert info.value.status == 502
    assert info.value.kind == "bad_gateway"
    assert dec.feed(SSEEvent("message_stop", b'{"type":"message_stop"}')) == []
    return info.value


def check_canonical_stream(events: list[c.StreamEvent]) -> None:
    """Decoder contract: indexes unique from 0 (a ServerTool takes one, with no block
    open), every start stopped before Finish, exactly one terminal event and it is
    last."""
    started: list[int] = []
    stopped: set[int] = set()
    terminals = [i for i, e in enumerate(events) if isinstance(e, (c.Finish, c.StreamError))]
    assert len(terminals) == 1 and terminals[0] == len(events) - 1
    for e in events:
        if isinstance(e, c.BlockStart):
            assert e.index not in started
            started.append(e.index)
        elif isinstance(e, (c.BlockDelta, c.BlockSignature, c.Citations)):
            assert e.index in started and e.index not in stopped
        elif isinstance(e, c.BlockStop):
            assert e.index in started and e.index not in stopped
            stopped.add(e.index)
        elif isinstance(e, c.ServerTool):  # whole: an index of its own, between blocks
            assert e.index not in started
            assert all(i in stopped for i in started)
            started.append(e.index)
            stopped.add(e.index)
    assert started == list(range(len(started)))
    if isinstance(events[-1], c.Finish):
        assert stopped == set(started)


def test_capture_text_basic_decodes() -> None:
    events = decode_stream(cap.response_body("anthropic_sse_text_basic"))
    check_canonical_stream(events)
    assert events[0] == c.MessageStart(
        id="msg_018bk6q16LtrDpGDm6TyXTgn",
        model="claude-sonnet-4-20250514",
        usage=c.Usage(input_tokens=17, output_tokens=1),
    )
    r = fold(events)
    assert r.content == [c.Text(text="4200 + 42 = 4242")]
    assert r.stop_reason == "end_turn"
    assert r.usage == c.Usage(input_tokens=17, output_tokens=15)


def test_capture_parallel_tool_use_decodes() -> None:
    events = decode_stream(cap.response_body("anthropic_sse_parallel_tool_use"))
    check_canonical_stream(events)
    r = fold(events)
    assert r.content == [
        c.Text(text="I'll retrieve the secrets for both passwords you provided."),
        c.ToolCall(
            id="toolu_015cUijgET79LXjgeYQerN2h",
            name="secret_retrieval_tool",
            arguments='{"password": "mellon"}',
        ),
        c.ToolCall(
            id="toolu_01XZTimPexA7h3EVKesnKt5T",
            name="secret_retrieval_tool",
            arguments='{"password": "radiance"}',
        ),
    ]
    assert r.stop_reason == "tool_use"
    assert r.usage == c.Usage(input_tokens=416, output_tokens=109)


def test_capture_thinking_with_signature_delta_decodes() -> None:
    events = decode_stream(cap.response_body("anthropic_sse_thinking_signature_delta"))
    check_canonical_stream(events)
    r = fold(events)
    thinking, text = r.content
    assert isinstance(thinking, c.Reasoning) and isinstance(text, c.Text)
    assert thinking.text.startswith("This is a straightforward question about pedestrian safety")
    assert thinking.signature is not None and thinking.signature.startswith("EvMCCkYICxgC")
    assert thinking.signature.endswith("YAQ==")
    assert text.text.startswith("Here are the basic steps for safely crossing the street:")
    assert r.stop_reason == "end_turn"
    assert r.usage == c.Usage(input_tokens=43, output_tokens=282)
    # the empty thinking_delta before the signature produced no event
    assert not any(isinstance(e, c.BlockDelta) and not e.text for e in events)


@pytest.mark.parametrize("name", SSE_CAPTURES)
def test_sse_split_at_every_byte_gives_the_same_canonical_events(name: str) -> None:
    raw = cap.response_body(name)
    whole = decode_stream(raw)
    assert decode_stream(raw, step=1) == whole
    rng = random.Random(name)
    for _ in range(20):
        cut = rng.randrange(1, len(raw))
        dec = CODEC.stream_decoder()
        sse = SSEDecoder()
        out: list[c.StreamEvent] = []
        for part in (raw[:cut], raw[cut:]):
            for e in sse.decode(part):
                out.extend(dec.feed(e))
        for e in sse.flush():
            out.extend(dec.feed(e))
        out.extend(dec.close())
        assert out == whole


def test_stream_and_json_captures_of_the_same_question_agree() -> None:
    streamed = fold(decode_stream(cap.response_body("anthropic_sse_parallel_tool_use")))
    whole = CODEC.decode_response(cap.response_body("anthropic_json_parallel_tool_use"))
    assert [type(p) for p in streamed.content] == [type(p) for p in whole.content]
    assert [json.loads(p.arguments) for p in streamed.content if isinstance(p, c.ToolCall)] == [
        json.loads(p.arguments) for p in whole.content if isinstance(p, c.ToolCall)
    ]
    assert streamed.stop_reason == whole.stop_reason == "tool_use"


def test_missing_event_lines_ping_padding_and_done_are_fine() -> None:
    raw = frames(START, *_text_block(0, "a", "b"), DELTA, STOP, event_lines=False)
    raw = raw.replace(b'"}\n\n', b'"}    \n\n')  # whitespace padding inside data
    raw = b'event: ping\ndata: {"type": "ping"}\n\n' + raw + b"data: [DONE]\n\n"
    events = decode_stream(raw)
    check_canonical_stream(events)
    assert fold(events).content == [c.Text(text="ab")]


def test_usage_is_canonical_and_merged_from_message_start_and_message_delta() -> None:
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "stop_sequence", "stop_sequence": "END"},
        "usage": {"output_tokens": 9, "cache_read_input_tokens": 30},
    }
    events = decode_stream(frames(START, delta, STOP))
    assert events[0] == c.MessageStart(
        id="msg_1",
        model="claude-x",
        usage=c.Usage(input_tokens=28, output_tokens=1, cached_tokens=20, cache_creation_tokens=3),
    )
    assert events[-1] == c.Finish(
        stop_reason="stop_sequence",
        stop_sequence="END",
        usage=c.Usage(input_tokens=38, output_tokens=9, cached_tokens=30, cache_creation_tokens=3),
    )


def test_refusal_stop_details_explanation_reaches_finish() -> None:
    delta = {
        "type": "message_delta",
        "delta": {
            "stop_reason": "refusal",
            "stop_sequence": None,
            "stop_details": {"type": "refusal", "category": "cyber", "explanation": "No."},
        },
        "usage": {"output_tokens": 2},
    }
    fin = decode_stream(frames(START, delta, STOP))[-1]
    assert isinstance(fin, c.Finish)
    assert (fin.stop_reason, fin.refusal_explanation) == ("refusal", "No.")


def test_a_block_never_closed_is_closed_before_finish() -> None:
    events = decode_stream(frames(START, *_text_block(0, "hi")[:2], DELTA, STOP))
    check_canonical_stream(events)
    assert events[-2:] == [
        c.BlockStop(index=0),
        c.Finish(
            stop_reason="end_turn",
            usage=c.Usage(
                input_tokens=28, output_tokens=9, cached_tokens=20, cache_creation_tokens=3
            ),
        ),
    ]


def test_tool_use_input_comes_from_input_json_delta_not_the_start() -> None:
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
    }
    parts = ["", '{"a":', " 1}"]
    deltas = [
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": p},
        }
        for p in parts
    ]
    events = decode_stream(
        frames(START, start, *deltas, {"type": "content_block_stop", "index": 0}, DELTA, STOP)
    )
    assert events[1] == c.BlockStart(index=0, kind="tool_call", call_id="toolu_1", name="f")
    assert fold(events).content == [c.ToolCall(id="toolu_1", name="f", arguments='{"a": 1}')]


def test_tool_use_whose_whole_input_is_in_the_start_keeps_it() -> None:
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
    }
    events = decode_stream(
        frames(START, start, {"type": "content_block_stop", "index": 0}, DELTA, STOP)
    )
    assert fold(events).content == [c.ToolCall(id="toolu_1", name="f", arguments='{"a":1}')]


def test_text_carried_by_content_block_start_is_not_lost() -> None:
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": "Hi"},
    }
    events = decode_stream(
        frames(START, start, {"type": "content_block_stop", "index": 0}, DELTA, STOP)
    )
    assert fold(events).content == [c.Text(text="Hi")]


def test_redacted_thinking_and_citations_decode() -> None:
    redacted = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "redacted_thinking", "data": "EvgF"},
    }
    cite = {
        "type": "web_search_result_location",
        "url": "https://u",
        "title": "T",
        "cited_text": "q",
        "encrypted_index": "e",
    }
    doc_cite = {
        "type": "char_location",
        "cited_text": "c",
        "document_index": 0,
        "start_char_index": 0,
        "end_char_index": 1,
    }
    text = _text_block(1, "x")
    text.insert(
        2,
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "citations_delta", "citation": cite},
        },
    )
    text.insert(
        3,
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "citations_delta", "citation": doc_cite},
        },
    )
    events = decode_stream(
        frames(START, redacted, {"type": "content_block_stop", "index": 0}, *text, DELTA, STOP)
    )
    check_canonical_stream(events)
    assert fold(events).content == [
        c.Reasoning(redacted="EvgF"),
        c.Text(text="x", citations=[c.Citation(url="https://u", title="T", cited_text="q")]),
    ]


def test_a_search_becomes_one_server_tool_event_and_unknown_types_are_skipped() -> None:
    server = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {},
        },
    }
    server_delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"q"'},
    }
    result = {
        "type": "content_block_start",
        "index": 1,
        "content_block": {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [],
        },
    }
    unknown_block = {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "hologram", "x": 1},
    }
    unknown_delta = {
        "type": "content_block_delta",
        "index": 3,
        "delta": {"type": "compaction_delta", "content": "x"},
    }
    text = _text_block(3, "ok")
    text.insert(1, unknown_delta)
    events = decode_stream(
        frames(
            START,
            server,
            server_delta,
            {"type": "content_block_stop", "index": 0},
            result,
            {"type": "content_block_stop", "index": 1},
            unknown_block,
            {"type": "content_block_delta", "index": 2, "delta": {"type": "hologram_delta"}},
            {"type": "content_block_stop", "index": 2},
            {"type": "brand_new_event", "x": 1},
            *text,
            DELTA,
            STOP,
        )
    )
    check_canonical_stream(events)
    # The call's input is cut JSON ('{"q"'): kept as started; the result names no page.
    search = c.ServerToolUse(id="srvtoolu_1", name="web_search", result=[], hits=[])
    assert fold(events).content == [search, c.Text(text="ok")]
    assert [type(e).__name__ for e in events if isinstance(e, (c.BlockStart, c.ServerTool))] == [
        "ServerTool",
        "BlockStart",
    ]


def test_error_event_becomes_stream_error_with_status_from_its_type() -> None:
    fragment = cap.load("errors_from_issue_reports_FRAGMENTS")["fragments"][0]
    raw = frames(START, *_text_block(0, "partial")) + (
        b"event: error\ndata: " + fragment["data"].encode() + b"\n\n"
    )
    events = decode_stream(raw)
    check_canonical_stream(events)
    assert events[-1] == c.StreamError(
        status=529, kind="overloaded", message="Overloaded", code="overloaded_error"
    )


@pytest.mark.parametrize(
    ("etype", "status", "kind"),
    [
        ("rate_limit_error", 429, "rate_limit"),
        ("api_error", 500, "api_error"),
        ("invalid_request_error", 400, "invalid_request"),
        ("overloaded_error", 529, "overloaded"),
        ("something_new", 500, "api_error"),
    ],
)
def test_error_event_before_message_start_is_a_stream_error(
    etype: str, status: int, kind: str
) -> None:
    err = {"type": "error", "error": {"type": etype, "message": "m"}}
    events = decode_stream(frames(err, START))
    assert events == [c.StreamError(status=status, kind=kind, message="m", code=etype)]


def test_eof_before_message_stop_is_a_502_stream_error() -> None:
    for raw in (b"", frames(START), frames(START, *_text_block(0, "x"), DELTA)):
        events = decode_stream(raw)
        assert isinstance(events[-1], c.StreamError)
        assert (events[-1].status, events[-1].kind) == (502, "bad_gateway")


def test_nothing_follows_the_terminal_event() -> None:
    dec = CODEC.stream_decoder()
    out: list[c.StreamEvent] = []
    sequence: list[dict[str, Any]] = [START, DELTA, STOP, *_text_block(0, "late"), START]
    for e in sequence:
        out.extend(dec.feed(SSEEvent(e["type"], json.dumps(e).encode())))
    out.extend(dec.close())
    assert isinstance(out[-1], c.Finish)
    assert sum(isinstance(e, (c.Finish, c.StreamError)) for e in out) == 1


def test_orphan_delta_or_stop_for_an_unknown_block_is_502() -> None:
    _violation({"type": "content_block_stop", "index": 2})
    _violation(
        {"type": "content_block_delta", "index": 4, "delta": {"type": "text_delta", "text": "x"}}
    )


def test_duplicate_block_start_is_502() -> None:
    block = _text_block(0, "x")
    _violation(block[0], block[0])


def test_delta_after_stop_and_double_stop_are_502() -> None:
    block = _text_block(0, "x")
    _violation(*block, block[1])
    _violation(*block, block[-1])


def test_delta_type_not_matching_the_block_is_502() -> None:
    block = _text_block(0)
    wrong = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": "{"},
    }
    err = _violation(block[0], wrong)
    assert "input_json_delta" in err.message


def test_duplicate_message_start_and_blocks_before_start_are_502() -> None:
    _violation(START)
    dec = CODEC.stream_decoder()
    with pytest.raises(ProxyError):
        ev = _text_block(0, "x")[0]
        dec.feed(SSEEvent(None, json.dumps(ev).encode()))


@pytest.mark.parametrize(
    "data",
    [
        b"{not json",
        b'{"type":"content_block_delta","index":"zero","delta":{"type":"text_delta","text":"x"}}',
        b"[1]",
    ],
)
def test_malformed_json_and_malformed_known_events_are_502(data: bytes) -> None:
    dec = CODEC.stream_decoder()
    dec.feed(SSEEvent("message_start", json.dumps(START).encode()))
    with pytest.raises(ProxyError) as info:
        dec.feed(SSEEvent(None, data))
    assert info.value.status == 502
