"""Upstream request encode: canonical Request -> Anthropic Messages body."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from anthropic.types import MessageCreateParams  # noqa: F401  (documents the target shape)

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry
from proxai_asgi.errors import ProxyError
from tests.helpers import captures as cap

from ._util import decode_req, encode_req, req


def _user(*parts: c.Part) -> c.Message:
    return c.Message(role="user", content=list(parts))


def _assistant(*parts: c.Part) -> c.Message:
    return c.Message(role="assistant", content=list(parts))


def _tool(*parts: c.Part) -> c.Message:
    return c.Message(role="tool", content=list(parts))


def _raises_400(r: c.Request) -> ProxyError:
    with pytest.raises(ProxyError) as info:
        encode_req(r)
    assert info.value.status == 400
    return info.value


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


@pytest.mark.parametrize("name", cap.capture_names("anthropic_"))
def test_client_body_round_trips_through_canonical_to_the_same_upstream_body(name: str) -> None:
    raw = cap.load(name)["request"]["body"]
    r, _ = decode_req(raw)
    out, report = encode_req(r)
    assert report.dropped == []
    expected = dict(raw)
    if raw.get("stream") is False:
        del expected["stream"]  # false is the default; not sent
    if "output_config" in raw:  # an effort alone turns adaptive thinking on; xhigh -> max
        expected["thinking"] = {"type": "adaptive"}
        expected["output_config"] = {"effort": "max"}
    for m in (*expected["messages"], *out["messages"]):
        m["content"] = _blocks(m["content"])
    assert out == expected


def test_system_is_a_string_for_one_plain_text_and_blocks_otherwise() -> None:
    out, _ = encode_req(req(system=[c.Text(text="Be brief.")]))
    assert out["system"] == "Be brief."
    cc = {"type": "ephemeral"}
    out, _ = encode_req(req(system=[c.Text(text="A"), c.Text(text="B")]))
    assert out["system"] == [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]
    out, _ = encode_req(req(system=[c.Text(text="A", cache_control=cc)]))
    assert out["system"] == [{"type": "text", "text": "A", "cache_control": cc}]
    out, _ = encode_req(req(system=[c.Text(text="")]))
    assert "system" not in out


def test_parallel_tool_results_share_one_user_turn_right_after_the_assistant_turn() -> None:
    r = req(
        messages=[
            _user(c.Text(text="q")),
            _assistant(
                c.ToolCall(id="call_1", name="f", arguments='{"a":1}'),
                c.ToolCall(id="call_2", name="g", arguments=""),
            ),
            _tool(c.ToolResult(call_id="call_1", content=[c.Text(text="r1")])),
            _tool(c.ToolResult(call_id="call_2", content=[c.Text(text="r2")], is_error=True)),
            _user(c.Text(text="and now?")),
        ]
    )
    out, _ = encode_req(r)
    assert out["messages"] == [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": 1}},
                {"type": "tool_use", "id": "call_2", "name": "g", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "r1"},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "r2", "is_error": True},
                {"type": "text", "text": "and now?"},
            ],
        },
    ]


def test_tool_result_blocks_come_first_in_a_merged_user_turn() -> None:
    r = req(
        messages=[
            _assistant(c.ToolCall(id="t1", name="f", arguments="{}")),
            _user(c.Text(text="note")),
            _tool(c.ToolResult(call_id="t1", content=[c.Text(text="r")])),
        ]
    )
    out, _ = encode_req(r)
    assert [b["type"] for b in out["messages"][1]["content"]] == ["tool_result", "text"]


def test_tool_result_content_is_blocks_unless_a_single_text_and_omitted_when_empty() -> None:
    r = req(
        messages=[
            _assistant(c.ToolCall(id="t1", name="f"), c.ToolCall(id="t2", name="f")),
            _tool(
                c.ToolResult(
                    call_id="t1",
                    content=[c.Text(text="a"), c.Image(url="https://x/i.png")],
                ),
                c.ToolResult(call_id="t2", content=[c.Text(text="")]),
            ),
        ]
    )
    out, _ = encode_req(r)
    assert out["messages"][1]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "source": {"type": "url", "url": "https://x/i.png"}},
            ],
        },
        {"type": "tool_result", "tool_use_id": "t2"},
    ]


def test_assistant_text_skips_empty_text_and_refusal_becomes_text() -> None:
    r = req(
        messages=[
            _user(c.Text(text="q")),
            _assistant(c.Text(text=""), c.Refusal(text="I can't."), c.Text(text="ok")),
            _assistant(c.Text(text="")),
        ]
    )
    out, _ = encode_req(r)
    assert out["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "I can't."}, {"type": "text", "text": "ok"}],
    }
    assert len(out["messages"]) == 2


def test_tool_ids_are_made_safe_for_anthropic() -> None:
    r = req(
        messages=[
            _assistant(c.ToolCall(id="call:1/a", name="f", arguments="{}")),
            _tool(c.ToolResult(call_id="call:1/a", content=[c.Text(text="r")])),
        ]
    )
    out, _ = encode_req(r)
    assert out["messages"][0]["content"][0]["id"] == "call_1_a"
    assert out["messages"][1]["content"][0]["tool_use_id"] == "call_1_a"


def test_tool_ids_stay_safe_when_the_remembered_ids_are_cleared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The encoder remembers safe ids in a bounded cache; made tiny here, it turns over
    # several times within one request and every id still comes out cleaned.
    from proxai_asgi import bounded_cache
    from proxai_asgi import ids as ids_module
    from proxai_asgi.protocols.anthropic_messages import request as encoder

    tiny: bounded_cache.BoundedCache[str, str] = bounded_cache.BoundedCache(
        max_bytes=10_000, max_entries=2
    )
    monkeypatch.setattr(encoder, "_SAFE_IDS", tiny)
    monkeypatch.setattr(ids_module, "SAFE_IDS", tiny)
    messages: list[c.Message] = []
    for k in range(5):
        messages.append(_assistant(c.ToolCall(id=f"call:{k}", name="f", arguments="{}")))
        messages.append(_tool(c.ToolResult(call_id=f"call:{k}", content=[c.Text(text="r")])))
    out, _ = encode_req(req(messages=messages))
    ids = [b.get("id") or b.get("tool_use_id") for m in out["messages"] for b in m["content"]]
    assert ids == [f"call_{k}" for k in range(5) for _ in range(2)]
    assert len(tiny) <= 2


def test_the_error_of_a_part_after_others_names_its_position() -> None:
    # The usual parts are built without counting; an error looks its position up.
    bad = c.ToolCall(id="t2", name="f", arguments="[1]")
    first = c.ToolCall(id="t1", name="f", arguments="{}")
    r = req(messages=[_user(c.Text(text="go")), _assistant(c.Text(text="a"), first, bad)])
    assert _raises_400(r).param == "messages[1].content[2].arguments"
    image = c.Image(url="data:image/bmp;base64,Qk0=")
    r = req(messages=[_user(c.Text(text="see"), c.Text(text="this"), image)])
    assert _raises_400(r).param == "messages[0].content[2]"


@pytest.mark.parametrize("arguments", ['{"a": ', "[1, 2]", '"text"', "null"])
def test_tool_arguments_that_are_not_a_json_object_are_400_never_empty_input(
    arguments: str,
) -> None:
    err = _raises_400(req(messages=[_assistant(c.ToolCall(id="t", name="f", arguments=arguments))]))
    assert err.param == "messages[0].content[0].arguments"


def test_custom_tool_calls_results_definitions_and_choices_are_rejected() -> None:
    call = c.ToolCall(id="t", name="apply_patch", arguments="*** Begin", kind="custom")
    result = c.ToolResult(call_id="t", content=[c.Text(text="ok")], kind="custom")
    assert _raises_400(req(messages=[_assistant(call)])).param == "messages[0].content[0]"
    assert _raises_400(req(messages=[_tool(result)])).param == "messages[0].content[0]"
    tool = c.Tool(name="apply_patch", kind="custom", format={"type": "grammar"})
    assert _raises_400(req(tools=[tool])).param == "tools[0]"
    choice = c.ToolChoice(mode="tool", name="apply_patch", kind="custom")
    fn = c.Tool(name="f", parameters={"type": "object"})
    assert _raises_400(req(tools=[fn], tool_choice=choice)).param == "tool_choice"


def test_lossy_mode_drops_custom_tool_calls_with_their_results() -> None:
    r = req(
        messages=[
            _user(c.Text(text="q")),
            _assistant(c.Text(text="patching"), c.ToolCall(id="t", name="p", kind="custom")),
            _tool(c.ToolResult(call_id="t", content=[c.Text(text="ok")])),
            _user(c.Text(text="next")),
        ]
    )
    out, report = encode_req(r, lossy=True)
    assert out["messages"] == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "patching"},
        {"role": "user", "content": "next"},
    ]
    assert report.dropped == ["messages[1].content[1]"]


def test_reasoning_replays_only_with_an_anthropic_signature() -> None:
    """The encoder reads only the tokens Anthropic issues; a carrier still packed (the
    client's decoder restores the ones it recognises) is never sent as a signature."""
    packed = reasoning_carry.pack_tokens(c.Reasoning(signature="EvMC"), "t2")
    r = req(
        messages=[
            _user(c.Text(text="q")),
            _assistant(
                c.Reasoning(text="t1", signature="sig1"),
                c.Reasoning(redacted="red1"),
                c.Reasoning(text="t2", signature=packed),
                c.Reasoning(text="t2", encrypted_content=packed, item_id="rs_1"),
                c.Reasoning(text="openai", encrypted_content="gAAAA", item_id="rs_2"),
                c.Reasoning(text="gemini", thought_signature="c2lnbmVk"),
                c.Reasoning(text="chat reasoning_content"),
                c.Text(text="answer"),
            ),
        ]
    )
    out, report = encode_req(r)
    assert out["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "t1", "signature": "sig1"},
        {"type": "redacted_thinking", "data": "red1"},
        {"type": "text", "text": "answer"},
    ]
    assert report.dropped == ["reasoning"]


def test_images_url_base64_and_data_urls() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n....").decode()
    r = req(
        messages=[
            _user(
                c.Image(url="https://x/a.png", detail="high"),
                c.Image(data="abc", media_type="image/webp"),
                c.Image(url=f"data:image/jpeg;base64,{png}"),
                c.Image(data=png),  # media type sniffed from the data
            )
        ]
    )
    out, report = encode_req(r)
    assert [b["source"] for b in out["messages"][0]["content"]] == [
        {"type": "url", "url": "https://x/a.png"},
        {"type": "base64", "media_type": "image/webp", "data": "abc"},
        {"type": "base64", "media_type": "image/jpeg", "data": png},
        {"type": "base64", "media_type": "image/png", "data": png},
    ]
    assert report.dropped == ["image.detail"]


@pytest.mark.parametrize(
    "image",
    [
        c.Image(data="abc", media_type="image/tiff"),
        c.Image(url="data:image/svg+xml;base64,PHN2Zz4="),
        c.Image(url="data:image/png,%89PNG"),
        c.Image(),
    ],
)
def test_images_anthropic_cannot_take_are_400(image: c.Image) -> None:
    assert _raises_400(req(messages=[_user(image)])).param == "messages[0].content[0]"


def test_files_become_documents() -> None:
    text_b64 = base64.b64encode(b"hello").decode()
    r = req(
        messages=[
            _user(
                c.File(data="JVBERi0", media_type="application/pdf", filename="a.pdf"),
                c.File(data="JVBERi0"),
                c.File(url="https://x/a.pdf"),
                c.File(text="plain"),
                c.File(data=text_b64, media_type="text/plain"),
            )
        ]
    )
    out, _ = encode_req(r)
    content = out["messages"][0]["content"]
    assert content[0] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0"},
        "title": "a.pdf",
    }
    assert [b["source"] for b in content[1:]] == [
        {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0"},
        {"type": "url", "url": "https://x/a.pdf"},
        {"type": "text", "media_type": "text/plain", "data": "plain"},
        {"type": "text", "media_type": "text/plain", "data": "hello"},
    ]


@pytest.mark.parametrize(
    "file", [c.File(file_id="file-abc"), c.File(data="UEsDB", media_type="application/zip")]
)
def test_files_anthropic_cannot_carry_are_400(file: c.File) -> None:
    assert _raises_400(req(messages=[_user(file)])).param == "messages[0].content[0]"


def test_function_tools_get_an_object_input_schema() -> None:
    r = req(
        tools=[
            c.Tool(name="a", description="A", parameters={"type": "object", "$schema": "x"}),
            c.Tool(name="b"),
            c.Tool(name="c", parameters={"properties": {"x": {"type": "string"}}}, strict=True),
            c.Tool(name="d", cache_control={"type": "ephemeral"}, strict=False),
        ]
    )
    out, _ = encode_req(r)
    assert out["tools"] == [
        {"name": "a", "description": "A", "input_schema": {"type": "object", "$schema": "x"}},
        {"name": "b", "input_schema": {"type": "object", "properties": {}}},
        {
            "name": "c",
            "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
            "strict": True,
        },
        {
            "name": "d",
            "input_schema": {"type": "object", "properties": {}},
            "cache_control": {"type": "ephemeral"},
        },
    ]


def test_a_non_object_tool_schema_is_400() -> None:
    r = req(tools=[c.Tool(name="a", parameters={"type": "string"})])
    assert _raises_400(r).param == "tools[0].parameters"


def test_hosted_tools_pass_raw_for_anthropic_and_are_dropped_otherwise() -> None:
    raw: dict[str, Any] = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    r = req(
        hosted_tools=[
            c.HostedTool(protocol="anthropic_messages", type="web_search_20250305", raw=raw),
            c.HostedTool(
                protocol="openai_responses", type="file_search", raw={"type": "file_search"}
            ),
        ]
    )
    out, report = encode_req(r)
    assert out["tools"] == [raw]
    assert report.dropped == ["tools.file_search"]


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        (c.ToolChoice(mode="auto"), None, {"type": "auto"}),
        (c.ToolChoice(mode="none"), None, {"type": "none"}),
        (c.ToolChoice(mode="required"), None, {"type": "any"}),
        (c.ToolChoice(mode="tool", name="f"), None, {"type": "tool", "name": "f"}),
        (c.ToolChoice(mode="required"), False, {"type": "any", "disable_parallel_tool_use": True}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        (c.ToolChoice(mode="none"), False, {"type": "none"}),
        (None, True, None),
        (None, None, None),
    ],
)
def test_tool_choice_maps_and_parallel_false_disables_parallel_tool_use(
    choice: c.ToolChoice | None, parallel: bool | None, expected: dict[str, Any] | None
) -> None:
    tools = [c.Tool(name="f", parameters={"type": "object"})]
    out, _ = encode_req(req(tools=tools, tool_choice=choice, parallel_tool_calls=parallel))
    assert out.get("tool_choice") == expected


