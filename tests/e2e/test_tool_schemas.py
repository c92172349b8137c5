"""Tool declarations through the twelve translated directions, as an agent loop sends
them: the same tools twice, the first time decoded (nothing looked up yet), the second
found by their bytes (``proxai_asgi.protocols._kit.tool_schemas``). The official SDK is the client,
the middleware runs on uvicorn (127.0.0.1), over HTTP and as the wrapped inner app,
streamed and not. Both upstream requests must be the same bytes, and each schema must
arrive as ``msgspec.json.encode`` writes the client's schema (what the proxy sent
before schemas were kept encoded)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import msgspec
import openai
import pytest
from google.genai import types

from proxai_asgi.protocols._kit import tool_schemas
from tests.helpers.servers import FakeUpstream, reply_from_capture

from .conftest import Stack
from .test_translation import CLIENTS, gemini_client

# A schema with what a re-encoding could change: escapes, non-ASCII text, numbers in
# exponent form, nesting, key order.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": 'naïve "quoted" \u2014 a/b \\ ✓'},
        "limit": {"type": "number", "minimum": 0.5, "maximum": 1e21, "default": 10},
        "paths": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["query"],
    "zeta": None,
    "alpha": [True, False],
}
# No "type": Anthropic's encoder adds "type": "object" in front.
UNTYPED: dict[str, Any] = {"properties": {"x": {"type": "integer"}}}
DESCRIPTION = "Look a thing up.\nSecond line."

ANSWER = {
    ("openai_chat_completions", False): "chat_json_text_basic",
    ("openai_chat_completions", True): "chat_sse_text_basic_include_usage",
    ("openai_responses", False): "responses_json_text_basic",
    ("openai_responses", True): "responses_sse_text_basic",
    ("anthropic_messages", False): "anthropic_json_text_basic",
    ("anthropic_messages", True): "anthropic_sse_text_basic",
    ("gemini_generate_content", False): "gemini_json_text_basic",
    ("gemini_generate_content", True): "gemini_sse_text_basic",
}
DIRECTIONS = [(cl, up) for cl in CLIENTS for up in CLIENTS if cl != up]


def _send(client: str, base: str, stream: bool, schemas: list[dict[str, Any]]) -> None:
    """One request of ``client``'s protocol declaring a tool per schema, the SDK's way."""
    names = [f"tool_{i}" for i in range(len(schemas))]
    if client == "gemini_generate_content":
        decls = [
            types.FunctionDeclaration(name=n, description=DESCRIPTION, parameters_json_schema=s)
            for n, s in zip(names, schemas, strict=True)
        ]
        config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=decls)])
        g = gemini_client(base)
        if stream:
            list(g.models.generate_content_stream(model="m", contents="hi", config=config))
        else:
            g.models.generate_content(model="m", contents="hi", config=config)
        return
    if client == "anthropic_messages":
        a = anthropic.Anthropic(base_url=base, api_key="sk-ant-test", max_retries=0)
        tools: list[Any] = [
            {"name": n, "description": DESCRIPTION, "input_schema": s}
            for n, s in zip(names, schemas, strict=True)
        ]
        args: dict[str, Any] = {
            "model": "m",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": tools,
        }
        if stream:
            with a.messages.stream(**args) as s:
                s.get_final_message()
        else:
            a.messages.create(**args)
        return
    o = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    if client == "openai_chat_completions":
        chat_tools: list[Any] = [
            {
                "type": "function",
                "function": {"name": n, "description": DESCRIPTION, "parameters": s},
            }
            for n, s in zip(names, schemas, strict=True)
        ]
        msgs: Any = [{"role": "user", "content": "hi"}]
        if stream:
            list(o.chat.completions.create(model="m", messages=msgs, tools=chat_tools, stream=True))
        else:
            o.chat.completions.create(model="m", messages=msgs, tools=chat_tools)
        return
    response_tools: list[Any] = [
        {
            "type": "function",
            "name": n,
            "description": DESCRIPTION,
            "parameters": s,
            "strict": False,
        }
        for n, s in zip(names, schemas, strict=True)
    ]
    if stream:
        list(o.responses.create(model="m", input="hi", tools=response_tools, stream=True))
    else:
        o.responses.create(model="m", input="hi", tools=response_tools)


def _upstream_schemas(upstream: str, body: dict[str, Any]) -> list[Any]:
    if upstream == "gemini_generate_content":
        (tool,) = body["tools"]
        return [d["parametersJsonSchema"] for d in tool["functionDeclarations"]]
    if upstream == "anthropic_messages":
        return [t["input_schema"] for t in body["tools"]]
    if upstream == "openai_chat_completions":
        return [t["function"]["parameters"] for t in body["tools"]]
    return [t["parameters"] for t in body["tools"]]


@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize(("client", "upstream"), DIRECTIONS)
def test_resent_tool_schemas_reach_the_upstream_as_encoded_the_first_time(
    stack: Stack, fake: FakeUpstream, client: str, upstream: str, stream: bool, transport: str
) -> None:
    fake.push(reply_from_capture(ANSWER[upstream, stream]))
    base = stack.proxy(fake, upstream, inner=transport == "inner")  # type: ignore[arg-type]
    tool_schemas.forget()  # (the servers run in this process)
    _send(client, base, stream, [SCHEMA, UNTYPED])
    # The second request finds its tools; but google-genai writes a declaration's
    # ``parameters_json_schema`` in snake case, which the general Gemini path (dicts,
    # nothing looked up) reads.
    assert (tool_schemas.entries() > 0) is (client != "gemini_generate_content")
    _send(client, base, stream, [SCHEMA, UNTYPED])
    first, second = fake.seen
    assert first.body == second.body
    untyped = {"type": "object", **UNTYPED} if upstream == "anthropic_messages" else UNTYPED
    assert _upstream_schemas(upstream, first.json()) == [SCHEMA, untyped]
    for schema in (SCHEMA, untyped):
        assert msgspec.json.encode(schema) in first.body


@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("client", [c for c in CLIENTS if c != "anthropic_messages"])
def test_a_schema_anthropic_refuses_is_refused_each_time_in_the_clients_shape(
    stack: Stack, fake: FakeUpstream, client: str, transport: str
) -> None:
    """A schema of another type than object: a 400 of the client's protocol on the
    first request and on the resent one alike, and nothing sent upstream."""
    fake.push(reply_from_capture(ANSWER["anthropic_messages", False]))
    base = stack.proxy(fake, "anthropic_messages", inner=transport == "inner")
    tool_schemas.forget()
    errors = []
    for _ in range(2):
        with pytest.raises(Exception) as caught:
            _send(client, base, False, [{"type": "string"}])
        errors.append(caught.value)
    assert fake.seen == []
    for e in errors:
        assert getattr(e, "status_code", getattr(e, "code", None)) == 400
        text = json.dumps(getattr(e, "body", None) or getattr(e, "details", None))
        assert "Anthropic tool schemas must be of type object" in text
        assert "tools[0].parameters" in text
