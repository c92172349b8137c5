"""Responses JSON answers: upstream -> canonical, canonical -> client."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry
from proxai_asgi.errors import ProxyError
from proxai_asgi.protocols.openai_responses import CODEC

from ._util import client_json, req, response


def up(*output: dict[str, Any], **kw: Any) -> bytes:
    body: dict[str, Any] = {
        "id": "resp_up1",
        "object": "response",
        "created_at": 1700000001,
        "status": "completed",
        "model": "gpt-up",
        "output": list(output),
        "usage": {
            "input_tokens": 20,
            "input_tokens_details": {"cached_tokens": 4},
            "output_tokens": 7,
            "output_tokens_details": {"reasoning_tokens": 3},
            "total_tokens": 27,
        },
    }
    body.update(kw)
    return json.dumps(body).encode()


def msg(*parts: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": list(parts),
    }


def out_text(text: str, **kw: Any) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], **kw}


# =============================================================== upstream -> canonical


def test_upstream_response_keeps_id_model_created_and_usage() -> None:
    r = CODEC.decode_response(up(msg(out_text("hi"))))
    assert (r.id, r.model, r.created) == ("resp_up1", "gpt-up", 1700000001)
    assert r.usage == c.Usage(input_tokens=20, output_tokens=7, cached_tokens=4, reasoning_tokens=3)
    assert r.content == [c.Text(text="hi")] and r.stop_reason == "end_turn"


def test_output_text_and_refusal_parts_stay_separate_and_in_order() -> None:
    r = CODEC.decode_response(
        up(
            msg(
                out_text("I can help with safe alternatives."),
                {"type": "refusal", "refusal": "No."},
            )
        )
    )
    assert r.content == [c.Text(text="I can help with safe alternatives."), c.Refusal(text="No.")]
    assert r.stop_reason == "refusal"


def test_url_citation_annotations_become_citations() -> None:
    ann = {
        "type": "url_citation",
        "url": "https://x",
        "title": "X",
        "start_index": 0,
        "end_index": 2,
    }
    other = {"type": "file_citation", "file_id": "f", "filename": "a", "index": 0}
    r = CODEC.decode_response(up(msg(out_text("hi", annotations=[ann, other]))))
    assert r.content == [
        c.Text(
            text="hi",
            citations=[c.Citation(url="https://x", title="X", start_index=0, end_index=2)],
        )
    ]


def test_reasoning_items_become_reasoning_parts() -> None:
    r = CODEC.decode_response(
        up(
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [
                    {"type": "summary_text", "text": "a"},
                    {"type": "summary_text", "text": "b"},
                ],
                "encrypted_content": "enc",
            },
            {
                "type": "reasoning",
                "id": "rs_2",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "raw"}],
            },
            {
                "type": "reasoning",
                "id": "rs_3",
                "summary": [],
                "encrypted_content": reasoning_carry.pack_tokens(c.Reasoning(signature="sig")),
            },
            {
                "type": "reasoning",
                "id": "rs_4",
                "summary": [],
                "encrypted_content": reasoning_carry.pack_tokens(c.Reasoning(redacted="r")),
            },
        )
    )
    assert r.content == [
        c.Reasoning(text="a\n\nb", summary=True, encrypted_content="enc", item_id="rs_1"),
        c.Reasoning(text="raw", summary=False, item_id="rs_2"),
        c.Reasoning(summary=True, signature="sig", item_id="rs_3"),
        c.Reasoning(redacted="r"),
    ]


def test_function_and_custom_tool_calls_become_tool_calls_and_stop_for_tool_use() -> None:
    r = CODEC.decode_response(
        up(
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "f",
                "arguments": "{}",
                "status": "completed",
            },
            {
                "type": "custom_tool_call",
                "id": "ctc_1",
                "call_id": "call_2",
                "name": "p",
                "input": "raw",
            },
        )
    )
    assert r.content == [
        c.ToolCall(id="call_1", name="f", arguments="{}", item_id="fc_1"),
        c.ToolCall(id="call_2", name="p", arguments="raw", kind="custom", item_id="ctc_1"),
    ]
    assert r.stop_reason == "tool_use"


def test_web_search_call_becomes_a_server_tool_use_part() -> None:
    r = CODEC.decode_response(
        up(
            {
                "type": "web_search_call",
                "id": "ws_1",
                "status": "completed",
                "action": {
                    "type": "search",
                    "query": "q",
                    "sources": [{"type": "url", "url": "https://p"}],
                },
            },
            {"type": "web_search_call", "id": "ws_2", "status": "failed", "action": {}},
        )
    )
    action = {"type": "search", "query": "q", "sources": [{"type": "url", "url": "https://p"}]}
    assert r.content == [
        c.ServerToolUse(
            id="ws_1",
            name="web_search",
            input={"query": "q"},
            result=action,
            hits=[c.SearchHit(url="https://p")],
        ),
        c.ServerToolUse(id="ws_2", name="web_search", error="unavailable"),
    ]
    assert r.usage.server_tool_requests == 2


def test_unknown_output_items_and_parts_are_skipped() -> None:
    r = CODEC.decode_response(
        up(
            {"type": "image_generation_call", "id": "ig_1", "result": 5},
            msg({"type": "output_audio", "data": "x"}, out_text("kept")),
            {"type": "future_item", "weird": [1, 2]},
        )
    )
    assert r.content == [c.Text(text="kept")]


@pytest.mark.parametrize(
    ("status", "reason", "stop"),
    [
        ("completed", None, "end_turn"),
        ("incomplete", "max_output_tokens", "max_tokens"),
        ("incomplete", "content_filter", "content_filter"),
        ("failed", None, "refusal"),
    ],
)
def test_responses_status_maps_to_the_canonical_stop_reason(
    status: str, reason: str | None, stop: str | None
) -> None:
    details = {"reason": reason} if reason else None
    r = CODEC.decode_response(up(msg(out_text("x")), status=status, incomplete_details=details))
    assert r.stop_reason == stop


@pytest.mark.parametrize("status", ["cancelled", "queued", "in_progress"])
def test_an_unfinished_response_is_a_502_not_an_answer_without_a_stop(status: str) -> None:
    with pytest.raises(ProxyError) as info:
        CODEC.decode_response(up(msg(out_text("x")), status=status))
    assert info.value.status == 502


def test_a_failed_response_with_an_error_raises_with_the_upstream_message() -> None:
    with pytest.raises(ProxyError) as exc:
        CODEC.decode_response(
            up(status="failed", error={"code": "server_error", "message": "boom"})
        )
    assert exc.value.message == "boom" and exc.value.status == 500


def test_a_failed_response_with_invalid_prompt_is_a_refusal_explained_by_its_message() -> None:
    """A prompt the model will not answer (RS-15 as this proxy writes it, and OpenAI's
    policy checks): a refusal, not an upstream error."""
    r = CODEC.decode_response(
        up(status="failed", error={"code": "invalid_prompt", "message": "unsafe"})
    )
    assert (r.stop_reason, r.refusal_explanation) == ("refusal", "unsafe")


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"output": 5}',
        b'{"output": [{"type": "function_call", "call_id": 5}]}',
        b'{"output": [{"type": "function_call"}]}',
    ],
)
def test_an_unrepresentable_upstream_body_is_a_502(body: bytes) -> None:
    with pytest.raises(ProxyError) as exc:
        CODEC.decode_response(body)
    assert exc.value.status == 502 and exc.value.kind == "bad_gateway"


def test_missing_optional_fields_are_defaulted() -> None:
    r = CODEC.decode_response(b'{"id": "resp_1", "status": "completed"}')
    assert r.content == [] and r.usage == c.Usage() and r.stop_reason == "end_turn"


# =============================================================== canonical -> client


def test_client_response_ids_derive_from_the_upstream_id() -> None:
    body = client_json(response(c.Text(text="hi"), id="msg_01ABC"))
    assert body["id"] == "resp_01ABC"
    assert body["output"][0]["id"] == "msg_01ABC_0"
    assert body["object"] == "response" and body["created_at"] == 1700000000


def test_text_and_refusal_parts_share_one_message_item_in_order() -> None:
    body = client_json(response(c.Text(text="safe"), c.Refusal(text="no"), stop_reason="end_turn"))
    assert len(body["output"]) == 1
    assert body["output"][0]["content"] == [
        {"type": "output_text", "text": "safe", "annotations": [], "logprobs": []},
        {"type": "refusal", "refusal": "no"},
    ]


def test_tool_calls_are_sibling_items_after_the_message_never_inside_its_content() -> None:
    body = client_json(
        response(
            c.Text(text="Looking up"),
            c.ToolCall(id="call_a", name="w", arguments='{"c":1}'),
            c.ToolCall(id="toolu_b", name="t", arguments="{}", item_id="toolu_b"),
            stop_reason="tool_use",
        )
    )
    assert [i["type"] for i in body["output"]] == ["message", "function_call", "function_call"]
    assert all(p["type"] == "output_text" for p in body["output"][0]["content"])
    assert body["output"][1] == {
        "type": "function_call",
        "id": "fc_abc123_1",
        "call_id": "call_a",
        "name": "w",
        "arguments": '{"c":1}',
        "status": "completed",
    }
    assert body["output"][2]["id"] == "fc_abc123_2"
    assert body["status"] == "completed"


def test_a_tool_only_answer_has_only_tool_call_items() -> None:
    body = client_json(response(c.ToolCall(id="a", name="f", arguments="{}", item_id="fc_up")))
    assert [i["type"] for i in body["output"]] == ["function_call"]
    assert body["output"][0]["id"] == "fc_up"


def test_custom_tool_calls_become_custom_tool_call_items() -> None:
    body = client_json(
        response(c.ToolCall(id="a", name="apply_patch", arguments="*** p", kind="custom"))
    )
    assert body["output"] == [
        {
            "type": "custom_tool_call",
            "id": "ctc_abc123_0",
            "call_id": "a",
            "name": "apply_patch",
            "input": "*** p",
        }
    ]


def test_reasoning_parts_become_reasoning_items_carrying_their_tokens() -> None:
    body = client_json(
        response(
            c.Reasoning(text="sum", summary=True, encrypted_content="enc", item_id="rs_own"),
            c.Reasoning(text="raw thinking", signature="sig"),
            c.Reasoning(redacted="blob"),
        )
    )
    own, signed, redacted = body["output"]
    assert own == {
        "type": "reasoning",
        "id": "rs_own",
        "summary": [{"type": "summary_text", "text": "sum"}],
        "encrypted_content": "enc",
    }
    assert signed["id"] == "rs_abc123_1" and signed["summary"] == []
    assert signed["content"] == [{"type": "reasoning_text", "text": "raw thinking"}]
    assert reasoning_carry.unpack(signed["encrypted_content"]) == {
        "signature": "sig",
        "t": "raw thinking",  # the text it signs rides along (issue 17 defect 6)
    }
    assert reasoning_carry.unpack(redacted["encrypted_content"]) == {
        "redacted": "blob",
    }


def test_citations_become_url_citation_annotations() -> None:
    body = client_json(
        response(
            c.Text(
                text="hi",
                citations=[c.Citation(url="https://x", title="X", start_index=0, end_index=2)],
            )
        )
    )
    assert body["output"][0]["content"][0]["annotations"] == [
        {"type": "url_citation", "url": "https://x", "title": "X", "start_index": 0, "end_index": 2}
    ]


def test_citations_without_offsets_span_the_whole_text_part() -> None:
    """Anthropic citations carry no offsets: they cover the whole part (as in Chat),
    after the citations that have their own."""
    body = client_json(
        response(
            c.Text(
                text="cited text",
                citations=[
                    c.Citation(url="https://a", title="A"),
                    c.Citation(url="https://b", title="B", start_index=0, end_index=5),
                ],
            )
        )
    )
    assert [
        (a["url"], a["start_index"], a["end_index"])
        for a in body["output"][0]["content"][0]["annotations"]
    ] == [("https://b", 0, 5), ("https://a", 0, 10)]


def test_a_refusal_with_only_an_explanation_becomes_a_refusal_message_item() -> None:
    body = client_json(response(stop_reason="refusal", refusal_explanation="Declined by policy."))
    assert body["status"] == "failed"
    assert body["output"] == [
        {
            "type": "message",
            "id": "msg_abc123_0",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "refusal", "refusal": "Declined by policy."}],
        }
    ]


def test_a_refusal_explanation_is_not_added_when_the_answer_already_shows_something() -> None:
    for part in (c.Text(text="I can't help."), c.Refusal(text="No.")):
        body = client_json(
            response(part, stop_reason="refusal", refusal_explanation="Declined by policy.")
        )
        assert len(body["output"]) == 1
        assert "Declined" not in json.dumps(body["output"])
    body = client_json(response(stop_reason="end_turn", refusal_explanation="x"))
    assert body["output"] == []


def test_an_empty_text_part_is_a_message_item_with_an_empty_output_text_part() -> None:
    """As streamed: the stream opens a text block's message item at the block's start,
    before it knows whether text follows, so an empty text is an item here too."""
    body = client_json(response(c.Text(text=""), c.ToolCall(id="a", name="f", arguments="{}")))
    assert [i["type"] for i in body["output"]] == ["message", "function_call"]
    assert body["output"][0]["content"] == [
        {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    ]


def test_a_search_is_a_web_search_call_item_and_other_server_tools_are_left_out() -> None:
    search = c.ServerToolUse(
        id="s", name="web_search", input={"query": "q"}, hits=[c.SearchHit(url="https://p")]
    )
    fetch = c.ServerToolUse(id="f", name="web_fetch")
    body = client_json(response(search, fetch, c.Text(text="x")))
    assert [i["type"] for i in body["output"]] == ["web_search_call", "message"]
    item = body["output"][0]
    assert item["status"] == "completed" and item["id"].startswith("ws_")
    assert item["action"] == {
        "type": "search",
        "query": "q",
        "sources": [{"type": "url", "url": "https://p"}],
    }


@pytest.mark.parametrize(
    ("stop", "status", "reason"),
    [
        ("end_turn", "completed", None),
        ("stop_sequence", "completed", None),
        ("tool_use", "completed", None),
        ("pause_turn", "completed", None),
        ("max_tokens", "incomplete", "max_output_tokens"),
        ("content_filter", "incomplete", "content_filter"),
        ("refusal", "failed", None),
        (None, "completed", None),
    ],
)
def test_stop_reason_maps_to_the_responses_status(
    stop: c.StopReason | None, status: str, reason: str | None
) -> None:
    body = client_json(response(c.Text(text="x"), stop_reason=stop))
    assert body["status"] == status
    assert body["incomplete_details"] == ({"reason": reason} if reason else None)
    # RS-15's failed refusal says why (issue 17): the refusal's words, a code not retried.
    refused = {"code": "invalid_prompt", "message": "x"}
    assert body["error"] == (refused if stop == "refusal" else None)


def test_a_truncated_answer_has_completed_items_and_says_so_in_the_response_status() -> None:
    """Every item is done with its block (a stream sends a text's ``output_item.done`` at
    the block's stop, before the stop reason is known), so the items are ``completed``
    both ways; the truncation is the response's ``incomplete`` status and details."""
    body = client_json(
        response(
            c.Text(text="a"),
            c.ToolCall(id="x", name="f"),
            c.Text(text="b"),
            stop_reason="max_tokens",
        )
    )
    assert [i.get("status") for i in body["output"]] == ["completed", "completed", "completed"]
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}


