"""An image in a tool result toward a Chat upstream (issue 17, defect 8; the documented
deviation from MP-13, docs/spec-index.md): Chat tool messages carry text only, so the
tool message keeps the text and the image follows in one user message labelled with the
call id. Anthropic and Responses clients, streamed and not, over both transports."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from proxai_asgi import canonical as c
from tests.helpers.canned import codec_answer
from tests.helpers.servers import FakeUpstream

from .conftest import Stack

CHAT = "openai_chat_completions"
PIXEL = "iVBORw0KGgo="
DATA_URL = "data:image/png;base64," + PIXEL
ANSWER = c.Response(
    id="chatcmpl-1",
    model="m",
    content=[c.Text(text="A red pixel.")],
    stop_reason="end_turn",
    usage=c.Usage(input_tokens=9, output_tokens=3),
)


def anthropic_turn(base: str, stream: bool) -> str:
    a = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
    image = {"type": "base64", "media_type": "image/png", "data": PIXEL}
    result: Any = {
        "type": "tool_result",
        "tool_use_id": "call_1",
        "content": [{"type": "text", "text": "shot:"}, {"type": "image", "source": image}],
    }
    kw: dict[str, Any] = {
        "model": "m",
        "max_tokens": 50,
        "tools": [{"name": "shot", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "Look."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "call_1", "name": "shot", "input": {}}],
            },
            {"role": "user", "content": [result]},
        ],
    }
    if stream:
        with a.messages.stream(**kw) as s:
            msg = s.get_final_message()
    else:
        msg = a.messages.create(**kw)
    return "".join(b.text for b in msg.content if b.type == "text")


def responses_turn(base: str, stream: bool) -> str:
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    output = [
        {"type": "input_text", "text": "shot:"},
        {"type": "input_image", "image_url": DATA_URL, "detail": "auto"},
    ]
    items: Any = [
        {"role": "user", "content": "Look."},
        {"type": "function_call", "call_id": "call_1", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": output},
    ]
    tools: Any = [{"type": "function", "name": "shot", "parameters": {"type": "object"}}]
    if stream:
        with o.responses.stream(model="m", input=items, tools=tools) as s:
            return s.get_final_response().output_text
    return o.responses.create(model="m", input=items, tools=tools).output_text


@pytest.mark.parametrize("client", ["anthropic_messages", "openai_responses"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_tool_result_image_reaches_chat_in_a_labelled_user_message_after_the_tool(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool, client: str
) -> None:
    fake.push(codec_answer(CHAT, ANSWER))
    base = stack.proxy(fake, CHAT, inner=inner)
    turn = anthropic_turn if client == "anthropic_messages" else responses_turn
    assert turn(base, stream) == "A red pixel."
    messages = fake.seen[0].json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "shot:"}
    label, image = messages[3]["content"]
    assert label == {"type": "text", "text": "[content returned by tool call call_1]"}
    assert image["type"] == "image_url" and image["image_url"]["url"] == DATA_URL
