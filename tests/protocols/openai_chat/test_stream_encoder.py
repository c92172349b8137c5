"""Stream encoder: canonical events -> Chat SSE for the client. Every output goes
through the strict validator (tests/helpers/validate_chat.py)."""

from __future__ import annotations

import json
import time

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.protocols.openai_chat import CODEC
from proxai_asgi.sse import DONE_FRAME
from tests.helpers.validate_chat import ChatStream, validate_chat_stream

from ._util import encode_stream, req, sdk_accumulate

START = c.MessageStart(id="msg_01ABC", model="claude-x", created=1700000000)
END = c.Finish(stop_reason="end_turn", usage=c.Usage(input_tokens=3, output_tokens=4))


def text_events(*texts: str, index: int = 0) -> list[c.StreamEvent]:
    return [
        c.BlockStart(index=index, kind="text"),
        *(c.BlockDelta(index=index, text=t) for t in texts),
        c.BlockStop(index=index),
    ]


def run(events: list[c.StreamEvent], include_usage: bool = False) -> tuple[bytes, ChatStream]:
    body = encode_stream(events, req(stream=True, include_usage=include_usage))
    return body, validate_chat_stream(body, include_usage=include_usage)


def payloads(body: bytes) -> list[str]:
    return [f[len("data: ") :] for f in body.decode().split("\n\n") if f]


def test_encoder_first_chunk_is_the_role_chunk_with_empty_content() -> None:
    body, s = run([START, *text_events("Hi"), END])
    first = json.loads(payloads(body)[0])
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert s.content == "Hi"


def test_encoder_every_chunk_carries_the_derived_id_created_and_model() -> None:
    body, s = run([START, *text_events("a", "b"), END], include_usage=True)
    assert (s.id, s.created, s.model) == ("chatcmpl-01ABC", 1700000000, "claude-x")
    for p in payloads(body)[:-1]:
        obj = json.loads(p)
        assert (obj["id"], obj["object"], obj["created"], obj["model"]) == (
            "chatcmpl-01ABC",
            "chat.completion.chunk",
            1700000000,
            "claude-x",
        )


def test_encoder_created_falls_back_to_now_once_and_model_to_the_request() -> None:
    before = int(time.time())
    body = encode_stream(
        [c.MessageStart(id="x", model=""), *text_events("a"), END], req(model="asked", stream=True)
    )
    s = validate_chat_stream(body)
    assert s.created is not None and before <= s.created <= int(time.time()) + 1
    assert s.model == "asked"


def test_encoder_text_reasoning_and_refusal_go_to_their_delta_fields() -> None:
    _, s = run(
        [
            START,
            c.BlockStart(index=0, kind="reasoning"),
            c.BlockDelta(index=0, text="think"),
            c.BlockSignature(index=0, signature="SIG"),
            c.BlockStop(index=0),
            c.BlockStart(index=1, kind="reasoning", summary=True),
            c.BlockDelta(index=1, text="more"),
            c.BlockStop(index=1),
            *text_events("answer", index=2),
            c.BlockStart(index=3, kind="refusal"),
            c.BlockDelta(index=3, text="but not that"),
            c.BlockStop(index=3),
            END,
        ]
    )
    assert (s.reasoning, s.content, s.refusal) == ("think\n\nmore", "answer", "but not that")


def test_encoder_redacted_reasoning_and_signatures_emit_nothing() -> None:
    body, s = run(
        [
            START,
            c.BlockStart(index=0, kind="redacted_reasoning", redacted="REDACTED"),
            c.BlockStop(index=0),
            c.BlockStart(index=1, kind="reasoning", encrypted_content="ENC"),
            c.BlockSignature(index=1, signature="SIG", encrypted_content="ENC2"),
            c.BlockStop(index=1),
            *text_events("a", index=2),
            END,
        ]
    )
    assert b"REDACTED" not in body and b"SIG" not in body and b"ENC" not in body
    assert s.reasoning is None and len(s.chunks) == 3  # role, content, finish


