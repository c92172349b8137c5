"""A hosted code execution answer from each provider that has one (Anthropic,
Responses, Gemini; ``tests/helpers/code_answers.py``, as they send it) reaches every
other client in the client's own shape, over both transports, streamed and not: the
upstream got its own code tool for the client's, the strict validators pass, the
client's SDK parses it, and every client sees the same run (its code and what it
printed) and the answer's text. A Chat client has no shape for a run: it gets the text."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types

from tests.helpers import code_answers as ca
from tests.helpers.servers import FakeUpstream, Reply, Seen, sse_frames
from tests.helpers.validate_anthropic import validate_anthropic_message, validate_anthropic_stream
from tests.helpers.validate_chat import validate_chat_stream
from tests.helpers.validate_gemini import validate_gemini_response, validate_gemini_stream
from tests.helpers.validate_responses import check_code_item, validate_responses_stream

from .conftest import Stack

UPSTREAMS = list(ca.ANSWERS)
CLIENTS = [
    "openai_chat_completions",
    "openai_responses",
    "anthropic_messages",
    "gemini_generate_content",
]
PROMPT = "What is 2**20? Compute it."
CLIENT_TOOL: dict[str, Any] = {
    "anthropic_messages": {"type": "code_execution_20250825", "name": "code_execution"},
    "openai_responses": {"type": "code_interpreter", "container": {"type": "auto"}},
    "gemini_generate_content": {"codeExecution": {}},
}


def provider_answer(protocol: str) -> Any:
    plain, streamed = ca.ANSWERS[protocol]

    def answer(seen: Seen) -> Reply:
        if "streamGenerateContent" in seen.path or b'"stream":true' in seen.body.replace(b" ", b""):
            return Reply(200, ca.SSE, sse_frames(streamed()))
        return Reply(200, ca.JSON, [plain()])

    return answer


def upstream_code_tool(protocol: str, body: dict[str, Any]) -> Any:
    tools = body.get("tools") or []
    if protocol == "anthropic_messages":
        return [{k: v for k, v in t.items() if k != "cache_control"} for t in tools]
    return tools


def raw_call(client: str, base: str, stream: bool) -> bytes:
    headers: dict[str, str] = {}
    tools = [CLIENT_TOOL[client]] if client in CLIENT_TOOL else []
    if client == "openai_chat_completions":
        path = "/v1/chat/completions"
        body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": PROMPT}]}
    elif client == "openai_responses":
        path, body = "/v1/responses", {"model": "m", "input": PROMPT, "tools": tools}
    elif client == "anthropic_messages":
        path = "/v1/messages"
        body = {
            "model": "m",
            "max_tokens": 256,
            "messages": [{"role": "user", "content": PROMPT}],
            "tools": tools,
        }
        headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    else:
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        path = f"/v1beta/models/m:{method}"
        body = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}], "tools": tools}
        headers = {"x-goog-api-key": "k"}
    if stream and client != "gemini_generate_content":
        body["stream"] = True
    r = httpx.post(base + path, json=body, headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    return r.content


def _anthropic_runs(content: list[dict[str, Any]]) -> list[Any]:
    calls = {b["id"]: b for b in content if b["type"] == "server_tool_use"}
    runs = []
    for b in content:
        if b["type"] in ("code_execution_tool_result", "bash_code_execution_tool_result"):
            call = calls[b["tool_use_id"]]
            code = call["input"].get("code", call["input"].get("command"))
            runs.append((code, b["content"]["stdout"]))
    return runs


def _anthropic_text(content: list[dict[str, Any]]) -> str:
    return "".join(b["text"] for b in content if b["type"] == "text")


def _responses_view(output: list[dict[str, Any]]) -> tuple[list[Any], str]:
    runs, text = [], ""
    for item in output:
        if item["type"] == "code_interpreter_call":
            check_code_item("item", item)
            logs = "".join(o["logs"] for o in item["outputs"] if o["type"] == "logs")
            runs.append((item["code"], logs))
        for part in item.get("content") or ():
            text += part.get("text", "")
    return runs, text


def client_view(client: str, body: bytes, stream: bool) -> tuple[list[Any], str]:
    """(runs as (code, stdout), the answer's text) as the strict validator reads them."""
    if client == "anthropic_messages":
        if stream:
            content = []
            for b in validate_anthropic_stream(body).blocks:
                block = dict(b.start)
                if b.type == "server_tool_use":
                    block["input"] = json.loads(b.partial_json)
                elif b.type == "text":
                    block["text"] = b.text
                content.append(block)
        else:
            content = validate_anthropic_message(body)["content"]
        return _anthropic_runs(content), _anthropic_text(content)
    if client == "openai_responses":
        output = validate_responses_stream(body).items if stream else json.loads(body)["output"]
        return _responses_view(output)
    if client == "openai_chat_completions":
        if stream:
            return [], validate_chat_stream(body).content or ""
        return [], json.loads(body)["choices"][0]["message"]["content"]
    gist = validate_gemini_stream(body).gist if stream else validate_gemini_response(body)
    return [(code, out) for code, _, out in gist["runs"]], gist["text"]


def searches_counted(body: bytes) -> int:
    """The searches an Anthropic client's answer (plain or streamed) reports."""
    if body.startswith(b"{"):
        usage = json.loads(body)["usage"]
    else:
        usage = validate_anthropic_stream(body).usage or {}
    return int((usage.get("server_tool_use") or {}).get("web_search_requests", 0))


def sdk_view(client: str, base: str, stream: bool) -> tuple[list[Any], str] | None:
    """The same through the client's SDK (its accumulator, when streamed)."""
    if client == "anthropic_messages":
        a = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
        args: dict[str, Any] = {
            "model": "m",
            "max_tokens": 256,
            "messages": [{"role": "user", "content": PROMPT}],
            "tools": [CLIENT_TOOL[client]],
        }
        if stream:
            with a.messages.stream(**args) as s:
                msg = s.get_final_message()
        else:
            msg = a.messages.create(**args)
        content = msg.model_dump(mode="json")["content"]
        return _anthropic_runs(content), _anthropic_text(content)
    if client == "gemini_generate_content":
        g = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=base))
        config = types.GenerateContentConfig(
            tools=[types.Tool(code_execution=types.ToolCodeExecution())]
        )
        if stream:
            chunks = list(
                g.models.generate_content_stream(model="m", contents=PROMPT, config=config)
            )
        else:
            chunks = [g.models.generate_content(model="m", contents=PROMPT, config=config)]
        parts = [p for ch in chunks for p in ch.candidates[0].content.parts or ()]  # type: ignore[index, union-attr]
        codes = [p.executable_code.code for p in parts if p.executable_code]
        outs = [p.code_execution_result.output for p in parts if p.code_execution_result]
        text = "".join(p.text for p in parts if p.text)
        return list(zip(codes, outs, strict=True)), text
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    if client == "openai_chat_completions":
        msgs: Any = [{"role": "user", "content": PROMPT}]
        if stream:
            for _ in o.chat.completions.create(model="m", messages=msgs, stream=True):
                pass
        else:
            o.chat.completions.create(model="m", messages=msgs)
        return None
    tools: Any = [CLIENT_TOOL[client]]
    if stream:
        with o.responses.stream(model="m", input=PROMPT, tools=tools) as s:
            response = s.get_final_response()
    else:
        response = o.responses.create(model="m", input=PROMPT, tools=tools)
    return _responses_view(response.model_dump(mode="json")["output"])


