"""A Gemini thought signature carried through clients whose protocols have no field for
it (issue 12's carriers): a Responses client (Codex) keeps it in a reasoning item's
``encrypted_content``, an Anthropic client (Claude Code) in a thinking block's
``signature``. When the client replays its history, Gemini gets its own signature back
on the function call it signed. Streamed and not, over both transports, through the
real SDKs."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from proxai_asgi import canonical as c
from tests.helpers.canned import codec_answer
from tests.helpers.sdk_turns import responses_output
from tests.helpers.servers import FakeUpstream

from .conftest import Stack

GEMINI = "gemini_generate_content"
SIGNATURE = "CikB0e2Kbw5tJ9dwYB9mGemini+signature/A=="
FIRST = c.Response(
    id="resp-g1",
    model="m",
    content=[
        c.Reasoning(summary=True, thought_signature=SIGNATURE),  # Gemini signs the call
        c.ToolCall(id="call_g1", name="shell", arguments='{"cmd": "ls"}'),
    ],
    stop_reason="tool_use",
    usage=c.Usage(input_tokens=5, output_tokens=9),
)
SECOND = c.Response(
    id="resp-g2",
    model="m",
    content=[c.Text(text="Two files.")],
    stop_reason="end_turn",
    usage=c.Usage(input_tokens=20, output_tokens=3),
)


def _signed_call(fake: FakeUpstream) -> dict[str, Any]:
    """The function-call part of the model turn Gemini got back on the second turn."""
    contents = fake.seen[1].json()["contents"]
    model = next(m for m in contents if m["role"] == "model")
    (part,) = [p for p in model["parts"] if "functionCall" in p]
    return dict(part)


def _responses_turn(o: openai.OpenAI, items: list[Any], stream: bool) -> list[dict[str, Any]]:
    tools: Any = [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]
    return responses_output(o, stream, model="m", input=items, tools=tools, store=False)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_responses_client_gives_gemini_its_signature_back(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    fake.push(codec_answer(GEMINI, FIRST)).push(codec_answer(GEMINI, SECOND))
    o = openai.OpenAI(base_url=stack.proxy(fake, GEMINI, inner=inner) + "/v1", api_key="k")
    user = {"role": "user", "content": "list the files"}
    output = _responses_turn(o, [user], stream)
    reasoning, call = output
    assert reasoning["type"] == "reasoning" and call["type"] == "function_call"
    assert SIGNATURE not in reasoning["encrypted_content"]  # packed, not the bare token
    result = {"type": "function_call_output", "call_id": call["call_id"], "output": "a b"}
    _responses_turn(o, [user, reasoning, call, result], stream)
    part = _signed_call(fake)
    assert part["thoughtSignature"] == SIGNATURE
    assert part["functionCall"]["name"] == "shell"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_an_anthropic_client_gives_gemini_its_signature_back(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    fake.push(codec_answer(GEMINI, FIRST)).push(codec_answer(GEMINI, SECOND))
    a = anthropic.Anthropic(base_url=stack.proxy(fake, GEMINI, inner=inner), api_key="k")
    tools: Any = [{"name": "shell", "input_schema": {"type": "object"}}]
    messages: list[Any] = [{"role": "user", "content": "list the files"}]
    kw: dict[str, Any] = {"model": "m", "max_tokens": 100, "tools": tools}
    if stream:
        with a.messages.stream(messages=messages, **kw) as s:
            first = s.get_final_message()
    else:
        first = a.messages.create(messages=messages, **kw)
    blocks = [b.model_dump(exclude_none=True) for b in first.content]
    thinking, use = blocks
    assert thinking["type"] == "thinking" and use["type"] == "tool_use"
    assert SIGNATURE not in thinking["signature"]  # packed, not the bare token
    messages += [
        {"role": "assistant", "content": blocks},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "a b"}],
        },
    ]
    a.messages.create(messages=messages, **kw)
    part = _signed_call(fake)
    assert part["thoughtSignature"] == SIGNATURE