def test_encoder_refusal_block_before_text_is_delta_refusal() -> None:
    _, s = run(
        [
            START,
            c.BlockStart(index=0, kind="refusal"),
            c.BlockDelta(index=0, text="No."),
            c.BlockStop(index=0),
            END,
        ]
    )
    assert (s.content, s.refusal, s.finish_reason) == (None, "No.", "stop")


def test_encoder_tool_call_indexes_follow_block_start_order_when_deltas_interleave() -> None:
    _, s = run(
        [
            START,
            *text_events("Looking up"),
            c.BlockStart(index=1, kind="tool_call", call_id="toolu_a", name="get_weather"),
            c.BlockStart(index=2, kind="tool_call", call_id="toolu_b", name="get_time"),
            c.BlockDelta(index=1, text='{"city":'),
            c.BlockDelta(index=2, text='{"tz":'),
            c.BlockDelta(index=1, text='"Beijing"}'),
            c.BlockDelta(index=2, text='"Asia/Shanghai"}'),
            c.BlockStop(index=2),
            c.BlockStop(index=1),
            c.Finish(stop_reason="tool_use", usage=c.Usage()),
        ]
    )
    assert s.tool_calls == [
        {
            "id": "toolu_a",
            "type": "function",
            "name": "get_weather",
            "arguments": '{"city":"Beijing"}',
        },
        {
            "id": "toolu_b",
            "type": "function",
            "name": "get_time",
            "arguments": '{"tz":"Asia/Shanghai"}',
        },
    ]
    assert s.finish_reason == "tool_calls"


def test_encoder_tool_call_first_chunk_carries_id_type_name_and_empty_arguments() -> None:
    body, _ = run(
        [
            START,
            c.BlockStart(index=5, kind="tool_call", call_id="c", name="f"),
            c.BlockDelta(index=5, text="{}"),
            c.BlockStop(index=5),
            END,
        ]
    )
    p = [json.loads(x) for x in payloads(body)[:-1]]
    assert p[1]["choices"][0]["delta"] == {
        "tool_calls": [
            {"index": 0, "id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}
        ]
    }
    assert p[2]["choices"][0]["delta"] == {
        "tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]
    }


def test_encoder_custom_tool_calls_use_custom_input_frames() -> None:
    body, s = run(
        [
            START,
            c.BlockStart(
                index=0, kind="tool_call", call_id="c", name="apply_patch", tool_kind="custom"
            ),
            c.BlockDelta(index=0, text="*** Begin"),
            c.BlockStop(index=0),
            END,
        ]
    )
    p = [json.loads(x) for x in payloads(body)[:-1]]
    assert p[1]["choices"][0]["delta"]["tool_calls"] == [
        {"index": 0, "id": "c", "type": "custom", "custom": {"name": "apply_patch", "input": ""}}
    ]
    assert p[2]["choices"][0]["delta"]["tool_calls"] == [
        {"index": 0, "custom": {"input": "*** Begin"}}
    ]
    assert s.tool_calls[0]["arguments"] == "*** Begin"


def test_encoder_tool_call_without_an_id_gets_a_derived_one() -> None:
    _, s = run(
        [
            START,
            c.BlockStart(index=0, kind="tool_call", call_id="", name="f"),
            c.BlockStop(index=0),
            END,
        ]
    )
    assert s.tool_calls[0]["id"] == "call_01ABC_0"


def test_encoder_refusal_finish_sends_the_explanation_when_nothing_was_said() -> None:
    _, s = run(
        [START, c.Finish(stop_reason="refusal", usage=c.Usage(), refusal_explanation="unsafe")]
    )
    assert (s.content, s.refusal, s.finish_reason) == (None, "unsafe", "stop")


def test_encoder_refusal_finish_after_content_adds_no_duplicate_refusal() -> None:
    _, s = run(
        [
            START,
            *text_events("I can't do that."),
            c.Finish(stop_reason="refusal", usage=c.Usage(), refusal_explanation="unsafe"),
        ]
    )
    assert (s.content, s.refusal, s.finish_reason) == ("I can't do that.", None, "stop")


def test_encoder_refusal_finish_after_refusal_deltas_adds_nothing() -> None:
    _, s = run(
        [
            START,
            c.BlockStart(index=0, kind="refusal"),
            c.BlockDelta(index=0, text="No."),
            c.Finish(stop_reason="refusal", usage=c.Usage(), refusal_explanation="why"),
        ]
    )
    assert s.refusal == "No."


@pytest.mark.parametrize(
    ("fragments", "stopped", "refusal"),
    [
        (["No", " way."], True, None),  # the content again, in pieces: left out
        (["No", " way."], False, None),  # ... also when the block is still open at finish
        (["No"], True, "No"),  # a prefix only: not the same text, sent at the finish
        (["No", " thanks."], True, "No thanks."),  # diverges: sent whole, from then on
    ],
    ids=["repeat", "repeat-open-at-finish", "prefix", "diverges"],
)
def test_encoder_refusal_repeating_the_sent_content_is_not_sent_again(
    fragments: list[str], stopped: bool, refusal: str | None
) -> None:
    """RS-3: never the same text in ``content`` and ``refusal``; the content is already
    out, so a refusal that only repeats it is the part left out."""
    events: list[c.StreamEvent] = [
        START,
        *text_events("No way."),
        c.BlockStart(index=1, kind="refusal"),
        *(c.BlockDelta(index=1, text=f) for f in fragments),
    ]
    if stopped:
        events.append(c.BlockStop(index=1))
    _, s = run([*events, END])
    assert (s.content, s.refusal) == ("No way.", refusal)


def test_encoder_refusal_repeat_is_judged_on_the_whole_content_and_refusal() -> None:
    """As the non-streamed answer judges it: all refusal text against all content, once
    the answer is finished (order kept across refusal blocks)."""

    def refusal(index: int, text: str) -> list[c.StreamEvent]:
        return [
            c.BlockStart(index=index, kind="refusal"),
            c.BlockDelta(index=index, text=text),
            c.BlockStop(index=index),
        ]

    _, s = run([START, *text_events("0"), *refusal(1, "0"), *text_events("0", index=2), END])
    assert (s.content, s.refusal) == ("00", "0")  # more content came: not a repeat
    _, s = run([START, *text_events("ab"), *refusal(1, "a"), *refusal(2, "b"), END])
    assert (s.content, s.refusal) == ("ab", None)  # together they repeat it
    _, s = run([START, *text_events("ab"), *refusal(1, "a"), *refusal(2, "c"), END])
    assert (s.content, s.refusal) == ("ab", "ac")


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("content_filter", "content_filter"),
        ("pause_turn", "stop"),
        (None, "stop"),
    ],
)
def test_encoder_finish_reason_comes_from_policy(stop: c.StopReason | None, finish: str) -> None:
    _, s = run([START, *text_events("x"), c.Finish(stop_reason=stop, usage=c.Usage())])
    assert s.finish_reason == finish


