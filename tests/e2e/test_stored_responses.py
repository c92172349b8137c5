"""Stored Responses over stateless upstreams, through the official ``openai`` SDK.

Three turns chained with ``previous_response_id`` (a tool call with reasoning, its
output, a follow-up) against a scripted Chat or Anthropic model, over HTTP and the
wrapped-app transport, streamed and not, with the sync and the async client: the
model must receive the whole conversation every time. Then retrieve, input items
(paged), delete, and the errors for ids the proxy does not hold.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
import pytest
from openai.types.responses import Response

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from tests.helpers.scripted_model import CALL_ID_PREFIX, FINAL_PREFIX, ScriptedModel
from tests.helpers.servers import serve

CHAT: ProtocolName = "openai_chat_completions"
ANTHROPIC: ProtocolName = "anthropic_messages"
COMMAND = "echo stored-marker"
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    }
]
TOOL_OUTPUT = "stored-marker"
MODEL = "gpt-5.5"


async def _not_found(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"not here"})


@contextmanager
def proxy(model: ScriptedModel, transport: str, **options: Any) -> Iterator[str]:
    """The middleware in front of ``model``; yields its ``/v1`` base URL. A Chat
    upstream echoes reasoning (``reasoning_content``) so it travels the chain too."""
    extra = {"echo_reasoning_content": True} if model.protocol == CHAT else {}
    if transport == "inner":
        inner = Upstream.inner_app(model.protocol, **extra)  # type: ignore[arg-type]
        with serve(ProxaiMiddleware(model, upstream=inner, **options)) as url:
            yield url + "/v1"
        return
    with serve(model) as upstream_url:
        base = upstream_url if model.protocol == ANTHROPIC else upstream_url + "/v1"
        up = Upstream(model.protocol, base, "sk-upstream-key", **extra)  # type: ignore[arg-type]
        with serve(ProxaiMiddleware(_not_found, upstream=up, **options)) as url:
            yield url + "/v1"


def turn(k: int, previous: list[Response]) -> dict[str, Any]:
    """The k-th request of the conversation: only what is new since the last turn."""
    if k == 0:
        return {"input": "Print the marker, please.", "tools": TOOLS}
    if k == 1:
        call = next(i for i in previous[0].output if i.type == "function_call")
        output = {"type": "function_call_output", "call_id": call.call_id, "output": TOOL_OUTPUT}
        return {"input": [output], "tools": TOOLS, "previous_response_id": previous[0].id}
    return {
        "input": [{"role": "user", "content": "Thanks. And again?"}],
        "instructions": "Answer briefly.",
        "tools": TOOLS,
        "previous_response_id": previous[1].id,
    }


def run_sync(url: str, stream: bool, key: str = "sk-client") -> tuple[list[Response], list[Any]]:
    client = openai.OpenAI(base_url=url, api_key=key, max_retries=0)
    answers: list[Response] = []
    folded: list[Any] = []
    for k in range(3):
        kw = turn(k, answers)
        if stream:
            events = list(client.responses.create(model=MODEL, stream=True, **kw))
            answers.append(events[-1].response)  # type: ignore[union-attr]
            folded.append([e.item for e in events if e.type == "response.output_item.done"])
        else:
            answers.append(client.responses.create(model=MODEL, **kw))
    client.close()
    return answers, folded


async def _run_async(url: str, stream: bool) -> tuple[list[Response], list[Any]]:
    async with openai.AsyncOpenAI(base_url=url, api_key="sk-client", max_retries=0) as client:
        answers: list[Response] = []
        folded: list[Any] = []
        for k in range(3):
            kw = turn(k, answers)
            if stream:
                events = [
                    e async for e in await client.responses.create(model=MODEL, stream=True, **kw)
                ]
                answers.append(events[-1].response)  # type: ignore[union-attr]
                folded.append([e.item for e in events if e.type == "response.output_item.done"])
            else:
                answers.append(await client.responses.create(model=MODEL, **kw))
        return answers, folded


def run_async(url: str, stream: bool) -> tuple[list[Response], list[Any]]:
    return asyncio.run(_run_async(url, stream))


def _kinds(request: c.Request) -> list[str]:
    """The conversation as the upstream read it: role and part kind, in order."""
    out: list[str] = []
    for m in request.messages:
        for p in m.content:
            out.append(f"{m.role}:{type(p).__name__}")
    return out


@pytest.mark.parametrize("sdk", ["sync", "async"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("upstream", [CHAT, ANTHROPIC], ids=["chat", "anthropic"])
def test_three_chained_turns_reach_the_upstream_as_the_whole_conversation(
    upstream: ProtocolName, transport: str, stream: bool, sdk: str
) -> None:
    model = ScriptedModel(upstream, COMMAND, reasoning=True)
    with proxy(model, transport) as url:
        answers, folded = (run_sync if sdk == "sync" else run_async)(url, stream)
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        retrieved = [client.responses.retrieve(a.id) for a in answers]
    assert model.problems == []  # every reasoning carrier came back intact
    assert [a.status for a in answers] == ["completed"] * 3
    assert answers[2].output_text == FINAL_PREFIX + TOOL_OUTPUT
    assert answers[1].previous_response_id == answers[0].id
    assert answers[2].previous_response_id == answers[1].id
    seen = [x.decoded for x in model.exchanges]
    assert len(seen) == 3 and all(s is not None for s in seen)
    first, second, third = seen  # type: ignore[misc]
    assert _kinds(first) == ["user:Text"]  # type: ignore[arg-type]
    # Turn 2: turn 1's question, the model's reasoning, text and call, the result.
    assistant_1 = ["assistant:Reasoning", "assistant:Text", "assistant:ToolCall"]
    assert _kinds(second) == ["user:Text", *assistant_1, "tool:ToolResult"]  # type: ignore[arg-type]
    assert _kinds(third) == [  # type: ignore[arg-type]
        "user:Text",
        *assistant_1,
        "tool:ToolResult",
        "assistant:Text",
        "user:Text",
    ]
    call = second.messages[1].content[2]  # type: ignore[union-attr]
    assert isinstance(call, c.ToolCall) and call.id == f"{CALL_ID_PREFIX}0001"
    assert json.loads(call.arguments) == {"cmd": COMMAND}
    result = second.messages[2].content[0]  # type: ignore[union-attr]
    assert isinstance(result, c.ToolResult) and result.call_id == call.id
    reasoning = third.messages[1].content[0]  # type: ignore[union-attr]
    assert isinstance(reasoning, c.Reasoning)
    if upstream == ANTHROPIC:  # the thinking signature survived two store round trips
        assert reasoning.signature == "sig-scripted-0001"
    # Instructions are this request's own, never carried from an earlier turn.
    assert [t.text for t in third.system] == ["Answer briefly."]  # type: ignore[union-attr]
    assert first.system == [] and second.system == []  # type: ignore[union-attr]
    # Retrieved as returned; for a stream, the terminal snapshot = the folded items.
    for got, answer in zip(retrieved, answers, strict=True):
        assert got.model_dump() == answer.model_dump()
    if stream:
        for got, items in zip(retrieved, folded, strict=True):
            assert [i.model_dump() for i in got.output] == [i.model_dump() for i in items]