def test_tool_choice_is_sent_only_alongside_tools() -> None:
    out, report = encode_req(req(tool_choice=c.ToolChoice(mode="auto"), parallel_tool_calls=False))
    assert "tool_choice" not in out and "tools" not in out
    assert report.dropped == ["tool_choice"]


def test_max_tokens_falls_back_to_the_upstream_default() -> None:
    assert encode_req(req())[0]["max_tokens"] == 4096
    assert encode_req(req(), default_max_tokens=777)[0]["max_tokens"] == 777
    assert encode_req(req(max_tokens=5))[0]["max_tokens"] == 5


def test_sampling_stop_stream_and_user_fields() -> None:
    out, report = encode_req(
        req(temperature=0.5, top_p=0.9, top_k=3, stop=["X"], stream=True, user="u1")
    )
    assert out == {
        "model": "claude-test",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4096,
        "stop_sequences": ["X"],
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 3,
        "stream": True,
        "metadata": {"user_id": "u1"},
    }
    assert report.dropped == []


def test_temperature_above_anthropics_range_is_clamped_and_reported() -> None:
    out, report = encode_req(req(temperature=1.7))
    assert out["temperature"] == 1.0
    assert report.dropped == ["temperature"]


@pytest.mark.parametrize(
    ("rc", "thinking", "effort"),
    [
        (
            c.ReasoningConfig(enabled=True, budget_tokens=2048),
            {"type": "enabled", "budget_tokens": 2048},
            None,
        ),
        (
            c.ReasoningConfig(budget_tokens=2048, effort="high"),
            {"type": "enabled", "budget_tokens": 2048},
            "high",
        ),
        (c.ReasoningConfig(effort="none"), {"type": "disabled"}, None),
        (c.ReasoningConfig(effort="minimal"), {"type": "disabled"}, None),
        (c.ReasoningConfig(enabled=False, effort="high"), {"type": "disabled"}, None),
        (c.ReasoningConfig(effort="low"), {"type": "adaptive"}, "low"),
        (c.ReasoningConfig(effort="medium"), {"type": "adaptive"}, "medium"),
        (
            c.ReasoningConfig(effort="high", summary="auto"),
            {"type": "adaptive", "display": "summarized"},
            "high",
        ),
        (c.ReasoningConfig(effort="xhigh"), {"type": "adaptive"}, "max"),
        (c.ReasoningConfig(enabled=True), {"type": "adaptive"}, None),
        (c.ReasoningConfig(summary="detailed"), None, None),
    ],
)
def test_reasoning_rule_never_invents_a_budget(
    rc: c.ReasoningConfig, thinking: dict[str, Any] | None, effort: str | None
) -> None:
    out, _ = encode_req(req(reasoning=rc))
    assert out.get("thinking") == thinking
    assert out.get("output_config") == ({"effort": effort} if effort else None)


