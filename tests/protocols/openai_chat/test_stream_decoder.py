"""Stream decoder: upstream Chat SSE -> canonical stream events."""

from __future__ import annotations

from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.errors import ProxyError
from proxai_asgi.protocols.openai_chat import CODEC
from proxai_asgi.protocols.openai_chat.stream import DecoderState
from proxai_asgi.sse import SSEEvent

from ._util import chunk, decode_stream, frames, sse_events, usage_chunk

ROLE = chunk({"role": "assistant", "content": ""})


def tc(
    index: int, args: str | None = None, id: str | None = None, name: str | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index}
    fn: dict[str, Any] = {}
    if id is not None:
        out.update(id=id, type="function")
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    out["function"] = fn
    return out


def run(*chunks: dict[str, Any] | str) -> list[c.StreamEvent]:
    return decode_stream(frames(*chunks))


def raises_502(*chunks: dict[str, Any] | str) -> ProxyError:
    with pytest.raises(ProxyError) as ei:
        run(*chunks)
    assert ei.value.status == 502 and ei.value.kind == "bad_gateway"
    return ei.value


def kinds(events: list[c.StreamEvent]) -> list[str]:
    out = []
    for e in events:
        if isinstance(e, c.BlockStart):
            out.append(f"start{e.index}:{e.kind}")
        elif isinstance(e, c.BlockDelta):
            out.append(f"delta{e.index}:{e.text}")
        elif isinstance(e, c.BlockStop):
            out.append(f"stop{e.index}")
        else:
            out.append(type(e).__name__)
    return out


def test_decoder_first_choice_chunk_emits_message_start_with_id_model_created() -> None:
    ev = run(ROLE, chunk({"content": "a"}), chunk({}, "stop"), "[DONE]")
    assert ev[0] == c.MessageStart(id="chatcmpl-up1", model="gpt-up", created=1700000000)
    assert kinds(ev) == ["MessageStart", "start0:text", "delta0:a", "stop0", "Finish"]


@pytest.mark.parametrize("field", ["id", "model"])
def test_decoder_later_chunk_with_a_different_id_or_model_is_502(field: str) -> None:
    err = raises_502(ROLE, chunk({"content": "a"}, **{field: "other"}))
    assert field in err.message


def test_decoder_text_stays_open_beside_a_tool_call_and_takes_the_content_after_it() -> None:
    """MP-23: a Chat message is its content, then its tool calls; content streamed after
    a call belongs to the text before it (issue 17)."""
    ev = run(
        ROLE,
        chunk({"content": "Looking"}),
        chunk({"tool_calls": [tc(0, "", id="call_a", name="f")]}),
        chunk({"tool_calls": [tc(0, "{}")]}),
        chunk({"content": "done"}),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    assert kinds(ev) == [
        "MessageStart",
        "start0:text",
        "delta0:Looking",
        "start1:tool_call",
        "delta1:{}",
        "delta0:done",
        "stop0",
        "stop1",
        "Finish",
    ]
    start = ev[3]
    assert isinstance(start, c.BlockStart) and (start.call_id, start.name, start.tool_kind) == (
        "call_a",
        "f",
        "function",
    )


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_decoder_reasoning_opens_a_reasoning_block_that_closes_when_text_starts(field: str) -> None:
    ev = run(
        ROLE,
        chunk({field: "hmm"}),
        chunk({field: " ok"}),
        chunk({"content": "A"}),
        chunk({}, "stop"),
        "[DONE]",
    )
    assert kinds(ev) == [
        "MessageStart",
        "start0:reasoning",
        "delta0:hmm",
        "delta0: ok",
        "stop0",
        "start1:text",
        "delta1:A",
        "stop1",
        "Finish",
    ]


def test_decoder_refusal_deltas_become_a_refusal_block_and_a_refusal_stop() -> None:
    ev = run(
        ROLE,
        chunk({"refusal": "I can't"}),
        chunk({"refusal": " help."}),
        chunk({}, "stop"),
        usage_chunk(),
        "[DONE]",
    )
    assert kinds(ev) == [
        "MessageStart",
        "start0:refusal",
        "delta0:I can't",
        "delta0: help.",
        "stop0",
        "Finish",
    ]
    fin = ev[-1]
    assert isinstance(fin, c.Finish) and fin.stop_reason == "refusal"


def test_decoder_interleaved_tool_call_fragments_are_routed_by_their_own_index() -> None:
    ev = run(
        ROLE,
        chunk({"tool_calls": [tc(0, "", id="call_a", name="get_weather")]}),
        chunk({"tool_calls": [tc(1, "", id="call_b", name="get_time")]}),
        chunk({"tool_calls": [tc(0, '{"city":')]}),
        chunk({"tool_calls": [tc(1, '{"tz":')]}),
        chunk({"tool_calls": [tc(0, '"Beijing"}'), tc(1, '"Asia/Shanghai"}')]}),
        chunk({}, "tool_calls"),
        usage_chunk(),
        "[DONE]",
    )
    from proxai_asgi.codec import fold

    r = fold(ev)
    assert r.content == [
        c.ToolCall(id="call_a", name="get_weather", arguments='{"city":"Beijing"}'),
        c.ToolCall(id="call_b", name="get_time", arguments='{"tz":"Asia/Shanghai"}'),
    ]
    assert r.stop_reason == "tool_use"


def test_decoder_tool_call_first_fragment_without_id_or_name_is_502() -> None:
    raises_502(ROLE, chunk({"tool_calls": [tc(0, "{}")]}))
    raises_502(
        ROLE,
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c", "type": "function", "function": {"arguments": ""}}
                ]
            }
        ),
    )


