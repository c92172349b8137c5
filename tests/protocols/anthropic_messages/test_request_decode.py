"""Client request decode: Anthropic Messages body -> canonical Request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.anthropic_messages import CODEC
from tests.helpers import captures as cap
from tests.helpers.schemas import plain_tools

from ._util import body, decode_req


def _raises_400(b: dict[str, Any] | bytes) -> ProxyError:
    raw = b if isinstance(b, bytes) else json.dumps(b).encode()
    with pytest.raises(ProxyError) as info:
        CODEC.decode_request(raw, TranslationReport())
    assert info.value.status == 400
    assert info.value.kind == "invalid_request"
    return info.value


@pytest.mark.parametrize("name", cap.capture_names("anthropic_"))
def test_every_capture_request_decodes_as_a_client_request(name: str) -> None:
    raw = cap.load(name)["request"]["body"]
    r, report = decode_req(raw)
    assert report.dropped == []
    assert r.model == raw["model"]
    assert r.max_tokens == raw["max_tokens"]
    assert r.stream == bool(raw.get("stream"))
    assert len(r.messages) == len(raw["messages"])
    first = raw["messages"][0]["content"]
    text = first if isinstance(first, str) else first[0]["text"]
    assert r.messages[0].role == "user"
    assert r.messages[0].content == [c.Text(text=text)]
    if "system" in raw:
        assert [t.text for t in r.system] == [b["text"] for b in raw["system"]]
        assert r.system[0].cache_control == {"type": "ephemeral"}
    if "tools" in raw:
        t = raw["tools"][0]
        assert plain_tools(r.tools) == [
            c.Tool(
                name=t["name"],
                description=t["description"],
                parameters=t["input_schema"],
                cache_control={"type": "ephemeral"},
            )
        ]
    if "thinking" in raw:
        assert r.reasoning == c.ReasoningConfig(budget_tokens=1024, enabled=True)
    if "output_config" in raw:
        assert r.reasoning == c.ReasoningConfig(effort="xhigh")


def test_system_string_becomes_one_text() -> None:
    r, _ = decode_req(body(system="Be brief."))
    assert r.system == [c.Text(text="Be brief.")]


def test_system_blocks_keep_boundaries_and_cache_control() -> None:
    cc = {"type": "ephemeral", "ttl": "1h"}
    r, _ = decode_req(
        body(
            system=[
                {"type": "text", "text": "A"},
                {"type": "text", "text": "B", "cache_control": cc},
            ]
        )
    )
    assert r.system == [c.Text(text="A"), c.Text(text="B", cache_control=cc)]


def test_mid_conversation_system_messages_stay_in_place_as_system_turns() -> None:
    """(Issue 26: they were hoisted into ``system``, losing their place.)"""
    r, _ = decode_req(
        body(
            system="first",
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "system", "content": "second"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "and?"},
                {"role": "system", "content": [{"type": "text", "text": "third"}]},
            ],
        )
    )
    assert [t.text for t in r.system] == ["first"]
    assert [m.role for m in r.messages] == ["user", "system", "assistant", "user", "system"]
    assert r.messages[1].content == [c.Text(text="second")]
    assert r.messages[4].content == [c.Text(text="third")]
    assert r.system_turns is True


def test_system_message_with_a_non_text_block_is_400() -> None:
    img = {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
    messages = [{"role": "user", "content": "hi"}, {"role": "system", "content": [img]}]
    err = _raises_400(body(messages=messages))
    assert err.param == "messages[1].content[0].type"


def test_text_blocks_keep_cache_control_and_url_citations() -> None:
    cite = {
        "type": "web_search_result_location",
        "url": "https://e.x",
        "title": "E",
        "cited_text": "quote",
        "encrypted_index": "abc",
    }
    r, report = decode_req(
        body(
            messages=[
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "a", "citations": [cite]},
                        {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}},
                    ],
                },
            ]
        )
    )
    assert r.messages[1].content == [
        c.Text(text="a", citations=[c.Citation(url="https://e.x", title="E", cited_text="quote")]),
        c.Text(text="b", cache_control={"type": "ephemeral"}),
    ]
    assert report.dropped == []


def test_images_base64_and_url_sources_become_images() -> None:
    r, _ = decode_req(
        body(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
                            "cache_control": {"type": "ephemeral"},
                        },
                        {"type": "image", "source": {"type": "url", "url": "https://x/a.jpg"}},
                    ],
                }
            ]
        )
    )
    assert r.messages[0].content == [
        c.Image(data="iVBO", media_type="image/png", cache_control={"type": "ephemeral"}),
        c.Image(url="https://x/a.jpg"),
    ]


def test_image_file_source_is_400_naming_the_path() -> None:
    img = {"type": "image", "source": {"type": "file", "file_id": "file_1"}}
    err = _raises_400(body(messages=[{"role": "user", "content": ["x", img][1:]}]))
    assert err.param == "messages[0].content[0].source"


def test_documents_become_files_with_title_as_filename() -> None:
    docs: list[dict[str, Any]] = [
        {
            "type": "document",
            "title": "paper.pdf",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0"},
        },
        {"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "T"}},
        {
            "type": "document",
            "source": {"type": "content", "content": [{"type": "text", "text": "C1"}]},
        },
        {"type": "document", "source": {"type": "content", "content": "C2"}},
    ]
    r, report = decode_req(body(messages=[{"role": "user", "content": docs}]))
    assert r.messages[0].content == [
        c.File(data="JVBERi0", media_type="application/pdf", filename="paper.pdf"),
        c.File(url="https://x/a.pdf"),
        c.File(text="T", media_type="text/plain"),
        c.File(text="C1"),
        c.File(text="C2"),
    ]
    assert report.dropped == []


def test_a_file_source_document_is_rejected_because_its_id_is_an_anthropic_files_api_id() -> None:
    """Passed on as an OpenAI ``file_id`` it would name a file OpenAI never had; a
    file-source image is rejected the same way."""
    doc = {"type": "document", "source": {"type": "file", "file_id": "file_9"}}
    err = _raises_400(body(messages=[{"role": "user", "content": [doc]}]))
    assert err.param == "messages[0].content[0].source"


def test_images_inside_a_content_source_document_are_dropped_and_reported() -> None:
    doc = {
        "type": "document",
        "source": {
            "type": "content",
            "content": [
                {"type": "text", "text": "C1"},
                {"type": "image", "source": {"type": "url", "url": "https://x/i.png"}},
            ],
        },
    }
    r, report = decode_req(body(messages=[{"role": "user", "content": [doc]}]))
    assert r.messages[0].content == [c.File(text="C1")]
    assert report.dropped == ["document.content.image"]


def test_assistant_tool_use_becomes_a_tool_call_with_json_arguments() -> None:
    r, _ = decode_req(
        body(
            messages=[
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Looking."},
                        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": [1]}},
                    ],
                },
            ]
        )
    )
    assert r.messages[1] == c.Message(
        role="assistant",
        content=[
            c.Text(text="Looking."),
            c.ToolCall(id="toolu_1", name="f", arguments='{"a":[1]}'),
        ],
    )


def test_tool_results_become_a_tool_turn_before_the_rest_of_the_user_turn() -> None:
    r, _ = decode_req(
        body(
            messages=[
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
                        {"type": "tool_use", "id": "t2", "name": "f", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "before"},
                        {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
                        {"type": "tool_result", "tool_use_id": "t2", "content": "two"},
                        {"type": "text", "text": "after"},
                    ],
                },
            ]
        )
    )
    assert [m.role for m in r.messages] == ["user", "assistant", "tool", "user"]
    assert r.messages[2].content == [
        c.ToolResult(call_id="t1", content=[c.Text(text="one")]),
        c.ToolResult(call_id="t2", content=[c.Text(text="two")]),
    ]
    assert r.messages[3].content == [c.Text(text="before"), c.Text(text="after")]


def test_tool_result_content_blocks_and_is_error_are_kept() -> None:
    r, report = decode_req(
        body(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "is_error": True,
                            "cache_control": {"type": "ephemeral"},
                            "content": [
                                {"type": "text", "text": "boom"},
                                {
                                    "type": "image",
                                    "source": {"type": "url", "url": "https://x/i.png"},
                                },
                                {"type": "tool_reference", "tool_name": "g"},
                            ],
                        },
                        {"type": "tool_result", "tool_use_id": "t2"},
                    ],
                }
            ]
        )
    )
    assert r.messages == [
        c.Message(
            role="tool",
            content=[
                c.ToolResult(
                    call_id="t1",
                    is_error=True,
                    cache_control={"type": "ephemeral"},
                    content=[c.Text(text="boom"), c.Image(url="https://x/i.png")],
                ),
                c.ToolResult(call_id="t2"),
            ],
        )
    ]
    assert report.dropped == ["tool_result.content.tool_reference"]


def test_thinking_keeps_its_signature_and_redacted_thinking_its_data() -> None:
    r, _ = decode_req(
        body(
            messages=[
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "EvMC"},
                        {"type": "redacted_thinking", "data": "EvgF"},
                        {"type": "text", "text": "a"},
                    ],
                },
            ]
        )
    )
    assert r.messages[1].content == [
        c.Reasoning(text="hmm", signature="EvMC"),
        c.Reasoning(redacted="EvgF"),
        c.Text(text="a"),
    ]


def test_thinking_signature_carrying_an_openai_token_unpacks_to_encrypted_content() -> None:
    sig = reasoning_carry.pack_tokens(c.Reasoning(encrypted_content="gAAAA", item_id="rs_1"))
    r, _ = decode_req(
        body(
            messages=[
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [{"type": "thinking", "thinking": "", "signature": sig}],
                },
            ]
        )
    )
    assert r.messages[1].content == [c.Reasoning(encrypted_content="gAAAA", item_id="rs_1")]


def test_server_tool_blocks_in_history_are_dropped_and_reported() -> None:
    r, report = decode_req(
        body(
            messages=[
                {"role": "user", "content": "search"},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "server_tool_use",
                            "id": "srvtoolu_1",
                            "name": "web_fetch",
                            "input": {"url": "https://example.org/"},
                        },
                        {
                            "type": "web_fetch_tool_result",
                            "tool_use_id": "srvtoolu_1",
                            "content": {"type": "web_fetch_tool_result_error", "error_code": "x"},
                        },
                        {"type": "text", "text": "found"},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "search_result", "source": "s", "title": "t", "content": []},
                        {"type": "text", "text": "ok"},
                    ],
                },
            ]
        )
    )
    assert r.messages[1].content == [c.Text(text="found")]
    assert r.messages[2].content == [c.Text(text="ok")]
    assert report.dropped == [
        "messages.content.server_tool_use",
        "messages.content.web_fetch_tool_result",
        "messages.content.search_result",
    ]


def test_unknown_block_type_is_400_naming_the_path() -> None:
    msgs = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "hologram"}]},
    ]
    err = _raises_400(body(messages=msgs))
    assert err.param == "messages[3].content[1].type"
    assert "messages[3].content[1].type" in err.message


def test_tool_use_in_a_user_turn_and_tool_result_in_an_assistant_turn_are_400() -> None:
    use = {"type": "tool_use", "id": "t", "name": "f", "input": {}}
    res = {"type": "tool_result", "tool_use_id": "t", "content": "x"}
    assert _raises_400(body(messages=[{"role": "user", "content": [use]}])).param == (
        "messages[0].content[0].type"
    )
    assert _raises_400(body(messages=[{"role": "assistant", "content": [res]}])).param == (
        "messages[0].content[0].type"
    )


def test_custom_tools_become_function_tools_keeping_any_schema() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
        "additionalProperties": False,
    }
    r, report = decode_req(
        body(
            tools=[
                {
                    "name": "Bash",
                    "description": "Run",
                    "input_schema": schema,
                    "defer_loading": True,
                },
                {"type": "custom", "name": "g", "input_schema": {"type": "object"}, "strict": True},
            ]
        )
    )
    assert r.tools == [
        c.Tool(name="Bash", description="Run", parameters=schema),
        c.Tool(name="g", parameters={"type": "object"}, strict=True),
    ]
    assert report.dropped == ["tools.defer_loading"]


def test_typed_anthropic_tools_become_hosted_tools_kept_raw() -> None:
    tools: list[dict[str, Any]] = [
        {"type": "bash_20250124", "name": "bash"},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    ]
    r, _ = decode_req(body(tools=tools))
    assert r.tools == []
    assert r.hosted_tools == [
        c.HostedTool(protocol="anthropic_messages", type=t["type"], raw=t) for t in tools
    ]


def test_tool_definition_with_a_wrong_type_is_400_naming_the_tool() -> None:
    err = _raises_400(body(tools=[{"name": "ok", "input_schema": {}}, {"name": 5}]))
    assert err.param == "tools[1].name"


@pytest.mark.parametrize(
    ("choice", "expected", "parallel"),
    [
        ({"type": "auto"}, c.ToolChoice(mode="auto"), None),
        ({"type": "any"}, c.ToolChoice(mode="required"), None),
        ({"type": "none"}, c.ToolChoice(mode="none"), None),
        ({"type": "tool", "name": "f"}, c.ToolChoice(mode="tool", name="f"), None),
        ({"type": "auto", "disable_parallel_tool_use": True}, c.ToolChoice(mode="auto"), False),
        ({"type": "any", "disable_parallel_tool_use": False}, c.ToolChoice(mode="required"), None),
    ],
)
def test_tool_choice_maps_and_disable_parallel_tool_use_sets_parallel_false(
    choice: dict[str, Any], expected: c.ToolChoice, parallel: bool | None
) -> None:
    r, _ = decode_req(
        body(tools=[{"name": "f", "input_schema": {"type": "object"}}], tool_choice=choice)
    )
    assert r.tool_choice == expected
    assert r.parallel_tool_calls is parallel


def test_tool_choice_tool_without_name_is_400() -> None:
    assert _raises_400(body(tool_choice={"type": "tool"})).param == "tool_choice.name"


def test_max_tokens_is_required() -> None:
    b = body()
    del b["max_tokens"]
    err = _raises_400(b)
    assert "max_tokens" in err.message


def test_sampling_fields_stop_sequences_metadata_user_and_service_tier() -> None:
    r, report = decode_req(
        body(
            temperature=0.2,
            top_p=0.9,
            top_k=40,
            stop_sequences=["END"],
            stream=True,
            metadata={"user_id": "u-1"},
            service_tier="standard_only",
        )
    )
    assert (r.temperature, r.top_p, r.top_k, r.stop, r.stream) == (0.2, 0.9, 40, ["END"], True)
    assert r.user == "u-1"
    assert r.service_tier == "standard_only"
    assert report.dropped == []


@pytest.mark.parametrize(
    ("thinking", "output_config", "expected"),
    [
        (
            {"type": "enabled", "budget_tokens": 2048},
            None,
            c.ReasoningConfig(enabled=True, budget_tokens=2048),
        ),
        ({"type": "adaptive"}, None, c.ReasoningConfig(enabled=True)),
        ({"type": "disabled"}, None, c.ReasoningConfig(enabled=False, effort="none")),
        (
            {"type": "adaptive", "display": "summarized"},
            {"effort": "max"},
            c.ReasoningConfig(enabled=True, effort="xhigh", summary="auto"),
        ),
        (None, {"effort": "low"}, c.ReasoningConfig(effort="low")),
        (None, {"effort": "xhigh"}, c.ReasoningConfig(effort="xhigh")),
        (
            {"type": "adaptive", "display": "omitted"},
            {"effort": "medium"},
            c.ReasoningConfig(enabled=True, effort="medium"),
        ),
    ],
)
def test_thinking_and_effort_map_to_the_reasoning_config(
    thinking: dict[str, Any] | None,
    output_config: dict[str, Any] | None,
    expected: c.ReasoningConfig,
) -> None:
    b = body()
    if thinking is not None:
        b["thinking"] = thinking
    if output_config is not None:
        b["output_config"] = output_config
    r, _ = decode_req(b)
    assert r.reasoning == expected


def test_output_config_format_becomes_a_json_schema_response_format() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    r, _ = decode_req(body(output_config={"format": {"type": "json_schema", "schema": schema}}))
    assert r.response_format == c.ResponseFormat(type="json_schema", name="response", schema=schema)
    assert r.reasoning is None


def test_claude_code_fields_are_dropped_and_reported_never_rejected() -> None:
    r, report = decode_req(
        body(
            context_management={"edits": [{"type": "clear_thinking_20251015"}]},
            cache_control={"type": "ephemeral"},
            container="cont_1",
            mcp_servers=[{"type": "url", "url": "https://m", "name": "m"}],
            betas=["x"],
            something_new={"a": 1},
        )
    )
    assert r.messages[0].content == [c.Text(text="hi")]
    assert report.dropped == [
        "context_management",
        "cache_control",
        "container",
        "mcp_servers",
        "betas",
        "something_new",
    ]


def test_a_claude_code_request_decodes_completely() -> None:
    b = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "stream": True,
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc"},
            {
                "type": "text",
                "text": "You are Claude Code.",
                "cache_control": {"type": "ephemeral"},
            },
        ],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "ls", "cache_control": {"type": "ephemeral"}}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "run ls", "signature": "sig"},
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "Bash",
                        "input": {"command": "ls"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01",
                        "content": "a\nb",
                        "is_error": False,
                    }
                ],
            },
            # (right after a user turn, and last: where Claude Code places it)
            {"role": "system", "content": "Extra rules."},
        ],
        "tools": [
            {
                "name": "Bash",
                "description": "Run a command",
                "input_schema": {
                    "$schema": "http://json-schema.org/draft-07/schema#",
                    "type": "object",
                    "properties": {"command": {"type": "string"}},
                },
            }
        ],
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": []},
        "metadata": {"user_id": "user_abc_account_def_session_ghi"},
    }
    r, report = decode_req(b)
    assert [t.text for t in r.system] == ["x-anthropic-billing-header: cc", "You are Claude Code."]
    assert [m.role for m in r.messages] == ["user", "assistant", "tool", "system"]
    assert r.messages[3].content == [c.Text(text="Extra rules.")]
    assert r.messages[2].content == [
        c.ToolResult(call_id="toolu_01", content=[c.Text(text="a\nb")])
    ]
    assert r.reasoning == c.ReasoningConfig(enabled=True, effort="high")
    assert r.user == "user_abc_account_def_session_ghi"
    assert r.stream is True
    assert report.dropped == ["context_management"]


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"max_tokens": "many"}, "max_tokens"),
        ({"temperature": "hot"}, "temperature"),
        ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages[0].content[0]"),
        ({"thinking": {"type": "sometimes"}}, "thinking.type"),
        ({"output_config": {"effort": "ultra"}}, "output_config.effort"),
    ],
)
def test_wrong_types_are_400_naming_the_field(patch: dict[str, Any], path: str) -> None:
    err = _raises_400(body(**patch))
    assert err.param == path
    assert f"`$.{path}`" in err.message


@pytest.mark.parametrize("raw", [b"", b"{", b"[]", b'"x"', b'{"model": "\xff"}', b"\x00\x01"])
def test_invalid_json_or_non_object_bodies_are_400(raw: bytes) -> None:
    _raises_400(raw)


# The empty-text check runs inside the turn's own pass over its blocks; the error the
# API names first is still the empty text block, wherever it is in the message.
_TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "sh", "input": {}}
_TOOL_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
_BAD_IMAGE = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/bmp", "data": "Qk0="},
}


@pytest.mark.parametrize(
    ("role", "blocks", "param"),
    [
        # an error in an earlier block gives way to a later empty text block
        ("user", [_TOOL_USE, {"type": "text", "text": ""}], "messages[0].content[1].text"),
        ("user", [_BAD_IMAGE, {"type": "text", "text": ""}], "messages[0].content[1].text"),
        ("assistant", [_TOOL_RESULT, {"type": "text", "text": ""}], "messages[1].content[1].text"),
        # an empty text block before the other error is named as before
        ("user", [{"type": "text", "text": ""}, _TOOL_USE], "messages[0].content[0].text"),
        # without an empty text block, the other error is the one named
        ("user", [_TOOL_USE, {"type": "text", "text": "x"}], "messages[0].content[0].type"),
        (
            "user",
            [{"type": "text", "text": "x"}, _BAD_IMAGE],
            "messages[0].content[1].source.media_type",
        ),
        # an assistant turn's blocks are not counted: the error looks its position up
        ("assistant", [{"type": "text", "text": "x"}, _TOOL_RESULT], "messages[1].content[1].type"),
        (
            "assistant",
            [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}, _BAD_IMAGE],
            "messages[1].content[2].source.media_type",
        ),
        (
            "assistant",
            [{"type": "text", "text": "x"}, {"type": "text", "text": ""}],
            "messages[1].content[1].text",
        ),
    ],
)
def test_an_empty_text_block_is_the_error_named_first(
    role: str, blocks: list[dict[str, Any]], param: str
) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": blocks}]
    if role == "assistant":
        messages = [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": blocks},
            {"role": "user", "content": "go on"},
        ]
    error = _raises_400({"model": "m", "max_tokens": 10, "messages": messages})
    assert error.param == param


def _use(n: int) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n}", "name": "sh", "input": {}}


def _result(n: int) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "ok"}


@pytest.mark.parametrize(
    ("calls", "answer", "missing"),
    [
        ([_use(1)], "thanks", "toolu_1"),  # the short form answers nothing
        ([_use(1)], [{"type": "text", "text": "x"}], "toolu_1"),
        ([_use(1)], [_result(2)], "toolu_1"),
        ([_use(1), _use(2)], [_result(2)], "toolu_1"),
        ([_use(1), _use(2), _use(3)], [_result(2)], "toolu_1, toolu_3"),
    ],
)
def test_a_tool_use_without_its_result_in_the_next_message_is_rejected(
    calls: list[dict[str, Any]], answer: Any, missing: str
) -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": calls},
        {"role": "user", "content": answer},
    ]
    error = _raises_400({"model": "m", "max_tokens": 10, "messages": messages})
    assert error.param == "messages.2"
    assert f"immediately after: {missing}. Each" in str(error)


@pytest.mark.parametrize(
    ("calls", "answer"),
    [
        ([_use(1)], [_result(1)]),
        ([_use(1)], [{"type": "text", "text": "first"}, _result(1)]),  # not first: answered
        ([_use(1), _use(2)], [_result(2), _result(1)]),
    ],
)
def test_answered_tool_uses_and_a_trailing_prefill_pass(
    calls: list[dict[str, Any]], answer: list[dict[str, Any]]
) -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": calls},
        {"role": "user", "content": answer},
        {"role": "assistant", "content": [_use(9)]},  # a prefill: nothing follows it yet
    ]
    raw = json.dumps({"model": "m", "max_tokens": 10, "messages": messages}).encode()
    request = CODEC.decode_request(raw, TranslationReport())
    called = [p.id for p in request.messages[1].content if isinstance(p, c.ToolCall)]
    assert called == [x["id"] for x in calls]