@pytest.mark.parametrize(
    "rc",
    [
        c.ReasoningConfig(summary="detailed"),
        c.ReasoningConfig(effort="none", summary="auto"),
    ],
)
def test_a_reasoning_summary_without_thinking_on_is_dropped_and_reported(
    rc: c.ReasoningConfig,
) -> None:
    out, report = encode_req(req(reasoning=rc))
    assert out.get("thinking") in (None, {"type": "disabled"})
    assert report.dropped == ["reasoning.summary"]


_TOOLS = [c.Tool(name="f", parameters={"type": "object"})]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (c.ToolChoice(mode="required"), {"type": "any"}),
        (c.ToolChoice(mode="tool", name="f"), {"type": "tool", "name": "f"}),
    ],
)
@pytest.mark.parametrize(
    "rc",
    [
        c.ReasoningConfig(effort="high"),
        c.ReasoningConfig(enabled=True),
        c.ReasoningConfig(enabled=True, budget_tokens=2048),
    ],
)
def test_forced_tool_use_keeps_the_tool_choice_and_drops_the_thinking(
    choice: c.ToolChoice, wire: dict[str, Any], rc: c.ReasoningConfig
) -> None:
    """Anthropic rejects thinking with tool_choice any/tool: the forced call wins."""
    out, report = encode_req(req(tools=_TOOLS, tool_choice=choice, reasoning=rc, temperature=0.2))
    assert out["tool_choice"] == wire
    assert "thinking" not in out and "output_config" not in out
    assert out["temperature"] == 0.2  # no thinking left to conflict with
    assert report.dropped == ["reasoning"]


