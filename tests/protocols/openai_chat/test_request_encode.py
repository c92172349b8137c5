"""Upstream request encode: canonical request -> Chat Completions body."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.openai_chat import CODEC
from tests.helpers.schemas import plain_request

from ._util import req

USER = c.Message(role="user", content=[c.Text(text="hi")])


def enc(
    r: c.Request, options: UpstreamOptions | None = None, lossy: bool = False
) -> tuple[dict[str, Any], TranslationReport]:
    report = TranslationReport(lossy)
    out = json.loads(CODEC.encode_request(r, report, options or UpstreamOptions()))
    return out, report


def test_upstream_system_is_one_first_message_string() -> None:
    """Several parts are joined by a blank line, as Responses ``instructions`` are: many
    Chat-compatible servers reject a content array in a system message (issue 17)."""
    one, _ = enc(req(system=[c.Text(text="S")]))
    assert one["messages"][0] == {"role": "system", "content": "S"}
    two, _ = enc(req(system=[c.Text(text="A"), c.Text(text=""), c.Text(text="B")]))
    assert two["messages"][0] == {"role": "system", "content": "A\n\nB"}
    none, _ = enc(req())
    assert none["messages"] == [{"role": "user", "content": "hi"}]


def test_upstream_user_parts_become_text_image_url_and_file_parts() -> None:
    out, report = enc(
        req(
            messages=[
                c.Message(
                    role="user",
                    content=[
                        c.Text(text="look"),
                        c.Image(data="QUJD", media_type="image/png", detail="low"),
                        c.Image(url="https://x.test/a.png"),
                        c.File(data="JVBE", media_type="application/pdf", filename="a.pdf"),
                        c.File(file_id="file-1"),
                        c.File(text="plain document"),
                    ],
                )
            ]
        )
    )
    assert out["messages"][0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
        {
            "type": "file",
            "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"},
        },
        {"type": "file", "file": {"file_id": "file-1"}},
        {"type": "text", "text": "plain document"},
    ]
    assert report.dropped == []


def test_upstream_document_by_url_is_rejected_and_dropped_in_lossy_mode() -> None:
    r = req(
        messages=[
            c.Message(role="user", content=[c.Text(text="x"), c.File(url="https://x.test/a.pdf")])
        ]
    )
    with pytest.raises(ProxyError) as ei:
        enc(r)
    assert ei.value.status == 400 and "url" in (ei.value.param or "")
    out, report = enc(r, lossy=True)
    assert out["messages"][0]["content"] == "x"
    assert report.dropped == ["messages[0].content[1].url"]


def test_upstream_assistant_text_is_joined_refusal_is_a_field_and_tool_calls_follow() -> None:
    out, _ = enc(
        req(
            messages=[
                USER,
                c.Message(
                    role="assistant",
                    content=[
                        c.Text(text="a"),
                        c.Text(text="b"),
                        c.Refusal(text="no"),
                        c.ToolCall(id="call_1", name="f", arguments='{"x":1}'),
                    ],
                ),
            ]
        )
    )
    assert out["messages"][1] == {
        "role": "assistant",
        "content": "ab",
        "refusal": "no",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
        ],
    }


def test_upstream_assistant_with_only_tool_calls_has_null_content() -> None:
    out, _ = enc(
        req(messages=[USER, c.Message(role="assistant", content=[c.ToolCall(id="t", name="f")])])
    )
    assert out["messages"][1]["content"] is None
    assert out["messages"][1]["tool_calls"][0]["function"] == {"name": "f", "arguments": ""}


def test_upstream_custom_tool_call_is_a_custom_tool_call() -> None:
    out, _ = enc(
        req(
            messages=[
                USER,
                c.Message(
                    role="assistant",
                    content=[c.ToolCall(id="t", name="p", arguments="raw", kind="custom")],
                ),
            ]
        )
    )
    assert out["messages"][1]["tool_calls"] == [
        {"id": "t", "type": "custom", "custom": {"name": "p", "input": "raw"}}
    ]


def test_upstream_reasoning_is_dropped_and_reported_unless_echo_reasoning_content() -> None:
    r = req(
        messages=[
            USER,
            c.Message(role="assistant", content=[c.Reasoning(text="think"), c.Text(text="a")]),
        ]
    )
    out, report = enc(r)
    assert out["messages"][1] == {"role": "assistant", "content": "a"}
    assert report.dropped == ["assistant.reasoning"]
    out, report = enc(r, UpstreamOptions(echo_reasoning_content=True))
    assert out["messages"][1] == {"role": "assistant", "content": "a", "reasoning_content": "think"}
    assert report.dropped == []


def test_upstream_opaque_reasoning_tokens_are_always_dropped_and_reported() -> None:
    r = req(
        messages=[
            USER,
            c.Message(
                role="assistant",
                content=[
                    c.Reasoning(text="t", signature="sig"),
                    c.Reasoning(redacted="blob"),
                    c.Reasoning(encrypted_content="enc"),
                    c.Text(text="a"),
                ],
            ),
        ]
    )
    out, report = enc(r, UpstreamOptions(echo_reasoning_content=True))
    assert out["messages"][1] == {"role": "assistant", "content": "a", "reasoning_content": "t"}
    assert set(report.dropped) == {
        "assistant.reasoning.signature",
        "assistant.reasoning.redacted",
        "assistant.reasoning.encrypted_content",
    }
    assert "sig" not in json.dumps(out) and "blob" not in json.dumps(out)


def test_upstream_tool_results_are_one_tool_message_each_with_text_joined() -> None:
    out, report = enc(
        req(
            messages=[
                USER,
                c.Message(
                    role="assistant",
                    content=[c.ToolCall(id="a", name="f"), c.ToolCall(id="b", name="g")],
                ),
                c.Message(
                    role="tool",
                    content=[
                        c.ToolResult(call_id="a", content=[c.Text(text="x"), c.Text(text="y")]),
                        c.ToolResult(call_id="b", content=[], is_error=True),
                    ],
                ),
            ]
        )
    )
    assert out["messages"][2:] == [
        {"role": "tool", "tool_call_id": "a", "content": "xy"},
        {"role": "tool", "tool_call_id": "b", "content": ""},
    ]
    assert report.dropped == ["tool_result.is_error"]


def test_upstream_tool_result_images_ride_in_a_following_user_message() -> None:
    out, report = enc(
        req(
            messages=[
                USER,
                c.Message(
                    role="assistant",
                    content=[c.ToolCall(id="a", name="shot"), c.ToolCall(id="b", name="f")],
                ),
                c.Message(
                    role="tool",
                    content=[
                        c.ToolResult(
                            call_id="a",
                            content=[
                                c.Text(text="see"),
                                c.Image(data="QUJD", media_type="image/png"),
                            ],
                        ),
                        c.ToolResult(call_id="b", content=[c.Text(text="ok")]),
                    ],
                ),
            ]
        )
    )
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "tool", "tool", "user"]
    assert out["messages"][2] == {"role": "tool", "tool_call_id": "a", "content": "see"}
    carried = out["messages"][4]["content"]
    assert carried[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}
    assert "a" in carried[0]["text"]
    assert report.dropped == []


def test_upstream_tool_results_inside_a_user_turn_come_first_as_tool_messages() -> None:
    out, _ = enc(
        req(
            messages=[
                USER,
                c.Message(role="assistant", content=[c.ToolCall(id="a", name="f")]),
                c.Message(
                    role="user",
                    content=[
                        c.ToolResult(call_id="a", content=[c.Text(text="r")]),
                        c.Text(text="and"),
                    ],
                ),
            ]
        )
    )
    assert out["messages"][2:] == [
        {"role": "tool", "tool_call_id": "a", "content": "r"},
        {"role": "user", "content": "and"},
    ]


def test_upstream_tools_are_function_and_custom_and_hosted_tools_are_dropped() -> None:
    fmt = {"type": "grammar", "syntax": "lark", "definition": "start: /x/"}
    out, report = enc(
        req(
            tools=[
                c.Tool(name="f", description="d", parameters={"type": "object"}, strict=True),
                c.Tool(name="p", kind="custom", description="patch", format=fmt),
            ],
            hosted_tools=[
                c.HostedTool(
                    protocol="openai_responses", type="file_search", raw={"type": "file_search"}
                )
            ],
        )
    )
    assert out["tools"] == [
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
            "custom": {
                "name": "p",
                "description": "patch",
                "format": {
                    "type": "grammar",
                    "grammar": {"syntax": "lark", "definition": "start: /x/"},
                },
            },
        },
    ]
    assert report.dropped == ["tools.file_search"]


@pytest.mark.parametrize(
    ("canonical_format", "chat_format"),
    [
        (
            {"type": "grammar", "syntax": "regex", "definition": "\\d+"},
            {"type": "grammar", "grammar": {"syntax": "regex", "definition": "\\d+"}},
        ),
        ({"type": "text"}, {"type": "text"}),
    ],
)
def test_upstream_custom_tool_format_is_sent_in_chats_nested_grammar_shape(
    canonical_format: dict[str, Any], chat_format: dict[str, Any]
) -> None:
    out, _ = enc(req(tools=[c.Tool(name="p", kind="custom", format=canonical_format)]))
    assert out["tools"][0]["custom"]["format"] == chat_format


def test_upstream_tool_choice_naming_a_dropped_hosted_tool_is_dropped_and_reported() -> None:
    out, report = enc(
        req(
            tools=[c.Tool(name="f")],
            hosted_tools=[
                c.HostedTool(
                    protocol="anthropic_messages",
                    type="bash_20250124",
                    raw={"type": "bash_20250124", "name": "bash"},
                )
            ],
            tool_choice=c.ToolChoice(mode="tool", name="bash"),
        )
    )
    assert [t["function"]["name"] for t in out["tools"]] == ["f"]
    assert "tool_choice" not in out
    assert report.dropped == ["tools.bash_20250124", "tool_choice"]


def test_upstream_tool_choice_and_parallel_tool_calls_only_alongside_tools() -> None:
    out, report = enc(req(tool_choice=c.ToolChoice(mode="required"), parallel_tool_calls=False))
    assert "tool_choice" not in out and "parallel_tool_calls" not in out and "tools" not in out
    assert report.dropped == ["tool_choice"]
    out, report = enc(req(tool_choice=c.ToolChoice(mode="auto")))
    assert "tool_choice" not in out and report.dropped == []
    out, _ = enc(
        req(
            tools=[c.Tool(name="f")],
            tool_choice=c.ToolChoice(mode="required"),
            parallel_tool_calls=False,
        )
    )
    assert out["tool_choice"] == "required" and out["parallel_tool_calls"] is False


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (c.ToolChoice(mode="auto"), "auto"),
        (c.ToolChoice(mode="none"), "none"),
        (c.ToolChoice(mode="required"), "required"),
        (c.ToolChoice(mode="tool", name="f"), {"type": "function", "function": {"name": "f"}}),
        (
            c.ToolChoice(mode="tool", name="p", kind="custom"),
            {"type": "custom", "custom": {"name": "p"}},
        ),
    ],
)
def test_upstream_tool_choice_forms(choice: c.ToolChoice, expected: Any) -> None:
    out, _ = enc(req(tools=[c.Tool(name="f"), c.Tool(name="p", kind="custom")], tool_choice=choice))
    assert out["tool_choice"] == expected


@pytest.mark.parametrize("field", ["max_completion_tokens", "max_tokens"])
def test_upstream_max_tokens_goes_under_the_configured_field(field: str) -> None:
    out, _ = enc(req(max_tokens=123), UpstreamOptions(chat_max_tokens_field=field))
    assert out[field] == 123
    other = {"max_completion_tokens", "max_tokens"} - {field}
    assert not other & set(out)


def test_upstream_sampling_and_bookkeeping_fields_are_forwarded() -> None:
    out, report = enc(
        req(
            temperature=0.2,
            top_p=0.8,
            stop=["a", "b"],
            n=1,
            user="u",
            metadata={"k": "v"},
            service_tier="priority",
            prompt_cache_key="pk",
        )
    )
    assert report.dropped == []
    for k, v in {
        "temperature": 0.2,
        "top_p": 0.8,
        "stop": ["a", "b"],
        "n": 1,
        "user": "u",
        "metadata": {"k": "v"},
        "service_tier": "priority",
        "prompt_cache_key": "pk",
    }.items():
        assert out[k] == v, k


@pytest.mark.parametrize("asked", [{"logprobs": True}, {"top_logprobs": 3}])
def test_upstream_logprobs_are_never_asked_for(asked: dict[str, Any]) -> None:
    """Issue 17 defect 3: the Chat decoders do not translate logprobs, so asking for them
    is a 400 (lossy: dropped, reported), never a request whose answer then fails."""
    (name,) = asked
    with pytest.raises(ProxyError) as e:
        enc(req(**asked))
    assert e.value.status == 400 and e.value.param == name
    out, report = enc(req(**asked), lossy=True)
    assert "logprobs" not in out and "top_logprobs" not in out and report.dropped == [name]


def test_upstream_verbosity_is_carried() -> None:
    out, report = enc(req(verbosity="high"))
    assert out["verbosity"] == "high" and report.dropped == []


def test_upstream_user_over_128_characters_becomes_a_stable_sha256_id() -> None:
    long_id = "user_" + "a" * 64 + "_account_" + "b" * 36 + "_session_" + "c" * 36
    out, report = enc(req(user=long_id))
    assert out["user"].startswith("sha256:") and len(out["user"]) == 71
    assert out["user"] == enc(req(user=long_id))[0]["user"]  # stable
    assert out["user"] != enc(req(user=long_id + "x"))[0]["user"]
    assert report.dropped == []
    exact = "u" * 128
    assert enc(req(user=exact))[0]["user"] == exact


def test_upstream_service_tier_outside_openai_vocabulary_is_dropped() -> None:
    out, report = enc(req(service_tier="standard_only"))
    assert "service_tier" not in out and report.dropped == ["service_tier"]


def test_upstream_response_format_json_schema_defaults_its_name() -> None:
    out, _ = enc(
        req(
            response_format=c.ResponseFormat(
                type="json_schema", schema={"type": "object"}, strict=True
            )
        )
    )
    assert out["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": {"type": "object"}, "strict": True},
    }
    out, _ = enc(req(response_format=c.ResponseFormat(type="json_object")))
    assert out["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(
    ("cfg", "effort"),
    [
        (c.ReasoningConfig(effort="minimal"), "minimal"),
        (c.ReasoningConfig(effort="xhigh"), "xhigh"),
        (c.ReasoningConfig(effort="max"), "xhigh"),
        (c.ReasoningConfig(budget_tokens=1024), "low"),
        (c.ReasoningConfig(budget_tokens=2048), "medium"),
        (c.ReasoningConfig(budget_tokens=8191), "medium"),
        (c.ReasoningConfig(budget_tokens=8192), "high"),
        (c.ReasoningConfig(enabled=True), None),
        (c.ReasoningConfig(enabled=False), None),
    ],
)
def test_upstream_reasoning_effort_from_effort_or_budget_bucket(
    cfg: c.ReasoningConfig, effort: str | None
) -> None:
    out, _ = enc(req(reasoning=cfg))
    assert out.get("reasoning_effort") == effort


def test_upstream_adaptive_thinking_without_effort_sends_no_reasoning_effort() -> None:
    """Anthropic ``thinking: adaptive`` alone: the model decides, so nothing is sent
    (and nothing is lost: no report)."""
    out, report = enc(req(reasoning=c.ReasoningConfig(enabled=True)))
    assert "reasoning_effort" not in out and report.dropped == []


def test_upstream_disabled_thinking_sends_no_effort_none_and_reports_reasoning() -> None:
    """Anthropic ``thinking: disabled`` decodes as effort ``none`` with ``enabled=False``;
    older reasoning models reject effort ``none``, so no reasoning_effort is sent."""
    out, report = enc(req(reasoning=c.ReasoningConfig(enabled=False, effort="none")))
    assert "reasoning_effort" not in out and report.dropped == ["reasoning"]
    out, report = enc(req(reasoning=c.ReasoningConfig(effort="none")))  # Chat/Responses ask
    assert out["reasoning_effort"] == "none" and report.dropped == []


def test_upstream_top_k_is_dropped_and_stateful_fields_are_rejected() -> None:
    out, report = enc(req(top_k=5))
    assert "top_k" not in out and report.dropped == ["top_k"]
    for field, value in (("previous_response_id", "resp_1"), ("background", True)):
        with pytest.raises(ProxyError) as ei:
            enc(req(**{field: value}))
        assert ei.value.param == field
        _, report = enc(req(**{field: value}), lossy=True)
        assert report.dropped == [field]


def test_upstream_stream_always_asks_for_usage() -> None:
    out, _ = enc(req(stream=True, include_usage=False))
    assert out["stream"] is True and out["stream_options"] == {"include_usage": True}
    out, _ = enc(req(stream=False))
    assert "stream" not in out and "stream_options" not in out


def test_upstream_cache_control_is_dropped_and_reported() -> None:
    out, report = enc(
        req(
            system=[c.Text(text="S", cache_control={"type": "ephemeral"})],
            messages=[
                c.Message(
                    role="user", content=[c.Text(text="q", cache_control={"type": "ephemeral"})]
                )
            ],
        )
    )
    assert "cache_control" not in json.dumps(out)
    assert report.dropped == ["cache_control"]


def test_upstream_request_round_trips_through_the_client_decoder() -> None:
    original = req(
        system=[c.Text(text="S")],
        messages=[
            USER,
            c.Message(
                role="assistant",
                content=[c.Text(text="a"), c.ToolCall(id="t", name="f", arguments="{}")],
            ),
            c.Message(role="tool", content=[c.ToolResult(call_id="t", content=[c.Text(text="r")])]),
            c.Message(role="user", content=[c.Image(url="https://x.test/i.png", detail="auto")]),
        ],
        tools=[c.Tool(name="f", parameters={"type": "object"})],
        tool_choice=c.ToolChoice(mode="tool", name="f"),
        max_tokens=10,
        stop=["z"],
        stream=True,
        include_usage=True,
        reasoning=c.ReasoningConfig(effort="low"),
        response_format=c.ResponseFormat(type="json_schema", name="n", schema={"type": "object"}),
        implicit_caching=True,  # what a Chat client's request always says
    )
    body = CODEC.encode_request(original, TranslationReport(), UpstreamOptions())
    back = CODEC.decode_request(body, TranslationReport())
    assert plain_request(back) == original
