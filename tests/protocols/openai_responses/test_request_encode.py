"""Canonical request -> the Responses body we send upstream."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.responses import response_create_params

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.openai_responses import CODEC
from tests.helpers.schemas import plain_tools

from ._util import decode_req, encode_req, req
from .test_request_decode import CODEX_REQUEST

_CREATE_FIELDS = set(response_create_params.ResponseCreateParamsBase.__annotations__) | {"stream"}


def user(*parts: c.Part) -> c.Message:
    return c.Message(role="user", content=list(parts))


def assistant(*parts: c.Part) -> c.Message:
    return c.Message(role="assistant", content=list(parts))


def tool(*parts: c.Part) -> c.Message:
    return c.Message(role="tool", content=list(parts))


def test_the_upstream_body_contains_only_fields_the_responses_api_accepts() -> None:
    creq, _ = decode_req(CODEX_REQUEST)
    body, _ = encode_req(creq)
    assert set(body) <= _CREATE_FIELDS, set(body) - _CREATE_FIELDS


def test_system_becomes_instructions_joined_by_blank_lines() -> None:
    body, _ = encode_req(req(system=[c.Text(text="A"), c.Text(text="B")]))
    assert body["instructions"] == "A\n\nB"
    assert "instructions" not in encode_req(req())[0]


def test_translation_is_stateless_so_store_is_always_false() -> None:
    body, _ = encode_req(req())
    assert body["store"] is False


def test_user_and_assistant_turns_become_message_items_with_typed_parts() -> None:
    body, _ = encode_req(
        req(
            messages=[
                user(c.Text(text="q")),
                assistant(c.Text(text="a"), c.Refusal(text="no")),
            ]
        )
    )
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "a", "annotations": []},
                {"type": "refusal", "refusal": "no"},
            ],
        },
    ]


def test_images_and_files_become_input_image_and_input_file_parts() -> None:
    body, _ = encode_req(
        req(
            messages=[
                user(
                    c.Image(data="AAAA", media_type="image/jpeg"),
                    c.Image(url="https://x/a.png", detail="high"),
                    c.File(data="JVBER", media_type="application/pdf"),
                    c.File(url="https://x/b.pdf"),
                    c.File(file_id="file-1"),
                    c.File(text="plain document"),
                )
            ]
        )
    )
    assert body["input"][0]["content"] == [
        {"type": "input_image", "image_url": "data:image/jpeg;base64,AAAA", "detail": "auto"},
        {"type": "input_image", "image_url": "https://x/a.png", "detail": "high"},
        {
            "type": "input_file",
            "file_data": "data:application/pdf;base64,JVBER",
            "filename": "document.pdf",
        },
        {"type": "input_file", "file_url": "https://x/b.pdf"},
        {"type": "input_file", "file_id": "file-1"},
        {"type": "input_text", "text": "plain document"},
    ]


def test_tool_calls_become_function_call_items_with_an_id_only_when_it_is_fc_prefixed() -> None:
    body, _ = encode_req(
        req(
            messages=[
                user(c.Text(text="q")),
                assistant(
                    c.Text(text="calling"),
                    c.ToolCall(id="call_1", name="f", arguments='{"a":1}', item_id="fc_1"),
                    c.ToolCall(id="toolu_2", name="g", arguments="", item_id="toolu_2"),
                ),
            ]
        )
    )
    assert body["input"][1:] == [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "calling", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "f",
            "arguments": '{"a":1}',
            "id": "fc_1",
        },
        {"type": "function_call", "call_id": "toolu_2", "name": "g", "arguments": "{}"},
    ]


def test_custom_tool_calls_and_results_become_custom_tool_call_items() -> None:
    body, _ = encode_req(
        req(
            messages=[
                assistant(
                    c.ToolCall(id="c1", name="apply_patch", arguments="*** x", kind="custom")
                ),
                tool(c.ToolResult(call_id="c1", content=[c.Text(text="Done")], kind="custom")),
            ]
        )
    )
    assert body["input"] == [
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** x"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"},
    ]


def test_tool_results_become_function_call_output_items_in_order() -> None:
    body, _ = encode_req(
        req(
            messages=[
                tool(
                    c.ToolResult(call_id="a", content=[c.Text(text="l1"), c.Text(text="l2")]),
                    c.ToolResult(
                        call_id="b",
                        content=[c.Text(text="see"), c.Image(url="https://x/i.png")],
                    ),
                    c.ToolResult(call_id="c", content=[]),
                )
            ]
        )
    )
    assert body["input"] == [
        {"type": "function_call_output", "call_id": "a", "output": "l1\nl2", "status": "completed"},
        {
            "type": "function_call_output",
            "call_id": "b",
            "output": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "https://x/i.png", "detail": "auto"},
            ],
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "c", "output": "", "status": "completed"},
    ]


def test_tool_result_is_error_is_not_mapped_to_incomplete_and_its_text_survives() -> None:
    body, report = encode_req(
        req(
            messages=[tool(c.ToolResult(call_id="a", content=[c.Text(text="boom")], is_error=True))]
        )
    )
    item = body["input"][0]
    assert item["output"] == "boom" and item.get("status") != "incomplete"
    # Responses has no error flag on a tool output: the flag itself is lost, reported.
    assert report.dropped == ["tool_result.is_error"]


def test_citations_on_assistant_history_text_are_dropped_and_reported() -> None:
    cite = c.Citation(url="https://x.test", title="X")
    body, report = encode_req(
        req(
            messages=[
                user(c.Text(text="q")),
                assistant(c.Text(text="cited", citations=[cite])),
            ]
        )
    )
    assert body["input"][1]["content"] == [
        {"type": "output_text", "text": "cited", "annotations": []}
    ]
    assert report.dropped == ["assistant.citations"]


def test_reasoning_with_its_own_encrypted_content_is_replayed_as_a_reasoning_item() -> None:
    body, report = encode_req(
        req(
            messages=[
                assistant(
                    c.Reasoning(text="sum", summary=True, encrypted_content="enc", item_id="rs_1"),
                    c.Reasoning(text="", encrypted_content="enc2"),
                    c.Text(text="hi"),
                )
            ]
        )
    )
    assert body["input"][:2] == [
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "sum"}],
            "id": "rs_1",
            "encrypted_content": "enc",
        },
        {"type": "reasoning", "summary": [], "encrypted_content": "enc2"},
    ]
    assert report.dropped == []


@pytest.mark.parametrize(
    "part",
    [
        c.Reasoning(text="thinking", signature="anthropic-sig"),
        c.Reasoning(redacted="blob"),
        c.Reasoning(text="raw text only"),
        c.Reasoning(encrypted_content=reasoning_carry.pack_tokens(c.Reasoning(signature="s"))),
    ],
)
def test_reasoning_openai_would_reject_is_dropped_and_reported(part: c.Reasoning) -> None:
    body, report = encode_req(req(messages=[assistant(part, c.Text(text="hi"))]))
    assert [i["type"] for i in body["input"]] == ["message"]
    assert report.dropped == ["reasoning"]


def test_only_the_reasoning_items_own_token_is_replayed() -> None:
    """The encoder reads encrypted_content and item_id only: a token of another kind,
    or a carrier still packed in any field, never reaches OpenAI."""
    packed = reasoning_carry.pack_tokens(c.Reasoning(encrypted_content="enc", item_id="rs_7"))
    body, report = encode_req(
        req(
            messages=[
                assistant(
                    c.Reasoning(text="t", encrypted_content="enc", item_id="rs_7"),
                    c.Reasoning(text="t", signature=packed),
                    c.Reasoning(text="t", thought_signature="c2ln"),
                )
            ]
        )
    )
    assert body["input"] == [
        {"type": "reasoning", "summary": [], "id": "rs_7", "encrypted_content": "enc"}
    ]
    assert report.dropped == ["reasoning"]


def test_tools_map_function_custom_and_responses_hosted_tools() -> None:
    body, report = encode_req(
        req(
            tools=[
                c.Tool(name="f", description="d", parameters={"type": "object"}),
                c.Tool(name="g"),
                c.Tool(name="s", strict=True, parameters={"type": "object"}),
                c.Tool(name="p", kind="custom", format={"type": "grammar", "syntax": "lark"}),
            ],
            hosted_tools=[
                c.HostedTool(
                    protocol="openai_responses", type="web_search", raw={"type": "web_search"}
                ),
                c.HostedTool(
                    protocol="anthropic_messages",
                    type="code_execution_20250825",
                    raw={"type": "code_execution_20250825"},
                ),
            ],
        )
    )
    assert body["tools"] == [
        {
            "type": "function",
            "name": "f",
            "parameters": {"type": "object"},
            "description": "d",
            "strict": False,
        },
        {
            "type": "function",
            "name": "g",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        },
        {"type": "function", "name": "s", "parameters": {"type": "object"}, "strict": True},
        {"type": "custom", "name": "p", "format": {"type": "grammar", "syntax": "lark"}},
        {"type": "web_search"},
    ]
    assert report.dropped == ["tools.code_execution_20250825"]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (c.ToolChoice(mode="auto"), "auto"),
        (c.ToolChoice(mode="none"), "none"),
        (c.ToolChoice(mode="required"), "required"),
        (c.ToolChoice(mode="tool", name="f"), {"type": "function", "name": "f"}),
        (c.ToolChoice(mode="tool", name="p", kind="custom"), {"type": "custom", "name": "p"}),
    ],
)
def test_tool_choice_maps_to_the_responses_forms(choice: c.ToolChoice, wire: Any) -> None:
    tools = [c.Tool(name="f"), c.Tool(name="p", kind="custom")]
    body, _ = encode_req(req(tools=tools, tool_choice=choice))
    assert body["tool_choice"] == wire


@pytest.mark.parametrize(
    ("choice", "dropped"),
    [
        (c.ToolChoice(mode="required"), ["tool_choice"]),
        (c.ToolChoice(mode="tool", name="f"), ["tool_choice"]),
        (c.ToolChoice(mode="auto"), []),
        (c.ToolChoice(mode="none"), []),
    ],
)
def test_tool_choice_requiring_or_naming_a_tool_without_tools_is_dropped_and_reported(
    choice: c.ToolChoice, dropped: list[str]
) -> None:
    body, report = encode_req(req(tool_choice=choice))
    assert "tool_choice" not in body and report.dropped == dropped


def test_tool_choice_naming_a_dropped_tool_is_dropped_and_reported() -> None:
    body, report = encode_req(
        req(
            tools=[c.Tool(name="f")],
            hosted_tools=[
                c.HostedTool(
                    protocol="anthropic_messages",
                    type="text_editor_20250728",
                    raw={"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
                )
            ],
            tool_choice=c.ToolChoice(mode="tool", name="str_replace_based_edit_tool"),
        )
    )
    assert [t["name"] for t in body["tools"]] == ["f"] and "tool_choice" not in body
    assert report.dropped == ["tools.text_editor_20250728", "tool_choice"]


def test_tool_choice_and_parallel_tool_calls_are_sent_only_with_tools() -> None:
    body, _ = encode_req(req(tool_choice=c.ToolChoice(mode="required"), parallel_tool_calls=False))
    assert "tool_choice" not in body and "parallel_tool_calls" not in body
    body, _ = encode_req(req(tools=[c.Tool(name="f")], parallel_tool_calls=False))
    assert body["parallel_tool_calls"] is False


def test_response_format_becomes_text_format() -> None:
    body, _ = encode_req(
        req(response_format=c.ResponseFormat(type="json_schema", schema={"type": "object"}))
    )
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "response", "schema": {"type": "object"}}
    }
    body, _ = encode_req(req(response_format=c.ResponseFormat(type="json_object")))
    assert body["text"] == {"format": {"type": "json_object"}}
    assert "text" not in encode_req(req(response_format=c.ResponseFormat(type="text")))[0]


@pytest.mark.parametrize(
    ("config", "reasoning"),
    [
        (
            c.ReasoningConfig(effort="high", summary="concise"),
            {"effort": "high", "summary": "concise"},
        ),
        (c.ReasoningConfig(budget_tokens=1024, enabled=True), {"effort": "low", "summary": "auto"}),
        (
            c.ReasoningConfig(budget_tokens=2048, enabled=True),
            {"effort": "medium", "summary": "auto"},
        ),
        (
            c.ReasoningConfig(budget_tokens=8191, enabled=True),
            {"effort": "medium", "summary": "auto"},
        ),
        (
            c.ReasoningConfig(budget_tokens=8192, enabled=True),
            {"effort": "high", "summary": "auto"},
        ),
    ],
)
def test_reasoning_effort_comes_from_effort_or_the_budget_bucket_rule(
    config: c.ReasoningConfig, reasoning: dict[str, Any]
) -> None:
    body, _ = encode_req(req(reasoning=config))
    assert body["reasoning"] == reasoning
    assert body["include"] == ["reasoning.encrypted_content"]


def test_adaptive_thinking_without_effort_lets_the_model_decide_so_sends_no_reasoning() -> None:
    """Anthropic ``thinking: adaptive`` alone used to become ``reasoning: {summary:
    auto}`` + ``include``; models without reasoning reject ``reasoning.summary``, so
    nothing is sent now."""
    body, report = encode_req(req(reasoning=c.ReasoningConfig(enabled=True)))
    assert "reasoning" not in body and "include" not in body and report.dropped == []
    # display: summarized with it has nothing to attach to: reported.
    body, report = encode_req(req(reasoning=c.ReasoningConfig(enabled=True, summary="auto")))
    assert "reasoning" not in body and "include" not in body
    assert report.dropped == ["reasoning.summary"]


def test_disabled_thinking_sends_no_reasoning_and_reports_it() -> None:
    """Anthropic ``thinking: disabled`` (canonical ``enabled=False``, effort ``none``) used
    to become ``reasoning: {effort: none}``; older reasoning models reject effort
    ``none``, so no reasoning is sent and ``reasoning`` is reported."""
    for config in (
        c.ReasoningConfig(enabled=False),
        c.ReasoningConfig(enabled=False, effort="none"),
    ):
        body, report = encode_req(req(reasoning=config))
        assert "reasoning" not in body and "include" not in body
        assert report.dropped == ["reasoning"]


def test_an_explicit_effort_none_is_still_sent() -> None:
    body, report = encode_req(req(reasoning=c.ReasoningConfig(effort="none")))
    assert body["reasoning"] == {"effort": "none"} and "include" not in body
    assert report.dropped == []


def test_sampling_limits_and_carried_fields_are_sent() -> None:
    body, report = encode_req(
        req(
            max_tokens=500,
            temperature=0.5,
            top_p=0.8,
            stream=True,
            prompt_cache_key="k",
            metadata={"a": "b"},
            user="end-user",
            service_tier="priority",
            previous_response_id="resp_1",
            background=False,
            top_logprobs=2,
        )
    )
    assert report.dropped == []
    expected = {
        "max_output_tokens": 500,
        "temperature": 0.5,
        "top_p": 0.8,
        "stream": True,
        "prompt_cache_key": "k",
        "metadata": {"a": "b"},
        "safety_identifier": "end-user",
        "service_tier": "priority",
        "previous_response_id": "resp_1",
        "background": False,
        "top_logprobs": 2,
    }
    assert {k: body[k] for k in expected} == expected


def test_max_output_tokens_below_the_api_minimum_is_raised_to_16_and_reported() -> None:
    body, report = encode_req(req(max_tokens=1))
    assert body["max_output_tokens"] == 16 and report.dropped == ["max_tokens"]
    body, report = encode_req(req(max_tokens=16))
    assert body["max_output_tokens"] == 16 and report.dropped == []


def test_verbosity_becomes_text_verbosity() -> None:
    body, report = encode_req(req(verbosity="low"))
    assert body["text"] == {"verbosity": "low"} and report.dropped == []
    body, _ = encode_req(
        req(verbosity="high", response_format=c.ResponseFormat(type="json_object"))
    )
    assert body["text"] == {"format": {"type": "json_object"}, "verbosity": "high"}


def test_a_user_id_over_128_characters_becomes_a_stable_sha256_safety_identifier() -> None:
    long_id = "user_" + "0" * 64 + "_account__session_" + "1" * 64
    body, report = encode_req(req(user=long_id))
    sid = body["safety_identifier"]
    assert sid.startswith("sha256:") and len(sid) == 71 and report.dropped == []
    assert encode_req(req(user=long_id))[0]["safety_identifier"] == sid
    assert encode_req(req(user="short"))[0]["safety_identifier"] == "short"


def test_a_service_tier_outside_the_openai_vocabulary_is_dropped_and_reported() -> None:
    body, report = encode_req(req(service_tier="standard_only"))
    assert "service_tier" not in body and report.dropped == ["service_tier"]


def test_stop_sequences_and_top_k_are_dropped_and_reported() -> None:
    body, report = encode_req(req(stop=["END"], top_k=5))
    assert "stop" not in body and "top_k" not in body
    assert report.dropped == ["stop", "top_k"]


def test_cache_control_is_dropped_and_reported_never_rejected() -> None:
    body, report = encode_req(
        req(
            system=[c.Text(text="s", cache_control={"type": "ephemeral"})],
            messages=[user(c.Text(text="q", cache_control={"type": "ephemeral"}))],
        )
    )
    assert body["instructions"] == "s" and report.dropped == ["cache_control"]


def test_n_greater_than_one_is_rejected_because_responses_has_no_choices() -> None:
    with pytest.raises(ProxyError) as exc:
        encode_req(req(n=2))
    assert exc.value.status == 400 and exc.value.param == "n"
    body, report = encode_req(req(n=2), lossy=True)
    assert "n" not in body and report.dropped == ["n"]


def test_logprobs_is_rejected_unless_lossy() -> None:
    with pytest.raises(ProxyError) as exc:
        encode_req(req(logprobs=True))
    assert exc.value.param == "logprobs"
    assert encode_req(req(logprobs=True), lossy=True)[1].dropped == ["logprobs"]


def test_top_logprobs_goes_with_logprobs_when_logprobs_is_dropped() -> None:
    body, report = encode_req(req(logprobs=True, top_logprobs=2), lossy=True)
    assert "top_logprobs" not in body
    assert report.dropped == ["logprobs", "top_logprobs"]


def test_server_tool_parts_and_assistant_media_are_dropped_and_reported() -> None:
    body, report = encode_req(
        req(
            messages=[
                assistant(
                    c.ServerToolUse(id="srv_1", name="web_fetch"),
                    c.Image(url="https://x/a.png"),
                    c.Text(text="done"),
                )
            ]
        )
    )
    assert [i["type"] for i in body["input"]] == ["message"]
    assert report.dropped == ["server_tool_use", "assistant image"]


def test_codex_request_decode_encode_decode_is_stable() -> None:
    creq, _ = decode_req(CODEX_REQUEST)
    upstream = CODEC.encode_request(creq, TranslationReport(), _options())
    again = CODEC.decode_request(upstream, TranslationReport())
    # The upstream body is itself a valid Responses request describing the same
    # conversation (the system prompt moves to instructions; store is false).
    assert again.messages == creq.messages
    assert [t.text for t in again.system] == [t.text for t in creq.system]
    assert plain_tools(again.tools) == plain_tools(creq.tools)
    assert again.hosted_tools == creq.hosted_tools
    assert again.tool_choice == creq.tool_choice and again.reasoning == creq.reasoning
    assert again.prompt_cache_key == creq.prompt_cache_key
    assert json.loads(upstream)["store"] is False


def _options() -> Any:
    from proxai_asgi.codec import UpstreamOptions

    return UpstreamOptions()