def test_thinking_allows_auto_tool_choice_and_disabled_thinking_allows_forced_use() -> None:
    out, report = encode_req(
        req(
            tools=_TOOLS,
            tool_choice=c.ToolChoice(mode="auto"),
            reasoning=c.ReasoningConfig(effort="low"),
        )
    )
    assert out["thinking"] == {"type": "adaptive"} and out["tool_choice"] == {"type": "auto"}
    out, report = encode_req(
        req(
            tools=_TOOLS,
            tool_choice=c.ToolChoice(mode="required"),
            reasoning=c.ReasoningConfig(enabled=False),
        )
    )
    assert out["thinking"] == {"type": "disabled"} and out["tool_choice"] == {"type": "any"}
    assert report.dropped == []


@pytest.mark.parametrize(
    ("sampling", "kept", "dropped"),
    [
        ({"temperature": 0.3}, {}, ["temperature"]),
        ({"temperature": 1.0}, {"temperature": 1.0}, []),
        ({"temperature": 1.5}, {"temperature": 1.0}, ["temperature"]),  # clamped to 1
        ({"top_k": 40}, {}, ["top_k"]),
        ({"top_p": 0.9}, {}, ["top_p"]),
        ({"top_p": 0.95}, {"top_p": 0.95}, []),
        ({"top_p": 1.0}, {"top_p": 1.0}, []),
    ],
)
def test_with_thinking_kept_the_sampling_settings_anthropic_forbids_are_dropped_and_reported(
    sampling: dict[str, Any], kept: dict[str, Any], dropped: list[str]
) -> None:
    for rc in (c.ReasoningConfig(enabled=True), c.ReasoningConfig(budget_tokens=2048)):
        out, report = encode_req(req(reasoning=rc, **sampling))
        assert "thinking" in out
        assert {k: out[k] for k in ("temperature", "top_p", "top_k") if k in out} == kept
        assert report.dropped == dropped


