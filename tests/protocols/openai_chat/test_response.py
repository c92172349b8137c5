"""Upstream response decode (Chat JSON -> canonical) and client response encode."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from openai.types.chat import ChatCompletion

from proxai_asgi import canonical as c
from proxai_asgi.errors import ProxyError
from proxai_asgi.protocols.openai_chat import CODEC

from ._util import req


def completion(message: dict[str, Any], finish: str | None = "stop", **kw: Any) -> bytes:
    body: dict[str, Any] = {
        "id": "chatcmpl-abc",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", **message},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    body.update(kw)
    return json.dumps(body).encode()


def encode(r: c.Response, request: c.Request | None = None) -> dict[str, Any]:
    raw = CODEC.encode_response(r, request or req())
    ChatCompletion.model_validate_json(raw)  # the official SDK type accepts it
    out: dict[str, Any] = json.loads(raw)
    return out


# ==================================================================== upstream decode


@pytest.mark.parametrize("n", [0, 2, 3])
def test_upstream_response_needs_exactly_one_choice(n: int) -> None:
    body = json.loads(completion({"content": "x"}))
    body["choices"] = [dict(body["choices"][0], index=i) for i in range(n)]
    with pytest.raises(ProxyError) as ei:
        CODEC.decode_response(json.dumps(body).encode())
    assert ei.value.status == 502 and ei.value.kind == "bad_gateway"
    assert "choices" in ei.value.message


def test_upstream_response_maps_reasoning_first_then_cited_text_and_tool_calls() -> None:
    r = CODEC.decode_response(
        completion(
            {
                "content": "See docs.",
                "reasoning_content": "thinking",
                "annotations": [
                    {
                        "type": "url_citation",
                        "url_citation": {
                            "url": "https://d.test",
                            "title": "D",
                            "start_index": 4,
                            "end_index": 8,
                        },
                    }
                ],
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"a":1}'},
                    },
                    {"id": "call_2", "type": "custom", "custom": {"name": "p", "input": "raw"}},
                ],
            },
            finish="tool_calls",
        )
    )
    assert r.content == [
        c.Reasoning(text="thinking"),
        c.Text(
            text="See docs.",
            citations=[c.Citation(url="https://d.test", title="D", start_index=4, end_index=8)],
        ),
        c.ToolCall(id="call_1", name="f", arguments='{"a":1}'),
        c.ToolCall(id="call_2", name="p", arguments="raw", kind="custom"),
    ]
    assert r.stop_reason == "tool_use"
    assert (r.id, r.model, r.created) == ("chatcmpl-abc", "gpt-4o", 1700000000)


def test_upstream_response_reasoning_field_alias_is_reasoning() -> None:
    r = CODEC.decode_response(completion({"content": "a", "reasoning": "vllm thinks"}))
    assert r.content[0] == c.Reasoning(text="vllm thinks")


def test_upstream_response_refusal_with_stop_is_a_refusal_stop() -> None:
    r = CODEC.decode_response(completion({"content": None, "refusal": "I can't."}))
    assert r.content == [c.Refusal(text="I can't.")]
    assert r.stop_reason == "refusal"


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_use"),
        ("content_filter", "content_filter"),
        ("function_call", "tool_use"),
    ],
)
def test_upstream_response_finish_reason_maps_through_policy(finish: str, stop: str) -> None:
    assert CODEC.decode_response(completion({"content": "x"}, finish=finish)).stop_reason == stop


def test_upstream_response_usage_maps_prompt_completion_cached_and_reasoning_tokens() -> None:
    r = CODEC.decode_response(
        completion(
            {"content": "x"},
            usage={
                "prompt_tokens": 100,
                "completion_tokens": 20,
                "total_tokens": 120,
                "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 8},
            },
        )
    )
    assert r.usage == c.Usage(
        input_tokens=100, output_tokens=20, cached_tokens=64, reasoning_tokens=8
    )


def test_upstream_response_is_decoded_leniently() -> None:
    """Unknown fields, logprobs, null usage, null details, list content, missing ids."""
    body = {
        "id": "gen-1",
        "created": 1.5,
        "model": "m",
        "provider": "x",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "thinking", "thinking": []},
                        {"type": "text", "text": "b"},
                    ],
                    "tool_calls": [
                        {"function": {"name": "f", "arguments": {"x": 1}}},
                        {"type": "mystery"},
                    ],
                    "future": 1,
                },
                "logprobs": {"content": [{"token": "a", "logprob": -1}]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {
            "prompt_tokens": 1,
            "completion_tokens": 2,
            "prompt_tokens_details": None,
            "completion_tokens_details": {"reasoning_tokens": None},
        },
    }
    r = CODEC.decode_response(json.dumps(body).encode())
    assert r.content == [
        c.Text(text="ab"),
        c.ToolCall(id="call_gen-1_0", name="f", arguments='{"x":1}'),
    ]
    assert r.usage == c.Usage(input_tokens=1, output_tokens=2)
    assert r.created == 1


@pytest.mark.parametrize("raw", [b"", b"{", b"[1]", b'{"choices": 5}', b"\xff"])
def test_upstream_response_that_is_not_a_completion_is_502(raw: bytes) -> None:
    with pytest.raises(ProxyError) as ei:
        CODEC.decode_response(raw)
    assert ei.value.status == 502


def test_upstream_response_holding_only_audio_cannot_be_represented() -> None:
    with pytest.raises(ProxyError) as ei:
        CODEC.decode_response(completion({"content": None, "audio": {"id": "a", "data": "AAA"}}))
    assert ei.value.status == 502


# ===================================================================== client encode


def test_client_response_has_the_chat_completion_shape() -> None:
    out = encode(
        c.Response(
            id="msg_01X",
            model="claude",
            content=[c.Text(text="hi")],
            stop_reason="end_turn",
            created=1700000001,
        )
    )
    assert out == {
        "id": "chatcmpl-01X",
        "object": "chat.completion",
        "created": 1700000001,
        "model": "claude",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hi", "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": 0,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }


@pytest.mark.parametrize(
    ("upstream", "derived"),
    [
        ("msg_01X", "chatcmpl-01X"),
        ("resp_abc", "chatcmpl-abc"),
        ("chatcmpl-z", "chatcmpl-z"),
        ("raw", "chatcmpl-raw"),
    ],
)
def test_client_response_id_is_derived_from_the_upstream_id(upstream: str, derived: str) -> None:
    assert encode(c.Response(id=upstream, model="m", content=[]))["id"] == derived


def test_client_response_created_falls_back_to_now_and_model_to_the_request() -> None:
    before = int(time.time())
    out = encode(c.Response(id="x", model="", content=[]), req(model="asked"))
    assert before <= out["created"] <= int(time.time()) + 1
    assert out["model"] == "asked"


def test_client_response_usage_is_always_present_with_details() -> None:
    out = encode(
        c.Response(
            id="x",
            model="m",
            content=[],
            usage=c.Usage(
                input_tokens=9,
                output_tokens=4,
                cached_tokens=3,
                cache_creation_tokens=2,
                reasoning_tokens=1,
            ),
        )
    )
    assert out["usage"] == {
        "prompt_tokens": 9,
        "completion_tokens": 4,
        "total_tokens": 13,
        "prompt_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 2},
        "completion_tokens_details": {"reasoning_tokens": 1},
    }


def test_client_usage_itemises_cache_writes_only_when_there_were_some() -> None:
    out = encode(c.Response(id="x", model="m", content=[], usage=c.Usage(input_tokens=9)))
    assert out["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    usage = c.Usage(input_tokens=9, cache_creation_tokens=5)
    out = encode(c.Response(id="x", model="m", content=[], stop_reason="end_turn", usage=usage))
    sdk = ChatCompletion.model_validate(out).usage
    assert sdk is not None and sdk.prompt_tokens_details is not None
    assert sdk.prompt_tokens_details.cache_write_tokens == 5


def test_upstream_usage_cache_write_tokens_become_cache_creation_tokens() -> None:
    r = CODEC.decode_response(
        completion(
            {"content": "x"},
            usage={
                "prompt_tokens": 100,
                "completion_tokens": 20,
                "total_tokens": 120,
                "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 30},
            },
        )
    )
    assert r.usage == c.Usage(
        input_tokens=100, output_tokens=20, cached_tokens=60, cache_creation_tokens=30
    )


def test_client_refusal_stop_moves_visible_text_to_refusal_and_nulls_content() -> None:
    out = encode(
        c.Response(
            id="x",
            model="m",
            content=[c.Text(text="I can't "), c.Text(text="do that.")],
            stop_reason="refusal",
            refusal_explanation="unsafe",
        )
    )
    msg = out["choices"][0]["message"]
    assert msg["content"] is None and msg["refusal"] == "I can't do that."
    assert out["choices"][0]["finish_reason"] == "stop"


def test_client_refusal_stop_without_text_uses_the_explanation() -> None:
    out = encode(
        c.Response(
            id="x",
            model="m",
            content=[],
            stop_reason="refusal",
            refusal_explanation="unsafe request",
        )
    )
    msg = out["choices"][0]["message"]
    assert msg["content"] is None and msg["refusal"] == "unsafe request"


def test_client_refusal_parts_go_to_refusal_and_text_stays_content() -> None:
    out = encode(
        c.Response(
            id="x",
            model="m",
            content=[c.Text(text="Alternatives."), c.Refusal(text="Not that.")],
            stop_reason="refusal",
        )
    )
    msg = out["choices"][0]["message"]
    assert (msg["content"], msg["refusal"]) == ("Alternatives.", "Not that.")


def test_client_never_puts_the_same_text_in_content_and_refusal() -> None:
    out = encode(c.Response(id="x", model="m", content=[c.Text(text="No."), c.Refusal(text="No.")]))
    msg = out["choices"][0]["message"]
    assert (msg["content"], msg["refusal"]) == (None, "No.")


def test_client_reasoning_goes_to_reasoning_content_without_signatures() -> None:
    out = encode(
        c.Response(
            id="x",
            model="m",
            content=[
                c.Reasoning(text="one", signature="SIG"),
                c.Reasoning(redacted="REDACTED"),
                c.Reasoning(text="two", summary=True, encrypted_content="ENC"),
                c.Text(text="a"),
            ],
        )
    )
    msg = out["choices"][0]["message"]
    assert msg["reasoning_content"] == "one\n\ntwo"
    raw = json.dumps(out)
    assert "SIG" not in raw and "REDACTED" not in raw and "ENC" not in raw


def test_client_tool_calls_carry_ids_and_finish_reason_tool_calls() -> None:
    out = encode(
        c.Response(
            id="msg_1",
            model="m",
            content=[
                c.ToolCall(id="toolu_1", name="f", arguments='{"a":1}'),
                c.ToolCall(id="", name="p", arguments="raw", kind="custom"),
            ],
            stop_reason="end_turn",
        )
    )
    msg = out["choices"][0]["message"]
    assert msg["content"] is None
    assert msg["tool_calls"] == [
        {"type": "function", "id": "toolu_1", "function": {"name": "f", "arguments": '{"a":1}'}},
        {"type": "custom", "id": "call_1_1", "custom": {"name": "p", "input": "raw"}},
    ]
    assert out["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("max_tokens", "length"),
        ("content_filter", "content_filter"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        (None, "stop"),
    ],
)
def test_client_finish_reason_comes_from_policy(stop: c.StopReason | None, finish: str) -> None:
    assert (
        encode(c.Response(id="x", model="m", content=[c.Text(text="t")], stop_reason=stop))[
            "choices"
        ][0]["finish_reason"]
        == finish
    )


def test_client_citations_become_url_citation_annotations_with_content_offsets() -> None:
    out = encode(
        c.Response(
            id="x",
            model="m",
            content=[
                c.Text(text="Intro. "),
                c.Text(text="Cited.", citations=[c.Citation(url="https://a.test", title="A")]),
                c.Text(
                    text=" More",
                    citations=[c.Citation(url="https://b.test", start_index=1, end_index=5)],
                ),
            ],
        )
    )
    msg = out["choices"][0]["message"]
    assert msg["content"] == "Intro. Cited. More"
    assert msg["annotations"] == [
        {
            "type": "url_citation",
            "url_citation": {
                "url": "https://a.test",
                "title": "A",
                "start_index": 7,
                "end_index": 13,
            },
        },
        {
            "type": "url_citation",
            "url_citation": {
                "url": "https://b.test",
                "title": "",
                "start_index": 14,
                "end_index": 18,
            },
        },
    ]


def test_client_server_tool_parts_are_not_rendered() -> None:
    out = encode(
        c.Response(
            id="x",
            model="m",
            content=[c.ServerToolUse(id="s", name="web_search"), c.Text(text="t")],
        )
    )
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "t", "refusal": None}


def test_client_response_decodes_back_to_the_same_canonical_response() -> None:
    original = c.Response(
        id="chatcmpl-r",
        model="m",
        created=5,
        content=[
            c.Reasoning(text="why"),
            c.Text(
                text="answer",
                citations=[c.Citation(url="https://u.test", title="U", start_index=0, end_index=6)],
            ),
            c.Refusal(text="partly no"),
            c.ToolCall(id="call_1", name="f", arguments="{}"),
            c.ToolCall(id="call_2", name="p", arguments="x", kind="custom"),
        ],
        stop_reason="tool_use",
        usage=c.Usage(input_tokens=3, output_tokens=2, cached_tokens=1, reasoning_tokens=1),
    )
    back = CODEC.decode_response(CODEC.encode_response(original, req()))
    assert back == original