def test_encoder_finish_reason_is_tool_calls_when_tool_calls_were_sent_and_stop_is_end_turn() -> (
    None
):
    _, s = run(
        [
            START,
            c.BlockStart(index=0, kind="tool_call", call_id="c", name="f"),
            c.BlockStop(index=0),
            END,
        ]
    )
    assert s.finish_reason == "tool_calls"


@pytest.mark.parametrize("include_usage", [True, False])
def test_encoder_usage_chunk_only_when_the_client_asked_for_it(include_usage: bool) -> None:
    usage = c.Usage(input_tokens=11, output_tokens=5, cached_tokens=2, reasoning_tokens=1)
    _, s = run(
        [START, *text_events("x"), c.Finish(stop_reason="end_turn", usage=usage)], include_usage
    )
    if include_usage:
        assert s.usage == {
            "prompt_tokens": 11,
            "completion_tokens": 5,
            "total_tokens": 16,
            "prompt_tokens_details": {"cached_tokens": 2},
            "completion_tokens_details": {"reasoning_tokens": 1},
        }
    else:
        assert s.usage is None


@pytest.mark.parametrize("cut", [0, 1, 2, 4, 6])
def test_encoder_stream_error_at_any_point_ends_with_an_error_chunk_and_done(cut: int) -> None:
    everything: list[c.StreamEvent] = [
        START,
        c.BlockStart(index=0, kind="text"),
        c.BlockDelta(index=0, text="partial"),
        c.BlockStart(index=1, kind="tool_call", call_id="t", name="f"),
        c.BlockDelta(index=1, text="{"),
        c.BlockStop(index=0),
    ]
    events = everything[:cut]
    body, s = run(
        [
            *events,
            c.StreamError(status=529, kind="overloaded", message="Overloaded"),
            *text_events("late"),
            END,
        ]
    )
    assert s.error == {
        "message": "Overloaded",
        "type": "server_error",
        "param": None,
        "code": "overloaded",
    }
    assert body.endswith(b'"code":"overloaded"}}\n\n' + DONE_FRAME)