def test_usage_carries_cached_and_reasoning_token_details() -> None:
    body = client_json(
        response(
            c.Text(text="x"),
            usage=c.Usage(
                input_tokens=100,
                output_tokens=20,
                cached_tokens=60,
                cache_creation_tokens=10,
                reasoning_tokens=5,
            ),
        )
    )
    assert body["usage"] == {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 10},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 5},
        "total_tokens": 120,
    }


def test_request_settings_are_echoed_in_the_response_object() -> None:
    request = req(
        model="asked-model",
        max_tokens=99,
        temperature=0.3,
        top_p=0.7,
        parallel_tool_calls=False,
        tool_choice=c.ToolChoice(mode="tool", name="f"),
        response_format=c.ResponseFormat(
            type="json_schema", name="S", schema={"type": "object"}, strict=True
        ),
        reasoning=c.ReasoningConfig(effort="low", summary="auto"),
        metadata={"k": "v"},
        previous_response_id="resp_prev",
    )
    body = client_json(response(c.Text(text="{}"), model=""), request)
    assert body["model"] == "asked-model"
    assert body["max_output_tokens"] == 99 and body["temperature"] == 0.3 and body["top_p"] == 0.7
    assert body["parallel_tool_calls"] is False
    assert body["tool_choice"] == {"type": "function", "name": "f"}
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "S", "schema": {"type": "object"}, "strict": True}
    }
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["metadata"] == {"k": "v"} and body["previous_response_id"] == "resp_prev"
    assert body["tools"] == [] and body["instructions"] is None


