"""Anthropic thinking replayed by a Responses client (issue 17, defect 6): Anthropic
accepts a replayed thinking block only with its original text and signature, and a
Responses client (Codex) may replay a reasoning item with only its
``encrypted_content``. The carrier holds the text with the signature, so the next turn
sends Anthropic exactly the block it signed; streamed and not, over both transports."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from proxai_asgi import canonical as c
from tests.helpers.canned import codec_answer
from tests.helpers.sdk_turns import responses_output
from tests.helpers.servers import FakeUpstream

from .conftest import Stack

ANTHROPIC = "anthropic_messages"
THOUGHT = "The user wants a listing; I should run ls."
SIGNATURE = "EqQBCkYIBxgCKkD-sig"
TOOLS: Any = [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]
FIRST = c.Response(
    id="msg_1",
    model="m",
    content=[
        c.Reasoning(text=THOUGHT, signature=SIGNATURE),
        c.ToolCall(id="toolu_1", name="shell", arguments='{"cmd": "ls"}'),
    ],
    stop_reason="tool_use",
    usage=c.Usage(input_tokens=5, output_tokens=9),
)
SECOND = c.Response(
    id="msg_2",
    model="m",
    content=[c.Text(text="Two files.")],
    stop_reason="end_turn",
    usage=c.Usage(input_tokens=20, output_tokens=3),
)


def turn(o: openai.OpenAI, items: list[Any], stream: bool) -> list[dict[str, Any]]:
    include = ["reasoning.encrypted_content"]
    return responses_output(
        o, stream, model="m", input=items, tools=TOOLS, store=False, include=include
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_reasoning_item_replayed_without_content_sends_anthropic_the_signed_text(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    fake.push(codec_answer(ANTHROPIC, FIRST)).push(codec_answer(ANTHROPIC, SECOND))
    o = openai.OpenAI(base_url=stack.proxy(fake, ANTHROPIC, inner=inner) + "/v1", api_key="k")
    user = {"role": "user", "content": "list the files"}
    output = turn(o, [user], stream)
    reasoning, call = output
    assert reasoning["type"] == "reasoning" and call["type"] == "function_call"
    assert SIGNATURE not in reasoning["encrypted_content"]  # packed, not the bare token
    reasoning.pop("content", None)  # replayed as Codex may: the carrier alone
    result = {"type": "function_call_output", "call_id": call["call_id"], "output": "a b"}
    turn(o, [user, reasoning, call, result], stream)
    assistant = fake.seen[1].json()["messages"][1]
    assert assistant["role"] == "assistant"
    thinking = assistant["content"][0]
    assert thinking == {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE}