def test_encoder_emits_nothing_after_the_terminal() -> None:
    enc = CODEC.stream_encoder(req(stream=True))
    for ev in [START, *text_events("a"), END]:
        enc.encode(ev)
    for ev in [
        START,
        *text_events("b"),
        END,
        c.StreamError(status=500, kind="api_error", message="x"),
    ]:
        assert enc.encode(ev) == b""


def test_encoder_blocks_still_open_at_finish_are_closed_properly() -> None:
    _, s = run(
        [
            START,
            c.BlockStart(index=0, kind="text"),
            c.BlockDelta(
                index=0,
                text="a",
            ),
            c.BlockStart(index=1, kind="tool_call", call_id="t", name="f"),
            c.BlockDelta(index=1, text="{}"),
            c.Finish(stop_reason="tool_use", usage=c.Usage()),
        ],
        include_usage=True,
    )
    assert (
        s.content == "a"
        and s.tool_calls[0]["arguments"] == "{}"
        and s.finish_reason == "tool_calls"
    )


def test_encoder_never_emits_empty_text() -> None:
    body, s = run(
        [
            START,
            *text_events("", "a", ""),
            c.BlockStart(index=1, kind="reasoning"),
            c.BlockDelta(index=1, text=""),
            c.BlockStop(index=1),
            END,
        ]
    )
    assert len(s.chunks) == 3 and b'"reasoning_content"' not in body


def test_encoder_without_message_start_still_writes_a_valid_stream() -> None:
    _, s = run([*text_events("a"), END])
    assert s.content == "a" and s.id is not None


def test_encoder_citations_are_sent_as_annotations_before_the_finish() -> None:
    cite = c.Citation(url="https://a.test", title="A")
    _, s = run(
        [
            START,
            *text_events("Intro. "),
            c.BlockStart(index=1, kind="text"),
            c.BlockDelta(index=1, text="Cited."),
            c.Citations(index=1, citations=[cite]),
            c.BlockStop(index=1),
            END,
        ]
    )
    assert s.annotations == [
        {
            "type": "url_citation",
            "url_citation": {
                "url": "https://a.test",
                "title": "A",
                "start_index": 7,
                "end_index": 13,
            },
        }
    ]


def test_encoder_output_accumulates_in_the_openai_sdk() -> None:
    body, _ = run(
        [
            START,
            c.BlockStart(index=0, kind="reasoning"),
            c.BlockDelta(index=0, text="r"),
            c.BlockStop(index=0),
            *text_events("Hello", " there", index=1),
            c.BlockStart(index=2, kind="tool_call", call_id="a", name="f"),
            c.BlockStart(index=3, kind="tool_call", call_id="b", name="g"),
            c.BlockDelta(index=3, text='{"y":'),
            c.BlockDelta(index=2, text='{"x":1}'),
            c.BlockDelta(index=3, text="2}"),
            c.BlockStop(index=2),
            c.BlockStop(index=3),
            c.Finish(stop_reason="tool_use", usage=c.Usage(input_tokens=1, output_tokens=2)),
        ],
        include_usage=True,
    )
    done = sdk_accumulate(body)
    msg = done.choices[0].message
    assert done.id == "chatcmpl-01ABC" and done.choices[0].finish_reason == "tool_calls"
    assert msg.content == "Hello there"
    assert [
        (t.id, t.function.name, t.function.arguments)
        for t in msg.tool_calls or []
        if t.type == "function"
    ] == [
        ("a", "f", '{"x":1}'),
        ("b", "g", '{"y":2}'),
    ]
    assert done.usage is not None and done.usage.total_tokens == 3
