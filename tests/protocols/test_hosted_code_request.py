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


# ------------------------------------------------------------------ replayed runs

RUN_CODE = "print(2**20)"
RUN_OUT = "1048576\n"


def replay_body(protocol: ProtocolName) -> dict[str, Any]:
    """An earlier turn's run in each client's own shape, then a new question."""
    if protocol == ANTHROPIC:
        return client_body(
            ANTHROPIC,
            CLIENT_TOOLS[ANTHROPIC],
        ) | {
            "messages": [
                {"role": "user", "content": USER},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "server_tool_use",
                            "id": "srvtoolu_r1",
                            "name": "code_execution",
                            "input": {"code": RUN_CODE},
                        },
                        {
                            "type": "code_execution_tool_result",
                            "tool_use_id": "srvtoolu_r1",
                            "content": {
                                "type": "code_execution_result",
                                "stdout": RUN_OUT,
                                "stderr": "",
                                "return_code": 0,
                                "content": [],
                            },
                        },
                        {"type": "text", "text": "It is 1048576."},
                    ],
                },
                {"role": "user", "content": "and 2**21?"},
            ]
        }
    if protocol == RESPONSES:
        return {
            "model": "m",
            "tools": CLIENT_TOOLS[RESPONSES],
            "input": [
                {"role": "user", "content": USER},
                {
                    "type": "code_interpreter_call",
                    "id": "ci_r1",
                    "status": "completed",
                    "container_id": "cntr_r1",
                    "code": RUN_CODE,
                    "outputs": [{"type": "logs", "logs": RUN_OUT}],
                },
                {"role": "assistant", "content": "It is 1048576."},
                {"role": "user", "content": "and 2**21?"},
            ],
        }
    return {
        "tools": CLIENT_TOOLS[GEMINI],
        "contents": [
            {"role": "user", "parts": [{"text": USER}]},
            {
                "role": "model",
                "parts": [
                    {"executableCode": {"language": "PYTHON", "code": RUN_CODE}},
                    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": RUN_OUT}},
                    {"text": "It is 1048576."},
                ],
            },
            {"role": "user", "parts": [{"text": "and 2**21?"}]},
        ],
    }


def _assistant_text(protocol: ProtocolName, body: dict[str, Any]) -> str:
    if protocol == ANTHROPIC:
        turns = [m for m in body["messages"] if m["role"] == "assistant"]
        return "".join(
            b.get("text", "") for t in turns for b in t["content"] if isinstance(b, dict)
        )
    if protocol == RESPONSES:
        items = [i for i in body["input"] if i.get("role") == "assistant"]
        return "".join(p["text"] for i in items for p in i["content"])
    if protocol == GEMINI:
        turns = [t for t in body["contents"] if t["role"] == "model"]
        return "".join(p.get("text", "") for t in turns for p in t["parts"])
    return "".join(m["content"] or "" for m in body["messages"] if m["role"] == "assistant")


@pytest.mark.parametrize("client", list(CLIENT_TOOLS))
def test_a_replayed_run_is_the_canonical_run(client: ProtocolName) -> None:
    req, dropped = decode(client, replay_body(client))
    run = req.messages[1].content[0]
    assert type(run) is c.ServerToolUse and run.name == "code_execution"
    assert run.input == {"code": RUN_CODE, "language": "python"}
    assert run.code is not None and run.code.stdout == RUN_OUT
    assert not [d for d in dropped if "code" in d.lower()]


REPLAY_PAIRS = [(cl, up) for cl in CLIENT_TOOLS for up in PROTOCOLS if cl != up]


@pytest.mark.parametrize(("client", "upstream"), REPLAY_PAIRS)
def test_a_run_replayed_to_another_upstream_is_text_it_accepts(
    client: ProtocolName, upstream: ProtocolName
) -> None:
    req, _ = decode(client, replay_body(client))
    body, dropped = encode(upstream, req)
    said = _assistant_text(upstream, body)
    assert RUN_CODE in said and RUN_OUT.strip() in said and "It is 1048576." in said
    raw = json.dumps({k: v for k, v in body.items() if k not in ("include", "tools")})
    for foreign in ("srvtoolu_r1", "ci_r1", "cntr_r1", "executableCode", "code_interpreter_call"):
        assert foreign not in raw
    assert not [d for d in dropped if "code" in d.lower() and d != "tools.code_execution"]


@pytest.mark.parametrize("client", list(CLIENT_TOOLS))
def test_a_run_goes_back_to_its_own_upstream_as_it_came(client: ProtocolName) -> None:
    req, _ = decode(client, replay_body(client))
    body, _ = encode(client, req)
    if client == ANTHROPIC:
        assert (
            body["messages"][1]["content"][:2] == replay_body(client)["messages"][1]["content"][:2]
        )
    elif client == RESPONSES:
        run = next(i for i in body["input"] if i.get("type") == "code_interpreter_call")
        assert run == replay_body(client)["input"][1]
    else:
        assert body["contents"][1]["parts"][:2] == replay_body(client)["contents"][1]["parts"][:2]