CASES = [(u, c) for u in UPSTREAMS for c in CLIENTS if u != c]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize(("upstream", "client"), CASES, ids=[f"{u}-to-{c}" for u, c in CASES])
def test_a_code_execution_answer_reaches_every_client_with_its_run(
    stack: Stack, fake: FakeUpstream, upstream: str, client: str, inner: bool, stream: bool
) -> None:
    fake.push(provider_answer(upstream))
    base = stack.proxy(fake, upstream, inner=inner)  # type: ignore[arg-type]
    body = raw_call(client, base, stream)
    runs, text = client_view(client, body, stream)
    if client in CLIENT_TOOL:  # the upstream got its own code tool for the client's
        sent = upstream_code_tool(upstream, fake.seen[-1].json())
        assert sent == [CLIENT_TOOL[upstream]]
    assert text.endswith(ca.TEXT)
    if client == "openai_chat_completions":  # no shape for a run: the text only
        assert runs == []
        return
    assert runs == [(ca.CODE[upstream], ca.STDOUT)]
    if client == "anthropic_messages":  # a run is no search: "Did 0 searches"
        assert searches_counted(body) == 0
    via_sdk = sdk_view(client, base, stream)
    if via_sdk is not None:
        assert via_sdk == (runs, text)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
def test_a_same_protocol_code_execution_answer_passes_through_unchanged(
    stack: Stack, fake: FakeUpstream, upstream: str, stream: bool
) -> None:
    fake.push(provider_answer(upstream))
    base = stack.proxy(fake, upstream)  # type: ignore[arg-type]
    plain, streamed = ca.ANSWERS[upstream]
    assert raw_call(upstream, base, stream) == (streamed() if stream else plain())
    assert upstream_code_tool(upstream, fake.seen[-1].json()) == [CLIENT_TOOL[upstream]]
