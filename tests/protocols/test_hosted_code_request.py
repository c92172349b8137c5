"""Hosted code execution on the request side, every client against every upstream
(issue 30): Anthropic ``code_execution_*`` ↔ Responses ``code_interpreter`` ↔ Gemini
``codeExecution`` become ``Request.code_execution``; each upstream gets its own tool
(its provider-only options reported), a Chat upstream reports it, and a replayed run
reaches another upstream as text it accepts (the upstream codec's own strict decoder
takes each body)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import PROTOCOLS, ProtocolName, UpstreamOptions
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols import get_codec

CHAT: ProtocolName = "openai_chat_completions"
RESPONSES: ProtocolName = "openai_responses"
ANTHROPIC: ProtocolName = "anthropic_messages"
GEMINI: ProtocolName = "gemini_generate_content"
USER = "what is 2**20?"

CLIENT_TOOLS: dict[ProtocolName, list[dict[str, Any]]] = {
    ANTHROPIC: [{"type": "code_execution_20250825", "name": "code_execution"}],
    RESPONSES: [{"type": "code_interpreter", "container": {"type": "auto"}}],
    GEMINI: [{"codeExecution": {}}],
}


def client_body(protocol: ProtocolName, tools: list[dict[str, Any]]) -> dict[str, Any]:
    if protocol == ANTHROPIC:
        return {
            "model": "m",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": USER}],
            "tools": tools,
        }
    if protocol == RESPONSES:
        return {"model": "m", "input": USER, "tools": tools}
    return {"contents": [{"role": "user", "parts": [{"text": USER}]}], "tools": tools}


def decode(protocol: ProtocolName, body: dict[str, Any]) -> tuple[c.Request, list[str]]:
    report = TranslationReport()
    req = get_codec(protocol).decode_request(json.dumps(body).encode(), report)
    if protocol == GEMINI:
        req.model = "m"
    return req, report.dropped


def encode(protocol: ProtocolName, req: c.Request) -> tuple[dict[str, Any], list[str]]:
    report = TranslationReport()
    body = get_codec(protocol).encode_request(req, report, UpstreamOptions())
    assert get_codec(protocol).decode_request(body, TranslationReport()).messages  # strict
    return json.loads(body), report.dropped


UPSTREAM_TOOL: dict[ProtocolName, dict[str, Any]] = {
    ANTHROPIC: {"type": "code_execution_20250825", "name": "code_execution"},
    RESPONSES: {"type": "code_interpreter", "container": {"type": "auto"}},
    GEMINI: {"codeExecution": {}},
}


@pytest.mark.parametrize("client", list(CLIENT_TOOLS))
@pytest.mark.parametrize("upstream", list(PROTOCOLS))
def test_the_upstream_gets_its_own_code_execution_tool(
    client: ProtocolName, upstream: ProtocolName
) -> None:
    req, dropped = decode(client, client_body(client, CLIENT_TOOLS[client]))
    assert req.code_execution == c.CodeExecution() and not dropped
    body, dropped = encode(upstream, req)
    if upstream == CHAT:  # no sandbox behind Chat: reported, never silently dropped
        assert "tools" not in body
        assert dropped == ["tools.code_execution"]
        return
    # (an OpenAI client's prompt is cached at a breakpoint the encoder places)
    tools = [{k: v for k, v in t.items() if k != "cache_control"} for t in body["tools"]]
    assert tools == [UPSTREAM_TOOL[upstream]]
    assert not dropped
    if upstream == RESPONSES and client != RESPONSES:  # else no logs come back
        assert "code_interpreter_call.outputs" in body.get("include", [])


@pytest.mark.parametrize(
    ("client", "tools", "reported"),
    [
        (
            RESPONSES,
            [{"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["f"]}}],
            "tools.code_interpreter.container",
        ),
        (
            RESPONSES,
            [{"type": "code_interpreter", "container": "cntr_1"}],
            "tools.code_interpreter.container",
        ),
        (
            ANTHROPIC,
            [
                {
                    "type": "code_execution_20250522",
                    "name": "code_execution",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
            "tools.code_execution.cache_control",
        ),
    ],
)
def test_a_code_tools_provider_only_options_are_reported(
    client: ProtocolName, tools: list[dict[str, Any]], reported: str
) -> None:
    req, dropped = decode(client, client_body(client, tools))
    assert req.code_execution == c.CodeExecution()
    assert reported in dropped


@pytest.mark.parametrize("client", list(CLIENT_TOOLS))
def test_the_same_protocol_keeps_its_own_raw_code_tool(client: ProtocolName) -> None:
    tools = [{**CLIENT_TOOLS[client][0]}]
    if client == RESPONSES:
        tools[0]["container"] = "cntr_1"
    req, _ = decode(client, client_body(client, tools))
    body, dropped = encode(client, req)
    assert body["tools"] == tools and not dropped