def test_without_thinking_sampling_settings_are_sent_as_they_are() -> None:
    out, report = encode_req(req(temperature=0.3, top_k=40, top_p=0.5))
    assert (out["temperature"], out["top_k"], out["top_p"]) == (0.3, 40, 0.5)
    out, report = encode_req(req(temperature=0.3, reasoning=c.ReasoningConfig(enabled=False)))
    assert out["temperature"] == 0.3 and report.dropped == []


def test_a_tool_choice_naming_a_tool_that_is_not_sent_is_dropped_and_reported() -> None:
    out, report = encode_req(req(tools=_TOOLS, tool_choice=c.ToolChoice(mode="tool", name="gone")))
    assert "tool_choice" not in out and report.dropped == ["tool_choice"]


def test_verbosity_is_dropped_and_reported() -> None:
    out, report = encode_req(req(verbosity="low"))
    assert "verbosity" not in out and report.dropped == ["verbosity"]


@pytest.mark.parametrize(
    ("rf", "expected"),
    [
        (
            c.ResponseFormat(
                type="json_schema", name="x", schema={"type": "object", "required": []}
            ),
            {"type": "json_schema", "schema": {"type": "object", "required": []}},
        ),
        (
            c.ResponseFormat(type="json_object"),
            {"type": "json_schema", "schema": {"type": "object"}},
        ),
        (c.ResponseFormat(type="text"), None),
    ],
)
def test_response_format_becomes_output_config_format(
    rf: c.ResponseFormat, expected: dict[str, Any] | None
) -> None:
    out, _ = encode_req(req(response_format=rf))
    assert out.get("output_config") == ({"format": expected} if expected else None)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("n", 2),
        ("logprobs", True),
        ("top_logprobs", 3),
        ("previous_response_id", "resp_1"),
        ("background", True),
    ],
)
def test_fields_that_change_the_kind_of_answer_are_rejected(field: str, value: Any) -> None:
    err = _raises_400(req(**{field: value}))
    assert err.param == field
    out, report = encode_req(req(**{field: value}), lossy=True)
    assert report.dropped == [field]
    assert field not in out


