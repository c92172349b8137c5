"""Client Responses request -> canonical request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.openai_responses import CODEC

from ._util import decode_req

LARK = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n'

# A request shaped like the ones Codex 0.169 sends on a second turn.
CODEX_REQUEST: dict[str, Any] = {
    "model": "gpt-5-codex",
    "instructions": None,
    "input": [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "You are Codex, a coding agent."}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "<environment_context>cwd</environment_context>"}
            ],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "list files"}],
        },
        {
            "type": "reasoning",
            "id": "rs_01",
            "summary": [{"type": "summary_text", "text": "**Listing**"}],
            "content": None,
            "encrypted_content": "gAAAAB-opaque",
        },
        {
            "type": "message",
            "id": "msg_01",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Listing.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_01",
            "status": "completed",
            "call_id": "call_1",
            "name": "exec_command",
            "arguments": '{"cmd":"ls"}',
        },
        {
            "type": "function_call_output",
            "id": "fco_01",
            "call_id": "call_1",
            "output": "a.txt\nb.txt",
        },
        {
            "type": "custom_tool_call",
            "id": "ctc_01",
            "status": "completed",
            "call_id": "call_2",
            "name": "apply_patch",
            "input": "*** Begin Patch\n*** End Patch",
        },
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"},
        {
            "type": "web_search_call",
            "id": "ws_01",
            "status": "completed",
            "action": {"type": "search", "query": "x"},
        },
    ],
    "tools": [
        {
            "type": "function",
            "name": "exec_command",
            "description": "Runs a command",
            "strict": False,
            "parameters": {
                "type": "object",
                "properties": {"cmd": {"type": "string"}},
                "required": ["cmd"],
                "additionalProperties": False,
            },
        },
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "Apply a patch",
            "format": {"type": "grammar", "syntax": "lark", "definition": LARK},
        },
        {"type": "web_search", "external_web_access": False},
        {"type": "tool_search", "description": "search tools"},
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "0199-session",
    "text": {"verbosity": "low"},
    "client_metadata": {"x-codex-turn": "2"},
}


def test_codex_shaped_request_decodes_to_the_conversation_it_describes() -> None:
    creq, report = decode_req(CODEX_REQUEST)
    assert creq.model == "gpt-5-codex" and creq.stream is True
    assert [t.text for t in creq.system] == ["You are Codex, a coding agent."]
    roles = [m.role for m in creq.messages]
    # (the replayed web_search_call is the last assistant turn: a canonical search)
    assert roles == ["user", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    turn = creq.messages[2].content
    assert isinstance(turn[0], c.Reasoning) and turn[0].encrypted_content == "gAAAAB-opaque"
    assert turn[0].item_id == "rs_01" and turn[0].summary and turn[0].text == "**Listing**"
    assert turn[1] == c.Text(text="Listing.")
    assert turn[2] == c.ToolCall(
        id="call_1", name="exec_command", arguments='{"cmd":"ls"}', item_id="fc_01"
    )
    assert creq.messages[3].content == [
        c.ToolResult(call_id="call_1", content=[c.Text(text="a.txt\nb.txt")])
    ]
    custom = creq.messages[4].content[0]
    assert isinstance(custom, c.ToolCall) and custom.kind == "custom"
    assert custom.arguments == "*** Begin Patch\n*** End Patch" and custom.item_id == "ctc_01"
    result = creq.messages[5].content[0]
    assert isinstance(result, c.ToolResult) and result.kind == "custom"
    assert [t.name for t in creq.tools] == ["exec_command", "apply_patch"]
    assert creq.tools[0].strict is False and creq.tools[0].parameters is not None
    assert creq.tools[1].kind == "custom"
    assert creq.tools[1].format == {"type": "grammar", "syntax": "lark", "definition": LARK}
    assert [(h.protocol, h.type) for h in creq.hosted_tools] == [
        ("openai_responses", "web_search"),
        ("openai_responses", "tool_search"),
    ]
    assert creq.hosted_tools[0].raw == {"type": "web_search", "external_web_access": False}
    assert creq.tool_choice == c.ToolChoice(mode="auto")
    assert creq.parallel_tool_calls is False
    assert creq.reasoning == c.ReasoningConfig(effort="medium", summary="auto")
    assert creq.prompt_cache_key == "0199-session"
    assert creq.verbosity is not None  # text.verbosity is carried, not dropped
    assert set(report.dropped) == {
        "include",
        "client_metadata",
        "tools.web_search.external_web_access",  # cached pages only: no counterpart
    }
    assert creq.messages[6].content == [
        c.ServerToolUse(id="ws_01", name="web_search", input={"type": "search", "query": "x"})
    ]
    assert creq.web_search == c.WebSearch()


def test_instructions_become_the_first_system_text() -> None:
    creq, _ = decode_req(
        {
            "model": "m",
            "instructions": "Be brief.",
            "input": [{"role": "system", "content": "Second."}],
        }
    )
    assert [t.text for t in creq.system] == ["Be brief.", "Second."]


def test_input_string_is_one_user_message() -> None:
    creq, _ = decode_req({"model": "m", "input": "hello"})
    assert creq.messages == [c.Message(role="user", content=[c.Text(text="hello")])]


def test_missing_input_is_an_empty_conversation() -> None:
    creq, _ = decode_req({"model": "m"})
    assert creq.messages == []


def test_system_and_developer_messages_are_hoisted_into_system_in_order() -> None:
    creq, _ = decode_req(
        {
            "model": "m",
            "input": [
                {"role": "developer", "content": "one"},
                {"role": "user", "content": "hi"},
                {"role": "system", "content": [{"type": "input_text", "text": "two"}]},
            ],
        }
    )
    assert [t.text for t in creq.system] == ["one", "two"]
    assert [m.role for m in creq.messages] == ["user"]


def test_non_text_content_in_a_system_message_is_rejected_naming_the_path() -> None:
    with pytest.raises(ProxyError) as exc:
        decode_req(
            {
                "model": "m",
                "input": [
                    {
                        "role": "developer",
                        "content": [{"type": "input_image", "image_url": "https://x/a.png"}],
                    }
                ],
            }
        )
    assert exc.value.status == 400 and "input[0].content[0]" in exc.value.message


def test_message_without_type_is_an_easy_input_message() -> None:
    creq, _ = decode_req({"model": "m", "input": [{"role": "user", "content": "hi"}]})
    assert creq.messages == [c.Message(role="user", content=[c.Text(text="hi")])]


def test_content_parts_map_to_text_refusal_image_and_file() -> None:
    creq, _ = decode_req(
        {
            "model": "m",
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "look"},
                        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                        {"type": "input_image", "image_url": "https://x/a.png", "detail": "low"},
                        {
                            "type": "input_file",
                            "file_data": "data:application/pdf;base64,JVBER",
                            "filename": "a.pdf",
                        },
                        {"type": "input_file", "file_data": "JVBER", "filename": "b.pdf"},
                        {"type": "input_file", "file_url": "https://x/c.pdf"},
                        {"type": "input_file", "file_id": "file-1"},
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "output_text",
                            "text": "ok",
                            "annotations": [{"type": "url_citation", "url": "u"}],
                        },
                        {"type": "refusal", "refusal": "no"},
                    ],
                },
            ],
        }
    )
    assert creq.messages[0].content == [
        c.Text(text="look"),
        c.Image(data="AAAA", media_type="image/png"),
        c.Image(url="https://x/a.png", detail="low"),
        c.File(data="JVBER", media_type="application/pdf", filename="a.pdf"),
        c.File(data="JVBER", filename="b.pdf"),
        c.File(url="https://x/c.pdf"),
        c.File(file_id="file-1"),
    ]
    assert creq.messages[1].content == [c.Text(text="ok"), c.Refusal(text="no")]


def test_input_image_by_file_id_is_rejected_naming_the_path() -> None:
    with pytest.raises(ProxyError) as exc:
        decode_req(
            {
                "model": "m",
                "input": [
                    {"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}
                ],
            }
        )
    assert exc.value.status == 400 and "input[0].content[0].file_id" in exc.value.message


def test_input_audio_is_rejected_naming_the_path() -> None:
    with pytest.raises(ProxyError) as exc:
        decode_req(
            {
                "model": "m",
                "input": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_text", "text": "listen"},
                            {"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}},
                        ],
                    },
                ],
            }
        )
    assert exc.value.status == 400 and "input[1].content[1]" in exc.value.message


def test_function_calls_and_the_assistant_message_before_them_form_one_assistant_turn() -> None:
    creq, _ = decode_req(
        {
            "model": "m",
            "input": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": "Looking up."},
                {"type": "function_call", "call_id": "a", "name": "w", "arguments": "{}"},
                {"type": "function_call", "call_id": "b", "name": "t", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "a", "output": "sunny"},
                {"type": "function_call_output", "call_id": "b", "output": "noon"},
            ],
        }
    )
    assert [m.role for m in creq.messages] == ["user", "assistant", "tool"]
    assert creq.messages[1].content == [
        c.Text(text="Looking up."),
        c.ToolCall(id="a", name="w", arguments="{}"),
        c.ToolCall(id="b", name="t", arguments="{}"),
    ]


def test_consecutive_tool_outputs_form_one_tool_turn_of_tool_results() -> None:
    creq, _ = decode_req(
        {
            "model": "m",
            "input": [
                {"type": "function_call", "call_id": "a", "name": "w", "arguments": "{}"},
                {"type": "custom_tool_call", "call_id": "b", "name": "p", "input": "raw"},
                {
                    "type": "function_call_output",
                    "id": "fco_1",
                    "status": "completed",
                    "call_id": "a",
                    "output": [
                        {"type": "input_text", "text": "see"},
                        {"type": "input_image", "image_url": "https://x/i.png"},
                    ],
                },
                {"type": "custom_tool_call_output", "call_id": "b", "output": "patched"},
            ],
        }
    )
    assert [m.role for m in creq.messages] == ["assistant", "tool"]
    assert creq.messages[1].content == [
        c.ToolResult(call_id="a", content=[c.Text(text="see"), c.Image(url="https://x/i.png")]),
        c.ToolResult(call_id="b", content=[c.Text(text="patched")], kind="custom"),
    ]


def test_tool_output_never_synthesizes_is_error() -> None:
    creq, _ = decode_req(
        {
            "model": "m",
            "input": [
                {"type": "function_call", "call_id": "a", "name": "w", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "a", "output": "Error: exit 1"},
            ],
        }
    )
    result = creq.messages[1].content[0]
    assert isinstance(result, c.ToolResult) and result.is_error is False
    assert result.content == [c.Text(text="Error: exit 1")]


def test_reasoning_item_keeps_summary_text_encrypted_content_and_item_id() -> None:
    creq, _ = decode_req(
        {
            "model": "m",
            "input": [
                {
                    "type": "reasoning",
                    "id": "rs_9",
                    "summary": [
                        {"type": "summary_text", "text": "one"},
                        {"type": "summary_text", "text": "two"},
                    ],
                    "encrypted_content": "enc",
                }
            ],
        }
    )
    assert creq.messages[0].content == [
        c.Reasoning(text="one\n\ntwo", summary=True, encrypted_content="enc", item_id="rs_9")
    ]


def test_reasoning_item_with_raw_reasoning_text_is_not_a_summary() -> None:
    creq, _ = decode_req(
        {
            "model": "m",
            "input": [
                {
                    "type": "reasoning",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": "raw thought"}],
                }
            ],
        }
    )
    assert creq.messages[0].content == [c.Reasoning(text="raw thought", summary=False)]


def test_reasoning_item_carrying_an_anthropic_token_gives_the_token_back() -> None:
    signed = reasoning_carry.pack_tokens(c.Reasoning(signature="sig-1"))
    redacted = reasoning_carry.pack_tokens(c.Reasoning(redacted="blob"))
    creq, _ = decode_req(
        {
            "model": "m",
            "input": [
                {
                    "type": "reasoning",
                    "id": "rs_x_0",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": "thinking..."}],
                    "encrypted_content": signed,
                },
                {"type": "reasoning", "id": "rs_x_1", "summary": [], "encrypted_content": redacted},
            ],
        }
    )
    assert creq.messages[0].content == [
        c.Reasoning(text="thinking...", summary=False, signature="sig-1", item_id="rs_x_0"),
        c.Reasoning(redacted="blob"),
    ]


@pytest.mark.parametrize("content", [[], [{"type": "reasoning_text", "text": "edited"}]])
def test_the_signed_thinking_text_comes_back_from_the_carrier(content: list[Any]) -> None:
    """Issue 17 defect 6: the carrier holds the text Anthropic signed, so a replay without
    content (or with other text) still gives Anthropic that text; a carrier packed before
    the text rode along (above) keeps the replayed text."""
    signed = reasoning_carry.pack_tokens(c.Reasoning(signature="sig-1"), "thinking...")
    item = {"type": "reasoning", "summary": [], "content": content, "encrypted_content": signed}
    creq, _ = decode_req({"model": "m", "input": [item]})
    (reasoning,) = creq.messages[0].content
    assert reasoning == c.Reasoning(text="thinking...", summary=False, signature="sig-1")


def test_item_reference_is_rejected_because_it_needs_server_side_state() -> None:
    body = {"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]}
    with pytest.raises(ProxyError) as exc:
        decode_req(body)
    assert exc.value.status == 400 and "input[0]" in exc.value.message
    # an untyped reference (only an id) is one too
    with pytest.raises(ProxyError):
        decode_req({"model": "m", "input": [{"id": "msg_1"}]})
    creq, report = decode_req(body, lossy=True)
    assert creq.messages == [] and report.dropped == ["input[0]"]


def test_hosted_tool_items_in_history_are_dropped_and_reported() -> None:
    creq, report = decode_req(
        {
            "model": "m",
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "file_search_call", "id": "fs_1", "status": "completed"},
                {"type": "compaction", "encrypted_content": "x"},
            ],
        }
    )
    assert len(creq.messages) == 1
    assert report.dropped == ["input.file_search_call", "input.compaction"]


def test_unknown_item_type_is_a_400_naming_the_path() -> None:
    with pytest.raises(ProxyError) as exc:
        decode_req({"model": "m", "input": [{"role": "user", "content": "x"}, {"type": "bogus"}]})
    assert exc.value.status == 400 and "input[1].type" in exc.value.message
    assert exc.value.param == "input[1].type"


def test_tools_map_function_custom_and_hosted_tools() -> None:
    creq, _ = decode_req(
        {
            "model": "m",
            "tools": [
                {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True},
                {"type": "custom", "name": "p", "description": "patch"},
                {"type": "web_search_preview"},
                {"type": "mcp", "server_label": "x", "server_url": "https://x"},
            ],
        }
    )
    assert creq.tools == [
        c.Tool(name="f", parameters={"type": "object"}, strict=True),
        c.Tool(name="p", kind="custom", description="patch"),
    ]
    assert [h.type for h in creq.hosted_tools] == ["web_search_preview", "mcp"]
    assert creq.hosted_tools[1].raw["server_label"] == "x"


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", c.ToolChoice(mode="auto")),
        ("none", c.ToolChoice(mode="none")),
        ("required", c.ToolChoice(mode="required")),
        ({"type": "function", "name": "f"}, c.ToolChoice(mode="tool", name="f")),
        ({"type": "custom", "name": "p"}, c.ToolChoice(mode="tool", name="p", kind="custom")),
    ],
)
def test_tool_choice_forms_map_to_the_canonical_choice(choice: Any, expected: c.ToolChoice) -> None:
    creq, report = decode_req({"model": "m", "tool_choice": choice})
    assert creq.tool_choice == expected and report.dropped == []


def test_allowed_tools_choice_keeps_its_mode_and_reports_the_subset_as_lossy() -> None:
    creq, report = decode_req(
        {
            "model": "m",
            "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": []},
        }
    )
    assert creq.tool_choice == c.ToolChoice(mode="required")
    # The same name the Chat decoder reports for its allowed_tools choice.
    assert report.dropped == ["tool_choice.allowed_tools"]


def test_hosted_tool_choice_becomes_auto_and_is_reported() -> None:
    creq, report = decode_req({"model": "m", "tool_choice": {"type": "file_search"}})
    assert creq.tool_choice == c.ToolChoice(mode="auto") and report.dropped == ["tool_choice"]


def test_an_unknown_tool_choice_string_is_a_400() -> None:
    with pytest.raises(ProxyError) as exc:
        decode_req({"model": "m", "tool_choice": "sometimes"})
    assert exc.value.param == "tool_choice"


def test_sampling_output_format_reasoning_and_carried_fields_map_one_to_one() -> None:
    creq, report = decode_req(
        {
            "model": "m",
            "max_output_tokens": 300,
            "temperature": 0.2,
            "top_p": 0.9,
            "parallel_tool_calls": True,
            "stream": False,
            "text": {
                "format": {
                    "type": "json_schema",
                    "name": "Out",
                    "schema": {"type": "object"},
                    "strict": True,
                    "description": "d",
                }
            },
            "reasoning": {"effort": "high", "summary": "detailed"},
            "prompt_cache_key": "k",
            "metadata": {"a": "b"},
            "service_tier": "flex",
            "previous_response_id": "resp_prev",
            "background": False,
            "top_logprobs": 3,
        }
    )
    assert report.dropped == []
    assert (creq.max_tokens, creq.temperature, creq.top_p) == (300, 0.2, 0.9)
    assert creq.parallel_tool_calls is True and creq.stream is False
    assert creq.response_format == c.ResponseFormat(
        type="json_schema", name="Out", schema={"type": "object"}, strict=True, description="d"
    )
    assert creq.reasoning == c.ReasoningConfig(effort="high", summary="detailed")
    assert creq.prompt_cache_key == "k" and creq.metadata == {"a": "b"}
    assert creq.service_tier == "flex" and creq.previous_response_id == "resp_prev"
    assert creq.background is False and creq.top_logprobs == 3


@pytest.mark.parametrize("fmt", [{"type": "json_object"}, {"type": "text"}])
def test_json_object_and_text_formats_map_to_response_format(fmt: dict[str, Any]) -> None:
    creq, _ = decode_req({"model": "m", "text": {"format": fmt}})
    assert creq.response_format == c.ResponseFormat(type=fmt["type"])


def test_safety_identifier_or_user_becomes_the_end_user_id() -> None:
    assert decode_req({"model": "m", "user": "u1"})[0].user == "u1"
    assert decode_req({"model": "m", "safety_identifier": "s1", "user": "u1"})[0].user == "s1"


def test_fields_real_clients_send_are_dropped_and_reported_never_rejected() -> None:
    creq, report = decode_req(
        {
            "model": "m",
            "input": "hi",
            "store": True,
            "include": ["reasoning.encrypted_content"],
            "truncation": "auto",
            "client_metadata": {"k": "v"},
            "prompt_cache_retention": "24h",
            "stream_options": {"include_obfuscation": False},
            "some_future_field": {"x": 1},
        }
    )
    assert creq.messages and set(report.dropped) == {
        "store",
        "include",
        "truncation",
        "client_metadata",
        "prompt_cache_retention",
        "stream_options",
        "some_future_field",
    }


def test_text_verbosity_is_carried_into_the_canonical_request() -> None:
    creq, report = decode_req({"model": "m", "input": "hi", "text": {"verbosity": "high"}})
    assert creq.verbosity == "high" and report.dropped == []


def test_safety_identifier_wins_over_user_and_the_other_user_is_reported() -> None:
    """The same preference as the Chat decoder: safety_identifier is the newer field."""
    creq, report = decode_req({"model": "m", "input": "hi", "user": "a", "safety_identifier": "b"})
    assert creq.user == "b" and report.dropped == ["user"]
    creq, report = decode_req({"model": "m", "input": "hi", "user": "a"})
    assert creq.user == "a" and report.dropped == []


def test_store_false_is_what_a_stateless_proxy_does_and_is_not_reported() -> None:
    _, report = decode_req({"model": "m", "input": "hi", "store": False})
    assert report.dropped == []


def test_replayed_items_keep_their_ids_and_status_is_accepted() -> None:
    creq, report = decode_req(
        {
            "model": "m",
            "input": [
                {
                    "type": "message",
                    "id": "msg_1",
                    "status": "completed",
                    "role": "assistant",
                    "content": [
                        {"type": "output_text", "text": "x", "annotations": [], "logprobs": []}
                    ],
                },
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "status": "completed",
                    "call_id": "c1",
                    "name": "f",
                    "arguments": "{}",
                },
                {
                    "type": "function_call_output",
                    "id": "fco_1",
                    "status": "completed",
                    "call_id": "c1",
                    "output": "ok",
                },
            ],
        }
    )
    assert report.dropped == []
    call = creq.messages[0].content[1]
    assert isinstance(call, c.ToolCall) and call.item_id == "fc_1"


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"input": "hi"}, "model"),
        ({"model": 5}, "$.model"),
        ({"model": "m", "input": 5}, "$.input"),
        ({"model": "m", "input": [{"role": "user", "content": 5}]}, "$.input[0].content"),
        ({"model": "m", "input": [{"role": "robot", "content": "x"}]}, "$.input[0].role"),
        (
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text"}]}]},
            "$.input[0].content[0]",
        ),
        ({"model": "m", "input": [{"type": "function_call", "name": "f"}]}, "$.input[0]"),
        ({"model": "m", "tools": [{"type": "function"}]}, "$.tools[0]"),
        ({"model": "m", "temperature": "hot"}, "$.temperature"),
        ({"model": "m", "metadata": {"a": 1}}, "$.metadata"),
        ({"model": "m", "text": {"format": {"type": "yaml"}}}, "$.text.format.type"),
    ],
)
def test_wrong_types_and_missing_fields_are_400_naming_the_field(
    body: dict[str, Any], path: str
) -> None:
    with pytest.raises(ProxyError) as exc:
        decode_req(body)
    assert exc.value.status == 400 and exc.value.kind == "invalid_request"
    assert path in exc.value.message


@pytest.mark.parametrize("body", [b"", b"{", b"[1,2]", b'"text"', b"\xff\xfe", b"null"])
def test_a_body_that_is_not_a_json_object_is_a_400(body: bytes) -> None:
    with pytest.raises(ProxyError) as exc:
        CODEC.decode_request(body, TranslationReport())
    assert exc.value.status == 400


@pytest.mark.parametrize(
    ("field", "value"), [("conversation", "conv_1"), ("prompt", {"id": "pmpt_1"})]
)
def test_fields_that_point_at_provider_side_state_are_rejected_unless_lossy(
    field: str, value: Any
) -> None:
    body = {"model": "m", "input": "hi", field: value}
    with pytest.raises(ProxyError) as exc:
        decode_req(body)
    assert exc.value.status == 400 and exc.value.param == field
    assert decode_req(body, lossy=True)[1].dropped == [field]


def _call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}


def _said(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def _output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


@pytest.mark.parametrize(
    ("items", "unanswered"),
    [
        ([_call("c1"), _output("c1")], None),
        ([_output("c1"), _call("c1")], None),  # (an output anywhere in the input counts)
        ([_call("c1"), _call("c2"), _output("c1")], "c2"),
        ([_call("c1"), _call("c2"), _call("c3"), _output("c2")], "c1"),  # the first, in order
    ],
)
def test_a_call_without_its_output_in_the_input_is_a_400_unless_lossy(
    items: list[dict[str, Any]], unanswered: str | None
) -> None:
    body = {"model": "m", "input": [{"role": "user", "content": "hi"}, *items]}
    raw = json.dumps(body).encode()
    decode_request = CODEC.decode_request
    if unanswered is None:
        decode_request(raw, TranslationReport())
    else:
        with pytest.raises(ProxyError) as e:
            decode_request(raw, TranslationReport())
        assert (e.value.status, e.value.param) == (400, "input")
        assert e.value.message == f"No tool output found for function call {unanswered}."
    decode_request(raw, TranslationReport(lossy=True))  # the outputs may be stored upstream


def test_consecutive_items_of_a_side_form_one_turn() -> None:
    """Parallel calls: the message and the calls make one assistant turn, the outputs
    one tool turn, whichever item opens it."""
    body = {
        "model": "m",
        "input": [
            {"role": "user", "content": "hi"},
            _said("a"),
            _call("c1"),
            _call("c2"),
            _output("c1"),
            _output("c2"),
            _call("c3"),
            _said("b"),
            _output("c3"),
        ],
    }
    req = CODEC.decode_request(json.dumps(body).encode(), TranslationReport())
    shape = [(m.role, [_label(p) for p in m.content]) for m in req.messages]
    assert shape == [
        ("user", ["hi"]),
        ("assistant", ["a", "c1", "c2"]),
        ("tool", ["c1", "c2"]),
        ("assistant", ["c3", "b"]),
        ("tool", ["c3"]),
    ]


def _label(p: c.Part) -> str:
    if type(p) is c.ToolCall:
        return p.id
    if type(p) is c.ToolResult:
        return p.call_id
    assert type(p) is c.Text
    return p.text