def test_decoder_later_name_and_id_repeats_are_ignored() -> None:
    ev = run(
        ROLE,
        chunk({"tool_calls": [tc(0, "{", id="call_a", name="f")]}),
        chunk({"tool_calls": [tc(0, "}", id="call_a", name="f")]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    assert kinds(ev) == [
        "MessageStart",
        "start0:tool_call",
        "delta0:{",
        "delta0:}",
        "stop0",
        "Finish",
    ]


def test_decoder_index_less_tool_call_fragments_follow_their_ids() -> None:
    ev = run(
        ROLE,
        chunk(
            {
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{"}}
                ]
            }
        ),
        chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
        chunk(
            {
                "tool_calls": [
                    {"id": "b", "type": "function", "function": {"name": "g", "arguments": "[]"}}
                ]
            }
        ),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    assert kinds(ev) == [
        "MessageStart",
        "start0:tool_call",
        "delta0:{",
        "delta0:}",
        "start1:tool_call",
        "delta1:[]",
        "stop0",
        "stop1",
        "Finish",
    ]


def test_decoder_custom_tool_call_deltas_are_custom_tool_blocks() -> None:
    ev = run(
        ROLE,
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "type": "custom",
                        "custom": {"name": "apply_patch", "input": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "custom": {"input": "*** Begin"}}]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    start = ev[1]
    assert (
        isinstance(start, c.BlockStart)
        and start.tool_kind == "custom"
        and start.name == "apply_patch"
    )
    assert kinds(ev)[2] == "delta0:*** Begin"


def test_decoder_finish_closes_all_blocks_and_holds_the_terminal_until_usage() -> None:
    dec = CODEC.stream_decoder()
    evs: list[c.StreamEvent] = []
    for e in sse_events(
        frames(
            ROLE, chunk({"content": "a"}), chunk({"tool_calls": [tc(0, "{}", id="x", name="f")]})
        )
    ):
        evs += dec.feed(e)
    (fin_ev,) = sse_events(frames(chunk({}, "tool_calls")))
    out = dec.feed(fin_ev)
    assert kinds(out) == ["stop0", "stop1"]  # the text stayed open beside the tool call
    assert dec.state is DecoderState.TERMINAL  # type: ignore[attr-defined]
    (u,) = sse_events(frames(usage_chunk(3, 4)))
    out = dec.feed(u)
    assert out == [c.Finish(stop_reason="tool_use", usage=c.Usage(input_tokens=3, output_tokens=4))]
    assert dec.feed(SSEEvent(None, b"[DONE]")) == []
    assert dec.close() == []


def test_decoder_usage_on_ordinary_chunks_is_not_final_usage() -> None:
    u = {"prompt_tokens": 99, "completion_tokens": 99, "total_tokens": 198}
    ev = run(ROLE, chunk({"content": "a"}, usage=u), chunk({}, "stop"), usage_chunk(1, 2), "[DONE]")
    fin = ev[-1]
    assert isinstance(fin, c.Finish) and fin.usage == c.Usage(input_tokens=1, output_tokens=2)
    ev = run(ROLE, chunk({"content": "a"}, usage=u), chunk({}, "stop"), "[DONE]")
    fin = ev[-1]
    assert isinstance(fin, c.Finish) and fin.usage == c.Usage()


def test_decoder_usage_on_the_finish_chunk_is_kept_when_no_usage_chunk_follows() -> None:
    u = {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}
    ev = run(ROLE, chunk({"content": "a"}), chunk({}, "stop", usage=u), "[DONE]")
    fin = ev[-1]
    assert isinstance(fin, c.Finish) and fin.usage == c.Usage(input_tokens=4, output_tokens=6)


def test_decoder_usage_only_chunk_before_any_choice_or_before_finish_is_502() -> None:
    raises_502(usage_chunk())
    raises_502(ROLE, chunk({"content": "a"}), usage_chunk())


def test_decoder_chunk_after_the_stream_stopped_is_502() -> None:
    raises_502(ROLE, chunk({}, "stop"), usage_chunk(), usage_chunk())
    raises_502(ROLE, chunk({}, "stop"), usage_chunk(), chunk({"content": "late"}))


def test_decoder_content_after_finish_reason_is_502() -> None:
    raises_502(ROLE, chunk({}, "stop"), chunk({"content": "late"}))


@pytest.mark.parametrize("end", ["[DONE]", None])
def test_decoder_done_or_eof_after_finish_gives_finish_with_zero_usage(end: str | None) -> None:
    ev = run(ROLE, chunk({"content": "a"}), chunk({}, "length"), *([end] if end else []))
    assert ev[-1] == c.Finish(stop_reason="max_tokens", usage=c.Usage())


@pytest.mark.parametrize("end", ["[DONE]", None])
@pytest.mark.parametrize("started", [True, False])
def test_decoder_done_or_eof_before_finish_reason_is_a_502_stream_error(
    end: str | None, started: bool
) -> None:
    ev = run(*([ROLE, chunk({"content": "a"})] if started else []), *([end] if end else []))
    last = ev[-1]
    assert isinstance(last, c.StreamError) and last.status == 502 and last.kind == "bad_gateway"
    assert "finish_reason" in last.message
    assert sum(isinstance(e, (c.Finish, c.StreamError)) for e in ev) == 1


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (
            chunk(
                {"content": "a"},
                choices=[
                    {"index": 0, "delta": {"content": "a"}},
                    {"index": 1, "delta": {"content": "b"}},
                ],
            ),
            "choices",
        ),
        (chunk({"content": "a"}, choices=[{"index": 1, "delta": {"content": "b"}}]), "index"),
        (
            chunk(
                {"content": "a"},
                choices=[
                    {
                        "index": 0,
                        "delta": {"content": "b"},
                        "logprobs": {"content": [{"token": "b", "logprob": 0}]},
                    }
                ],
            ),
            "logprobs",
        ),
        (chunk({"role": "user", "content": "b"}), "role"),
    ],
)
def test_decoder_multi_choice_nonzero_index_logprobs_and_foreign_roles_are_502(
    bad: dict[str, Any], words: str
) -> None:
    err = raises_502(ROLE, bad)
    assert words in err.message


def test_decoder_empty_logprobs_and_extra_fields_are_ignored() -> None:
    ev = run(
        chunk(
            {"role": "assistant", "content": "", "refusal": None},
            obfuscation="xx",
            system_fingerprint="fp",
            service_tier="default",
            usage=None,
        ),
        chunk(
            {"content": "a"},
            choices=[
                {
                    "index": 0,
                    "delta": {"content": "a"},
                    "logprobs": {"content": None, "refusal": None},
                    "finish_reason": None,
                }
            ],
        ),
        chunk({}, "stop"),
        "[DONE]",
    )
    assert kinds(ev) == ["MessageStart", "start0:text", "delta0:a", "stop0", "Finish"]


def test_decoder_azure_filter_chunks_are_skipped() -> None:
    pre = {
        "id": "",
        "object": "",
        "created": 0,
        "model": "",
        "choices": [],
        "prompt_filter_results": [{"prompt_index": 0}],
    }
    post = {
        "id": "",
        "object": "",
        "created": 0,
        "model": "",
        "choices": [{"index": 0, "delta": {}, "content_filter_results": {}}],
    }
    ev = run(pre, ROLE, chunk({"content": "a"}), post, chunk({}, "stop"), "[DONE]")
    assert kinds(ev) == ["MessageStart", "start0:text", "delta0:a", "stop0", "Finish"]


@pytest.mark.parametrize(
    ("err", "status", "kind"),
    [
        (
            {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"},
            429,
            "rate_limit",
        ),
        ({"message": "busy", "type": "server_error", "code": "overloaded"}, 529, "overloaded"),
        ({"message": "boom", "type": "server_error", "code": None}, 500, "api_error"),
        (
            {"message": "bad", "type": "invalid_request_error", "param": None, "code": None},
            400,
            "invalid_request",
        ),
        (
            {"message": "vllm", "type": "BadRequestError", "code": 400, "object": "error"},
            400,
            "invalid_request",
        ),
        ({"message": "busy", "type": "overloaded_error"}, 529, "overloaded"),
    ],
)
def test_decoder_error_chunk_becomes_a_stream_error_with_its_status(
    err: dict[str, Any], status: int, kind: str
) -> None:
    ev = run(ROLE, chunk({"content": "a"}), {"error": err})
    # The provider's code travels with the error (its type when the code is none).
    code = err.get("code") if isinstance(err.get("code"), str) else err["type"]
    assert ev[-1] == c.StreamError(status=status, kind=kind, message=err["message"], code=code)


def test_decoder_error_event_in_anthropic_shape_becomes_a_stream_error() -> None:
    dec = CODEC.stream_decoder()
    data = (
        b'{"type":"error","error":{"details":null,"type":"overloaded_error",'
        b'"message":"Overloaded"} }'
    )
    assert dec.feed(SSEEvent("error", data)) == [
        c.StreamError(status=529, kind="overloaded", message="Overloaded", code="overloaded_error")
    ]
    assert dec.close() == []


@pytest.mark.parametrize("data", [b"{", b"not json", b"[1,2]", b'{"choices": "x"}', b"\xff\xfe"])
def test_decoder_malformed_chunk_is_502(data: bytes) -> None:
    dec = CODEC.stream_decoder()
    with pytest.raises(ProxyError) as ei:
        dec.feed(SSEEvent(None, data))
    assert ei.value.status == 502


def test_decoder_exactly_one_terminal_then_nothing() -> None:
    dec = CODEC.stream_decoder()
    out: list[c.StreamEvent] = []
    for e in sse_events(
        frames(
            ROLE,
            {"error": {"message": "x", "type": "server_error"}},
            chunk({"content": "more"}),
            "[DONE]",
        )
    ):
        out += dec.feed(e)
    out += dec.close()
    assert sum(isinstance(e, (c.Finish, c.StreamError)) for e in out) == 1
    assert isinstance(out[-1], c.StreamError)


def test_decoder_block_indexes_are_unique_and_every_start_is_stopped_before_finish() -> None:
    ev = run(
        ROLE,
        chunk({"reasoning_content": "r"}),
        chunk({"content": "a"}),
        chunk({"refusal": "n"}),
        chunk({"tool_calls": [tc(0, "", id="a", name="f"), tc(1, "", id="b", name="g")]}),
        chunk({"content": "b"}),
        chunk({"reasoning_content": "r2"}),
        chunk({}, "stop"),
        "[DONE]",
    )
    starts = [e.index for e in ev if isinstance(e, c.BlockStart)]
    stops = [e.index for e in ev if isinstance(e, c.BlockStop)]
    assert starts == list(range(len(starts)))
    assert sorted(stops) == starts
    assert isinstance(ev[-1], c.Finish)
    open_: set[int] = set()
    for e in ev:
        if isinstance(e, c.BlockStart):
            open_.add(e.index)
        elif isinstance(e, c.BlockDelta):
            assert e.index in open_
        elif isinstance(e, c.BlockStop):
            open_.remove(e.index)