def test_client_encode_then_upstream_decode_gives_back_the_same_answer() -> None:
    original = response(
        c.Reasoning(text="s", summary=True, encrypted_content="enc", item_id="rs_1"),
        c.Text(
            text="hi",
            citations=[c.Citation(url="https://x", title="X", start_index=0, end_index=2)],
        ),
        c.Refusal(text="no"),
        c.ToolCall(id="call_1", name="f", arguments="{}", item_id="fc_1"),
        c.ToolCall(id="call_2", name="p", arguments="raw", kind="custom", item_id="ctc_2"),
        stop_reason="tool_use",
        usage=c.Usage(input_tokens=9, output_tokens=4, cached_tokens=1, reasoning_tokens=2),
        id="resp_abc123",
    )
    again = CODEC.decode_response(CODEC.encode_response(original, req()))
    assert again.content == original.content
    assert again.usage == original.usage and again.id == original.id
    # A refusal part marks the turn as a refusal when it comes back.
    assert again.stop_reason == "refusal"


@pytest.mark.parametrize(
    ("stop", "back"),
    [
        ("end_turn", "end_turn"),
        ("max_tokens", "max_tokens"),
        ("refusal", "refusal"),
        ("stop_sequence", "end_turn"),
        ("pause_turn", "end_turn"),
    ],
)
def test_primary_terminal_states_round_trip_through_the_responses_status(
    stop: c.StopReason, back: c.StopReason
) -> None:
    again = CODEC.decode_response(
        CODEC.encode_response(response(c.Text(text="x"), stop_reason=stop), req())
    )
    assert again.stop_reason == back
