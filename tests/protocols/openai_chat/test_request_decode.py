"""Client request decode: Chat Completions body -> canonical request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.openai_chat import CODEC
from tests.helpers.schemas import plain_tools

from ._util import decode_req


def body(*messages: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "messages": list(messages) or [{"role": "user", "content": "hi"}],
        **kw,
    }


def invalid(b: dict[str, Any] | bytes) -> ProxyError:
    raw = b if isinstance(b, bytes) else __import__("json").dumps(b).encode()
    with pytest.raises(ProxyError) as ei:
        CODEC.decode_request(raw, TranslationReport())
    assert ei.value.status == 400
    assert ei.value.kind == "invalid_request"
    return ei.value


# ------------------------------------------------------------------ system / developer


def test_chat_system_and_developer_messages_anywhere_are_hoisted_into_system_in_order() -> None:
    r, _ = decode_req(
        body(
            {"role": "system", "content": "You are concise."},
            {"role": "user", "content": "q1"},
            {"role": "developer", "content": "Prefer exact answers."},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"},
        )
    )
    assert [t.text for t in r.system] == ["You are concise.", "Prefer exact answers."]
    assert [m.role for m in r.messages] == ["user", "assistant", "user"]


def test_chat_system_text_parts_keep_their_boundaries() -> None:
    r, _ = decode_req(
        body(
            {
                "role": "system",
                "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}],
            },
            {"role": "user", "content": "hi"},
        )
    )
    assert [t.text for t in r.system] == ["A", "B"]


# ------------------------------------------------------------------------------ user


def test_chat_user_string_and_text_parts_become_text() -> None:
    r, _ = decode_req(
        body(
            {"role": "user", "content": "plain"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}],
            },
        )
    )
    assert r.messages[0].content == [c.Text(text="plain")]
    assert r.messages[1].content == [c.Text(text="x"), c.Text(text="y")]


def test_chat_user_image_data_url_becomes_inline_image_with_media_type() -> None:
    r, _ = decode_req(
        body(
            {
                "role": "user",
                "content": [
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/jpeg;base64,QUJD", "detail": "low"},
                    }
                ],
            }
        )
    )
    assert r.messages[0].content == [c.Image(data="QUJD", media_type="image/jpeg", detail="low")]


def test_chat_user_image_url_keeps_url_and_detail() -> None:
    r, _ = decode_req(
        body(
            {
                "role": "user",
                "content": [
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://x.test/a.png", "detail": "high"},
                    }
                ],
            }
        )
    )
    assert r.messages[0].content == [c.Image(url="https://x.test/a.png", detail="high")]


def test_chat_user_file_part_becomes_file_from_data_url_raw_base64_or_file_id() -> None:
    r, _ = decode_req(
        body(
            {
                "role": "user",
                "content": [
                    {
                        "type": "file",
                        "file": {
                            "file_data": "data:application/pdf;base64,JVBE",
                            "filename": "a.pdf",
                        },
                    },
                    {"type": "file", "file": {"file_data": "JVBE", "filename": "b.pdf"}},
                    {"type": "file", "file": {"file_id": "file-123"}},
                ],
            }
        )
    )
    assert r.messages[0].content == [
        c.File(data="JVBE", media_type="application/pdf", filename="a.pdf"),
        c.File(data="JVBE", media_type="application/pdf", filename="b.pdf"),
        c.File(file_id="file-123"),
    ]


def test_chat_user_file_part_without_data_or_id_is_rejected() -> None:
    err = invalid(
        body({"role": "user", "content": [{"type": "file", "file": {"filename": "a.pdf"}}]})
    )
    assert "messages[0].content[0]" in err.message


def test_chat_user_input_audio_part_is_rejected_naming_the_path_never_dropped() -> None:
    err = invalid(
        body(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "listen"},
                    {"type": "input_audio", "input_audio": {"data": "AAA", "format": "wav"}},
                ],
            }
        )
    )
    assert "unsupported user content part" in err.message
    assert "messages[0].content[1]" in err.message
    assert err.param == "messages[0].content[1].type"


def test_chat_user_unknown_content_part_type_is_rejected_naming_the_path() -> None:
    err = invalid(body({"role": "user", "content": [{"type": "video", "video": {}}]}))
    assert "messages[0].content[0].type" in err.message


def test_chat_user_empty_content_list_is_rejected() -> None:
    err = invalid(body({"role": "user", "content": []}))
    assert err.param == "messages[0].content"


# ------------------------------------------------------------------------- assistant


def test_chat_assistant_turn_maps_reasoning_first_then_text_refusal_and_tool_calls() -> None:
    r, _ = decode_req(
        body(
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "I will look."},
                    {"type": "text", "text": " Now."},
                ],
                "reasoning_content": "think",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"q":1}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "found"},
        )
    )
    assert r.messages[1].content == [
        c.Reasoning(text="think"),
        c.Text(text="I will look."),
        c.Text(text=" Now."),
        c.ToolCall(id="call_1", name="lookup", arguments='{"q":1}'),
    ]


def test_chat_assistant_refusal_field_and_refusal_part_become_refusal() -> None:
    r, _ = decode_req(
        body(
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "refusal": "No."},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "Still no."}]},
        )
    )
    assert r.messages[1].content == [c.Refusal(text="No.")]
    assert r.messages[3].content == [c.Refusal(text="Still no.")]


def test_chat_assistant_tool_call_arguments_are_kept_verbatim() -> None:
    raw = '{ "a" : [1, 2] ,"b":"\\u00e9"}'
    r, _ = decode_req(
        body(
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": raw}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        )
    )
    call = r.messages[1].content[0]
    assert isinstance(call, c.ToolCall) and call.arguments == raw


def test_chat_assistant_custom_tool_call_becomes_custom_tool_call() -> None:
    r, _ = decode_req(
        body(
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "c9",
                        "type": "custom",
                        "custom": {"name": "apply_patch", "input": "*** Begin"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c9", "content": "ok"},
        )
    )
    assert r.messages[1].content == [
        c.ToolCall(id="c9", name="apply_patch", arguments="*** Begin", kind="custom")
    ]
    result = r.messages[2].content[0]
    assert isinstance(result, c.ToolResult) and result.kind == "custom"


def test_chat_assistant_reasoning_extension_field_alias_is_accepted() -> None:
    r, _ = decode_req(
        body(
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "reasoning": "why"},
        )
    )
    assert r.messages[1].content == [c.Reasoning(text="why"), c.Text(text="a")]


def test_chat_assistant_legacy_function_call_is_rejected() -> None:
    err = invalid(
        body(
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "f", "arguments": "{}"},
            },
        )
    )
    assert err.param == "messages[1].function_call"


# ------------------------------------------------------------------------------ tools


def test_chat_tool_results_become_one_tool_turn_of_tool_result_blocks() -> None:
    r, _ = decode_req(
        body(
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "ra"},
            {
                "role": "tool",
                "tool_call_id": "b",
                "content": [{"type": "text", "text": "r"}, {"type": "text", "text": "b"}],
            },
            {"role": "user", "content": "next"},
        )
    )
    assert [m.role for m in r.messages] == ["user", "assistant", "tool", "user"]
    assert r.messages[2].content == [
        c.ToolResult(call_id="a", content=[c.Text(text="ra")]),
        c.ToolResult(call_id="b", content=[c.Text(text="r"), c.Text(text="b")]),
    ]


def test_chat_function_role_message_is_rejected_naming_the_role() -> None:
    err = invalid(
        body(
            {"role": "user", "content": "q"}, {"role": "function", "name": "f", "content": "result"}
        )
    )
    assert err.param == "messages[1].role"
    assert "tool_call_id" in err.message


def test_chat_function_and_custom_tool_definitions_map_to_tools() -> None:
    grammar = {"type": "grammar", "grammar": {"syntax": "lark", "definition": "start: /.+/"}}
    r, _ = decode_req(
        body(
            tools=[
                {
                    "type": "function",
                    "function": {
                        "name": "f",
                        "description": "d",
                        "parameters": {"type": "object"},
                        "strict": True,
                    },
                },
                {
                    "type": "custom",
                    "custom": {"name": "apply_patch", "description": "patch", "format": grammar},
                },
            ]
        )
    )
    assert plain_tools(r.tools) == [
        c.Tool(name="f", description="d", parameters={"type": "object"}, strict=True),
        c.Tool(
            name="apply_patch",
            kind="custom",
            description="patch",
            format={"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
        ),
    ]


@pytest.mark.parametrize(
    ("chat_format", "canonical_format"),
    [
        (
            {"type": "grammar", "grammar": {"syntax": "regex", "definition": "\\d+"}},
            {"type": "grammar", "syntax": "regex", "definition": "\\d+"},
        ),
        ({"type": "text"}, {"type": "text"}),
    ],
)
def test_chat_custom_tool_grammar_format_becomes_the_flat_canonical_responses_shape(
    chat_format: dict[str, Any], canonical_format: dict[str, Any]
) -> None:
    r, _ = decode_req(
        body(tools=[{"type": "custom", "custom": {"name": "p", "format": chat_format}}])
    )
    assert r.tools[0].format == canonical_format


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", c.ToolChoice(mode="auto")),
        ("none", c.ToolChoice(mode="none")),
        ("required", c.ToolChoice(mode="required")),
        ({"type": "function", "function": {"name": "f"}}, c.ToolChoice(mode="tool", name="f")),
        (
            {"type": "custom", "custom": {"name": "p"}},
            c.ToolChoice(mode="tool", name="p", kind="custom"),
        ),
    ],
)
def test_chat_tool_choice_maps_to_canonical_tool_choice(
    choice: Any, expected: c.ToolChoice
) -> None:
    tools = [
        {"type": "function", "function": {"name": "f"}},
        {"type": "custom", "custom": {"name": "p"}},
    ]
    r, report = decode_req(body(tools=tools, tool_choice=choice))
    assert r.tool_choice == expected
    assert report.dropped == []


@pytest.mark.parametrize(("mode", "expected"), [("required", "required"), ("auto", "auto")])
def test_chat_allowed_tools_choice_becomes_its_mode_and_is_reported_lossy(
    mode: str, expected: str
) -> None:
    r, report = decode_req(
        body(
            tools=[{"type": "function", "function": {"name": "f"}}],
            tool_choice={
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": mode,
                    "tools": [{"type": "function", "function": {"name": "f"}}],
                },
            },
        )
    )
    assert r.tool_choice == c.ToolChoice(mode=expected)  # type: ignore[arg-type]
    assert "tool_choice.allowed_tools" in report.dropped


def test_chat_legacy_functions_and_function_call_translate_to_tools_and_tool_choice() -> None:
    r, _ = decode_req(
        body(
            functions=[{"name": "f", "description": "d", "parameters": {"type": "object"}}],
            function_call={"name": "f"},
        )
    )
    assert r.tools == [c.Tool(name="f", description="d", parameters={"type": "object"})]
    assert r.tool_choice == c.ToolChoice(mode="tool", name="f")
    r2, _ = decode_req(body(functions=[{"name": "f"}], function_call="none"))
    assert r2.tool_choice == c.ToolChoice(mode="none")


# ---------------------------------------------------------------------- scalar fields


def test_chat_request_fields_map_to_canonical_fields() -> None:
    r, report = decode_req(
        body(
            parallel_tool_calls=False,
            max_completion_tokens=100,
            max_tokens=50,
            temperature=0.5,
            top_p=0.9,
            stop=["x", "y"],
            stream=True,
            stream_options={"include_usage": True},
            reasoning_effort="high",
            user="u1",
            metadata={"k": "v"},
            service_tier="flex",
            prompt_cache_key="pk",
            n=2,
            logprobs=True,
            top_logprobs=3,
        )
    )
    assert report.dropped == []
    assert (r.parallel_tool_calls, r.max_tokens, r.temperature, r.top_p) == (False, 100, 0.5, 0.9)
    assert r.stop == ["x", "y"]
    assert r.stream is True and r.include_usage is True
    assert r.reasoning == c.ReasoningConfig(effort="high")
    assert (r.user, r.metadata, r.service_tier, r.prompt_cache_key) == (
        "u1",
        {"k": "v"},
        "flex",
        "pk",
    )
    assert (r.n, r.logprobs, r.top_logprobs) == (2, True, 3)


def test_chat_max_tokens_is_used_when_max_completion_tokens_is_absent() -> None:
    r, _ = decode_req(body(max_tokens=77))
    assert r.max_tokens == 77


def test_chat_stop_string_becomes_a_one_item_list() -> None:
    r, _ = decode_req(body(stop="END"))
    assert r.stop == ["END"]


def test_chat_safety_identifier_becomes_user() -> None:
    r, _ = decode_req(body(safety_identifier="sid"))
    assert r.user == "sid"


def test_chat_include_usage_is_false_without_stream_options() -> None:
    r, _ = decode_req(body(stream=True))
    assert r.include_usage is False


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ({"type": "text"}, c.ResponseFormat(type="text")),
        ({"type": "json_object"}, c.ResponseFormat(type="json_object")),
        (
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "L",
                    "schema": {"type": "object"},
                    "strict": True,
                    "description": "d",
                },
            },
            c.ResponseFormat(
                type="json_schema",
                name="L",
                schema={"type": "object"},
                strict=True,
                description="d",
            ),
        ),
    ],
)
def test_chat_response_format_maps_text_json_object_and_json_schema(
    fmt: Any, expected: c.ResponseFormat
) -> None:
    r, _ = decode_req(body(response_format=fmt))
    assert r.response_format == expected


def test_chat_fields_without_cross_protocol_meaning_are_dropped_and_reported() -> None:
    dropped = {
        "frequency_penalty": 0.1,
        "presence_penalty": 0.1,
        "logit_bias": {"1": 2},
        "seed": 4,
        "prediction": {"type": "content", "content": "x"},
        "store": False,
        "some_future_field": True,
    }
    r, report = decode_req(
        body(
            stream=True,
            stream_options={"include_usage": True, "include_obfuscation": False},
            **dropped,
        )
    )
    assert set(report.dropped) == set(dropped) | {"stream_options.include_obfuscation"}
    assert r.include_usage is True


def test_chat_text_only_modalities_is_the_default_and_needs_no_report() -> None:
    _, report = decode_req(body(modalities=["text"]))
    assert report.dropped == []


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    ],
)
def test_chat_audio_output_is_rejected_because_other_protocols_answer_only_in_text(
    fields: dict[str, Any], param: str
) -> None:
    with pytest.raises(ProxyError) as info:
        decode_req(body(**fields))
    assert info.value.status == 400 and info.value.param == param
    report = TranslationReport(lossy=True)
    CODEC.decode_request(json.dumps(body(**fields)).encode(), report)
    assert report.dropped == [param]


def test_chat_verbosity_is_carried_into_the_canonical_request() -> None:
    r, report = decode_req(body(verbosity="low"))
    assert r.verbosity == "low" and report.dropped == []


def test_chat_safety_identifier_wins_over_user_and_the_other_user_is_reported() -> None:
    r, report = decode_req(body(user="old", safety_identifier="new"))
    assert r.user == "new" and report.dropped == ["user"]
    r, report = decode_req(body(user="same", safety_identifier="same"))
    assert r.user == "same" and report.dropped == []
    r, report = decode_req(body(user="only"))
    assert r.user == "only" and report.dropped == []


# --------------------------------------------------------------------- bad requests


@pytest.mark.parametrize(
    ("b", "path"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"},
            "temperature",
        ),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"content": "x"}]}, "messages[0]"),
        ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages[0]"),
    ],
)
def test_chat_wrong_types_and_missing_fields_are_400_naming_the_field(
    b: dict[str, Any], path: str
) -> None:
    err = invalid(b)
    assert path in err.message
    assert err.param is not None and err.param.startswith(path)


@pytest.mark.parametrize("raw", [b"", b"{", b"[]", b"null", b"\xff\xfe", b'{"model": "\xff"}'])
def test_chat_invalid_json_body_is_400(raw: bytes) -> None:
    invalid(raw)


def test_chat_empty_messages_list_is_rejected() -> None:
    err = invalid({"model": "m", "messages": []})
    assert err.param == "messages"


def test_chat_invalid_tool_choice_string_is_rejected() -> None:
    err = invalid(body(tool_choice="sometimes"))
    assert err.param == "tool_choice"


# ------------------------------------------------------------------ real client shapes


def test_chat_shapes_real_clients_send_are_accepted() -> None:
    """null assistant content with tool calls, message names, cache_control on text parts,
    tool calls without an explicit type, tool content as text parts."""
    r, report = decode_req(
        body(
            {
                "role": "system",
                "content": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
            },
            {
                "role": "user",
                "name": "alice",
                "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "t", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "t", "content": [{"type": "text", "text": "ok"}]},
            {"role": "assistant", "content": ""},
        )
    )
    assert r.system == [c.Text(text="S", cache_control={"type": "ephemeral"})]
    assert r.messages[0].content == [c.Text(text="q", cache_control={"type": "ephemeral"})]
    assert r.messages[1].content == [c.ToolCall(id="t", name="f", arguments="{}")]
    assert r.messages[3].content == []
    assert report.dropped == ["messages.name"]
