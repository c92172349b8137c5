"""Non-streamed answers: upstream Message JSON -> canonical, canonical -> client Message."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.types import Message

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry
from proxai_asgi.errors import ProxyError
from proxai_asgi.protocols._kit import search_results as sr
from proxai_asgi.protocols.anthropic_messages import CODEC
from tests.helpers import captures as cap

from ._util import req

JSON_CAPTURES = [n for n in cap.capture_names("anthropic_json_")]


def _msg(**kw: Any) -> bytes:
    out: dict[str, Any] = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    out.update(kw)
    return json.dumps(out).encode()


def _encode(r: c.Response, request: c.Request | None = None) -> dict[str, Any]:
    raw = CODEC.encode_response(r, request or req())
    Message.model_validate_json(raw)  # the SDK's own type accepts it
    out: dict[str, Any] = json.loads(raw)
    return out


# ------------------------------------------------------------------ decode


def test_capture_text_basic_decodes() -> None:
    r = CODEC.decode_response(cap.response_body("anthropic_json_text_basic"))
    assert r.id == "msg_01EXuhhFC9buDpjCcznFPSDs"
    assert r.model == "claude-sonnet-4-20250514"
    assert r.content == [c.Text(text="4200 + 42 = 4242")]
    assert r.stop_reason == "end_turn"
    assert r.usage == c.Usage(input_tokens=17, output_tokens=15)


def test_capture_max_tokens_decodes_to_max_tokens() -> None:
    r = CODEC.decode_response(cap.response_body("anthropic_json_max_tokens"))
    assert r.stop_reason == "max_tokens"
    assert isinstance(r.content[0], c.Text) and r.content[0].text.endswith("9")
    assert r.usage.output_tokens == 50


def test_capture_parallel_tool_use_decodes_to_two_tool_calls() -> None:
    r = CODEC.decode_response(cap.response_body("anthropic_json_parallel_tool_use"))
    assert r.content == [
        c.Text(text="I'll retrieve the secrets for both passwords you provided."),
        c.ToolCall(
            id="toolu_01BUvqBj8Yb34pNAbCJJY1oc",
            name="secret_retrieval_tool",
            arguments='{"password":"mellon"}',
        ),
        c.ToolCall(
            id="toolu_01VPuQJ1LonDBYXrr8pqPkqQ",
            name="secret_retrieval_tool",
            arguments='{"password":"radiance"}',
        ),
    ]
    assert r.stop_reason == "tool_use"
    assert r.usage == c.Usage(input_tokens=416, output_tokens=109)


def test_capture_redacted_thinking_decodes_to_redacted_reasoning() -> None:
    r = CODEC.decode_response(cap.response_body("anthropic_json_redacted_thinking"))
    assert isinstance(r.content[0], c.Reasoning)
    assert r.content[0].redacted is not None and r.content[0].redacted.startswith("EvgFCkYIBx")
    assert isinstance(r.content[1], c.Text) and r.content[1].text.startswith("I notice")
    assert r.usage == c.Usage(input_tokens=92, output_tokens=196)


def test_usage_input_counts_cache_reads_and_writes_in_canonical_semantics() -> None:
    r = CODEC.decode_response(cap.response_body("anthropic_json_cache_read"))
    assert r.usage == c.Usage(input_tokens=12 + 4167, output_tokens=350, cached_tokens=4167)
    r = CODEC.decode_response(
        _msg(
            usage={
                "input_tokens": 3,
                "output_tokens": 1,
                "cache_creation_input_tokens": 100,
                "cache_read_input_tokens": None,
            }
        )
    )
    assert r.usage == c.Usage(input_tokens=103, output_tokens=1, cache_creation_tokens=100)


def test_thinking_keeps_signature_or_unpacks_a_carried_openai_token() -> None:
    sig = reasoning_carry.pack_tokens(c.Reasoning(encrypted_content="gAAA", item_id="rs_9"))
    r = CODEC.decode_response(
        _msg(
            content=[
                {"type": "thinking", "thinking": "a", "signature": "EvMC"},
                {"type": "thinking", "thinking": "b", "signature": sig},
            ]
        )
    )
    assert r.content == [
        c.Reasoning(text="a", signature="EvMC"),
        c.Reasoning(text="b", encrypted_content="gAAA", item_id="rs_9"),
    ]


def test_url_citations_and_server_tool_blocks_decode() -> None:
    r = CODEC.decode_response(
        _msg(
            content=[
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {"query": "q"},
                },
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [1]},
                {
                    "type": "text",
                    "text": "Paris.",
                    "citations": [
                        {
                            "type": "web_search_result_location",
                            "url": "https://fr.x",
                            "title": "FR",
                            "cited_text": "capital",
                            "encrypted_index": "e",
                        },
                        {
                            "type": "char_location",
                            "cited_text": "c",
                            "document_index": 0,
                            "start_char_index": 0,
                            "end_char_index": 1,
                        },
                    ],
                },
            ]
        )
    )
    # A result entry that is no web_search_result names no page; a cited text that is
    # not in the block (the page's quote) cites the whole block.
    cite = c.Citation(
        url="https://fr.x", title="FR", cited_text="capital", start_index=0, end_index=6
    )
    assert r.content == [
        c.ServerToolUse(
            id="srvtoolu_1", name="web_search", input={"query": "q"}, result=[1], hits=[]
        ),
        c.Text(text="Paris.", citations=[cite]),
    ]


def test_unknown_blocks_are_skipped_and_unknown_fields_ignored() -> None:
    r = CODEC.decode_response(
        _msg(
            content=[
                {"type": "mcp_tool_use", "id": "m", "name": "n", "server_name": "s", "input": {}},
                {"type": "text", "text": "hi", "future": True},
            ],
            container=None,
            brand_new={"x": 1},
        )
    )
    assert r.content == [c.Text(text="hi")]


def test_refusal_stop_details_explanation_is_kept() -> None:
    r = CODEC.decode_response(
        _msg(
            stop_reason="refusal",
            stop_details={"type": "refusal", "category": "cyber", "explanation": "unsafe"},
        )
    )
    assert r.stop_reason == "refusal"
    assert r.refusal_explanation == "unsafe"


def test_stop_reasons_go_through_the_policy() -> None:
    r = CODEC.decode_response(_msg(stop_reason="model_context_window_exceeded"))
    assert r.stop_reason == "max_tokens"
    r = CODEC.decode_response(_msg(stop_reason="stop_sequence", stop_sequence="END"))
    assert (r.stop_reason, r.stop_sequence) == ("stop_sequence", "END")


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[]",
        b'{"type":"message"}',
        _msg(content=[{"type": "text"}]),
        _msg(content=[{"type": "tool_use", "id": "t", "name": "f", "input": "str"}]),
        _msg(content=[{"no_type": 1}]),
    ],
)
def test_unrepresentable_upstream_bodies_are_502(raw: bytes) -> None:
    with pytest.raises(ProxyError) as info:
        CODEC.decode_response(raw)
    assert info.value.status == 502
    assert info.value.kind == "bad_gateway"


@pytest.mark.parametrize("name", JSON_CAPTURES)
def test_decode_encode_decode_of_captures_is_stable(name: str) -> None:
    first = CODEC.decode_response(cap.response_body(name))
    again = CODEC.decode_response(CODEC.encode_response(first, req()))
    assert again == first


# ------------------------------------------------------------------ encode


def test_client_message_ids_are_derived_and_the_shape_is_the_apis() -> None:
    out = _encode(
        c.Response(
            id="chatcmpl-abc", model="gpt-x", content=[c.Text(text="hi")], stop_reason="end_turn"
        )
    )
    assert out == {
        "id": "msg_abc",
        "type": "message",
        "role": "assistant",
        "model": "gpt-x",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "stop_details": None,
        "usage": {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def test_model_falls_back_to_the_request_model() -> None:
    out = _encode(c.Response(id="x", model="", content=[]), req(model="claude-asked"))
    assert out["model"] == "claude-asked"


def test_usage_subtracts_cache_figures_from_input() -> None:
    u = c.Usage(input_tokens=100, output_tokens=7, cached_tokens=60, cache_creation_tokens=30)
    out = _encode(c.Response(id="x", model="m", content=[], usage=u))
    assert out["usage"] == {
        "input_tokens": 10,
        "output_tokens": 7,
        "cache_creation_input_tokens": 30,
        "cache_read_input_tokens": 60,
        "cache_creation": {"ephemeral_5m_input_tokens": 30, "ephemeral_1h_input_tokens": 0},
    }
    u = c.Usage(input_tokens=5, cached_tokens=60)
    assert _encode(c.Response(id="x", model="m", content=[], usage=u))["usage"]["input_tokens"] == 0


def test_never_an_empty_text_block() -> None:
    out = _encode(
        c.Response(
            id="x", model="m", content=[c.Text(text=""), c.Refusal(text=""), c.Text(text="a")]
        )
    )
    assert out["content"] == [{"type": "text", "text": "a"}]


def test_tool_calls_become_tool_use_and_end_turn_becomes_tool_use() -> None:
    out = _encode(
        c.Response(
            id="chatcmpl-1",
            model="m",
            content=[
                c.ToolCall(id="call_a.b", name="f", arguments='{"x": 1}'),
                c.ToolCall(id="", name="g", arguments=""),
            ],
            stop_reason="end_turn",
        )
    )
    assert out["content"] == [
        {"type": "tool_use", "id": "call_a_b", "name": "f", "input": {"x": 1}},
        {"type": "tool_use", "id": "toolu_1_1", "name": "g", "input": {}},
    ]
    assert out["stop_reason"] == "tool_use"


def test_max_tokens_with_tool_calls_stays_max_tokens() -> None:
    out = _encode(
        c.Response(
            id="x",
            model="m",
            content=[c.ToolCall(id="t", name="f", arguments="{}")],
            stop_reason="max_tokens",
        )
    )
    assert out["stop_reason"] == "max_tokens"


@pytest.mark.parametrize("arguments", ['{"x": ', "[1]"])
def test_invalid_upstream_tool_arguments_are_502_never_empty_input(arguments: str) -> None:
    r = c.Response(id="x", model="m", content=[c.ToolCall(id="t", name="f", arguments=arguments)])
    with pytest.raises(ProxyError) as info:
        CODEC.encode_response(r, req())
    assert info.value.status == 502


def test_custom_tool_calls_carry_their_raw_input_in_an_object() -> None:
    r = c.Response(
        id="x",
        model="m",
        content=[c.ToolCall(id="t", name="p", arguments="*** Begin", kind="custom")],
    )
    assert _encode(r)["content"][0]["input"] == {"input": "*** Begin"}


def test_reasoning_becomes_thinking_with_the_signature_a_client_can_replay() -> None:
    out = _encode(
        c.Response(
            id="x",
            model="m",
            content=[
                c.Reasoning(text="a", signature="EvMC"),
                c.Reasoning(text="b", encrypted_content="gAAA", item_id="rs_1"),
                c.Reasoning(text="c"),
                c.Reasoning(redacted="EvgF"),
            ],
        )
    )
    packed = reasoning_carry.pack_tokens(c.Reasoning(encrypted_content="gAAA", item_id="rs_1"))
    assert out["content"] == [
        {"type": "thinking", "thinking": "a", "signature": "EvMC"},
        {"type": "thinking", "thinking": "b", "signature": packed},
        {"type": "thinking", "thinking": "c", "signature": ""},
        {"type": "redacted_thinking", "data": "EvgF"},
    ]


def test_a_search_becomes_a_server_tool_use_and_its_result_block_and_is_counted() -> None:
    hit = c.SearchHit(url="https://p", title="P")
    search = c.ServerToolUse(id="s", name="web_search", input={"query": "q"}, hits=[hit])
    fetch = c.ServerToolUse(id="f", name="web_fetch")  # no counterpart here: left out
    out = _encode(c.Response(id="x", model="m", content=[search, fetch, c.Text(text="t")]))
    call, result, text = out["content"]
    assert call == {
        "type": "server_tool_use",
        "id": "srvtoolu_s",
        "name": "web_search",
        "input": {"query": "q"},
    }
    assert result["tool_use_id"] == "srvtoolu_s"
    [page] = result["content"]
    assert page["url"] == "https://p" and page["title"] == "P"
    assert sr.hit_from_placeholder(page["encrypted_content"]) == hit  # replayable
    assert text == {"type": "text", "text": "t"}
    assert out["usage"]["server_tool_use"]["web_search_requests"] == 1


def test_a_failed_search_is_a_web_search_tool_result_error() -> None:
    search = c.ServerToolUse(id="s", name="web_search", input={"query": "q"}, error="unavailable")
    out = _encode(c.Response(id="x", model="m", content=[search]))
    assert out["content"][1]["content"] == {
        "type": "web_search_tool_result_error",
        "error_code": "unavailable",
    }


def test_citations_become_web_search_result_locations() -> None:
    cite = c.Citation(url="https://u", title="T", cited_text="q")
    spanned = c.Citation(url="https://v", start_index=2, end_index=5)
    text = c.Text(text="a bcd e", citations=[cite, spanned])
    out = _encode(c.Response(id="x", model="m", content=[text]))
    first, second = out["content"][0]["citations"]
    assert first["encrypted_index"].startswith(sr.INDEX_PREFIX)
    assert {**first, "encrypted_index": ""} == {
        "type": "web_search_result_location",
        "cited_text": "q",
        "url": "https://u",
        "title": "T",
        "encrypted_index": "",
    }
    # A span without a quote cites the text it covers; a title-less page is named by URL.
    assert (second["cited_text"], second["title"]) == ("bcd", "https://v")


def test_refusal_text_is_a_text_block_with_stop_reason_refusal_and_explanation() -> None:
    out = _encode(
        c.Response(
            id="x", model="m", content=[c.Refusal(text="I can't help.")], stop_reason="end_turn"
        )
    )
    assert out["content"] == [{"type": "text", "text": "I can't help."}]
    assert out["stop_reason"] == "refusal"
    assert out["stop_details"] == {
        "type": "refusal",
        "category": None,
        "explanation": "I can't help.",
    }


def test_refusal_explanation_without_text_becomes_the_visible_text() -> None:
    out = _encode(
        c.Response(
            id="x", model="m", content=[], stop_reason="refusal", refusal_explanation="Policy."
        )
    )
    assert out["content"] == [{"type": "text", "text": "Policy."}]
    assert out["stop_details"]["explanation"] == "Policy."
    out = _encode(
        c.Response(
            id="x",
            model="m",
            content=[c.Text(text="visible")],
            stop_reason="content_filter",
            refusal_explanation="Policy.",
        )
    )
    assert out["content"] == [{"type": "text", "text": "visible"}]
    assert out["stop_reason"] == "refusal"