def test_fields_anthropic_lacks_are_dropped_and_reported() -> None:
    out, report = encode_req(
        req(prompt_cache_key="k", metadata={"a": "b"}, service_tier="flex", n=1)
    )
    assert report.dropped == ["prompt_cache_key", "metadata", "service_tier"]
    assert "metadata" not in out and "service_tier" not in out
    out, report = encode_req(req(service_tier="auto"))
    assert out["service_tier"] == "auto"
    assert report.dropped == []


def test_system_turns_stay_system_messages_in_place_their_marks_kept() -> None:
    """(Issue 26) A canonical system turn (an Anthropic client's mid-conversation system
    message) is a system message where it was; the turns around it are made as usual."""
    marked = {"type": "ephemeral"}
    r = req(
        system=[c.Text(text="top")],
        system_turns=True,
        messages=[
            _user(c.Text(text="hi")),
            c.Message(role="system", content=[c.Text(text="Be terse.")]),
            _assistant(c.Text(text="ok"), c.ToolCall(id="toolu_1", name="f", arguments="{}")),
            _tool(c.ToolResult(call_id="toolu_1", content=[c.Text(text="r")])),
            c.Message(
                role="system",
                content=[c.Text(text="a"), c.Text(text="b", cache_control=marked)],
            ),
        ],
    )
    out, report = encode_req(r)
    assert out["system"] == "top"
    assert [m["role"] for m in out["messages"]] == ["user", "system", "assistant", "user", "system"]
    assert out["messages"][1] == {"role": "system", "content": "Be terse."}
    assert out["messages"][4] == {
        "role": "system",
        "content": [
            {"type": "text", "text": "a"},
            {"type": "text", "text": "b", "cache_control": marked},
        ],
    }
    assert report.dropped == []
    back, _ = decode_req({**out, "max_tokens": 10})
    assert [m.role for m in back.messages] == ["user", "system", "assistant", "tool", "system"]
