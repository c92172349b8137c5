"""MP-23 as clients see it (issue 17): a Chat message is its content, then its tool calls.
A Chat upstream that streams more content after a tool call still gives Responses
clients ``[message, function_call]`` and Anthropic clients ``[text, tool_use]``, the same
as the non-streamed answer; through the real SDKs, over both transports."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from tests.helpers.servers import FakeUpstream, Reply, Seen, sse_frames

from .conftest import Stack

CHAT = "openai_chat_completions"
HEAD = {"id": "chatcmpl-1", "created": 1, "model": "m"}
USAGE = {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}
CALL = {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{}"}}


def chat_answer(seen: Seen) -> Reply:
    """``Let me check.``, the call, then `` Done.`` (streamed in that order)."""
    if not seen.json().get("stream"):
        message = {"role": "assistant", "content": "Let me check. Done.", "tool_calls": [CALL]}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        body = {**HEAD, "object": "chat.completion", "choices": [choice], "usage": USAGE}
        return Reply(200, [("content-type", "application/json")], [json.dumps(body).encode()])
    head = {**HEAD, "object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [
        chunk({"role": "assistant", "content": "Let me check."}),
        chunk({"tool_calls": [{"index": 0, **CALL}]}),
        chunk({"content": " Done."}),
        chunk({}, "tool_calls"),
        {**head, "choices": [], "usage": USAGE},
    ]
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return Reply(
        200, [("content-type", "text/event-stream")], sse_frames(body + b"data: [DONE]\n\n")
    )


def responses_output(base: str, stream: bool) -> list[tuple[str, str]]:
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    tools: Any = [{"type": "function", "name": "look", "parameters": {"type": "object"}}]
    if stream:
        with o.responses.stream(model="m", input="look", tools=tools) as s:
            output = s.get_final_response().output
    else:
        output = o.responses.create(model="m", input="look", tools=tools).output
    return [
        (i.type, "".join(p.text for p in i.content if p.type == "output_text"))  # type: ignore[union-attr]
        if i.type == "message"
        else (i.type, i.name)  # type: ignore[union-attr]
        for i in output
    ]


def anthropic_content(base: str, stream: bool) -> list[tuple[str, str]]:
    a = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
    kw: dict[str, Any] = {
        "model": "m",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "look"}],
        "tools": [{"name": "look", "input_schema": {"type": "object"}}],
    }
    if stream:
        with a.messages.stream(**kw) as s:
            content = s.get_final_message().content
    else:
        content = a.messages.create(**kw).content
    return [(b.type, b.text if b.type == "text" else b.name) for b in content]  # type: ignore[union-attr]


@pytest.mark.parametrize("client", ["openai_responses", "anthropic_messages"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_content_streamed_after_a_tool_call_stays_before_it(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool, client: str
) -> None:
    fake.push(chat_answer)
    base = stack.proxy(fake, CHAT, inner=inner)
    if client == "openai_responses":
        expected = [("message", "Let me check. Done."), ("function_call", "look")]
        assert responses_output(base, stream) == expected
    else:
        expected = [("text", "Let me check. Done."), ("tool_use", "look")]
        assert anthropic_content(base, stream) == expected
