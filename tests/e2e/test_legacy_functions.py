"""A Chat client of the legacy ``functions`` / ``function_call`` API gets its own shape
back from every other upstream (issue 17): ``message.function_call`` (streamed:
``delta.function_call``) and ``finish_reason: "function_call"``, never ``tool_calls`` it
does not read; through the openai SDK, streamed and not, over both transports."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from proxai_asgi import canonical as c
from tests.helpers.canned import codec_answer
from tests.helpers.servers import FakeUpstream

from .conftest import Stack

ARGS = '{"query": "proxai"}'
CALLED = c.Response(
    id="up_1",
    model="m",
    content=[c.ToolCall(id="toolu_1", name="lookup", arguments=ARGS)],
    stop_reason="tool_use",
    usage=c.Usage(input_tokens=5, output_tokens=4),
)
FUNCTIONS: Any = [{"name": "lookup", "parameters": {"type": "object", "properties": {"query": {}}}}]


def legacy_answer(base: str, stream: bool) -> tuple[dict[str, Any], str | None, bool]:
    """(function_call name and arguments, finish_reason, whether tool_calls appeared)."""
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    kw: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "look it up"}],
        "functions": FUNCTIONS,
    }
    if not stream:
        choice = o.chat.completions.create(**kw).choices[0]
        call = choice.message.function_call
        assert call is not None
        fc = {"name": call.name, "arguments": call.arguments}
        return fc, choice.finish_reason, choice.message.tool_calls is not None
    name, arguments, finish, tool_calls = "", "", None, False
    for chunk in o.chat.completions.create(stream=True, **kw):
        for ch in chunk.choices:
            d = ch.delta
            tool_calls = tool_calls or d.tool_calls is not None
            if d.function_call is not None:
                name += d.function_call.name or ""
                arguments += d.function_call.arguments or ""
            finish = ch.finish_reason or finish
    return {"name": name, "arguments": arguments}, finish, tool_calls


@pytest.mark.parametrize(
    "upstream", ["anthropic_messages", "openai_responses", "gemini_generate_content"]
)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_legacy_functions_client_gets_function_call_back(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool, upstream: str
) -> None:
    fake.push(codec_answer(upstream, CALLED))  # type: ignore[arg-type]
    call, finish, tool_calls = legacy_answer(stack.proxy(fake, upstream, inner=inner), stream)  # type: ignore[arg-type]
    assert call["name"] == "lookup" and json.loads(call["arguments"]) == json.loads(ARGS)
    assert finish == "function_call" and not tool_calls
    sent = fake.seen[0].json()
    if upstream == "anthropic_messages":  # one call per legacy answer: asked for one
        assert sent["tool_choice"]["disable_parallel_tool_use"] is True
    elif upstream == "openai_responses":
        assert sent["parallel_tool_calls"] is False
