"""Anthropic's mid-conversation ``role: "system"`` messages (Claude 4.8 and later;
Claude Code sends them), through the real ``anthropic`` SDK (issue 26).

Placement, as Anthropic takes them: right after a user message (or an assistant message
that ends in server tool use), then the last message or one before an assistant
message. Elsewhere (first in ``messages``, the OpenAI habit; after an assistant turn,
another system message, or before a user turn) a 400 in Anthropic's shape, before any
upstream call. (Before: any of them was accepted and hoisted into the system prompt.)

A well-placed one reaches each upstream in its place: a Chat ``system`` message, a
Responses ``system`` message item, the Anthropic bytes untouched (pass-through). Gemini
has no system turn inside a conversation: it is appended to ``systemInstruction`` (its
authority kept, its place not) and reported as ``messages.system`` in
``x-proxai-dropped-fields``. Streamed and not, over both transports.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from tests.helpers.canned import codec_answer
from tests.helpers.servers import FakeUpstream, Reply

from .conftest import Stack

CHAT: ProtocolName = "openai_chat_completions"
RESPONSES: ProtocolName = "openai_responses"
ANTHROPIC: ProtocolName = "anthropic_messages"
GEMINI: ProtocolName = "gemini_generate_content"
ANSWER = c.Response(
    id="x-1",
    model="m",
    content=[c.Text(text="ok")],
    stop_reason="end_turn",
    usage=c.Usage(input_tokens=3, output_tokens=1),
)
TOOLS: Any = [{"name": "ls", "input_schema": {"type": "object", "properties": {}}}]
USER: Any = {"role": "user", "content": "hi"}
ASSISTANT: Any = {"role": "assistant", "content": "hello"}
SYSTEM: Any = {"role": "system", "content": "Answer in French."}
CALL: Any = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "let me look"},
        {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}},
    ],
}
RESULT: Any = {
    "role": "user",
    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a b"}],
}
SEARCHING: Any = {
    "role": "assistant",
    "content": [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "q"},
        }
    ],
}


def ask(base: str, messages: list[Any], stream: bool) -> tuple[str, dict[str, str]]:
    """The answer's text and the response headers, as the SDK got them."""
    a = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
    kw: dict[str, Any] = {
        "model": "m",
        "max_tokens": 50,
        "system": "Be brief.",
        "tools": TOOLS,
        "messages": messages,
    }
    raw = a.messages.with_raw_response.create(**kw, stream=stream)
    headers = dict(raw.headers)
    if stream:
        text = ""
        for event in raw.parse():
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text += event.delta.text
        return text, headers
    return "".join(b.text for b in raw.parse().content if b.type == "text"), headers


# ---------------------------------------------------------------- placement rules

# (the rule it satisfies, the conversation)
ACCEPTED = [
    ("after-a-user-turn-and-last", [USER, SYSTEM]),
    ("after-tool-results-and-last", [USER, CALL, RESULT, SYSTEM]),
    ("after-a-user-turn-before-an-assistant-turn", [USER, SYSTEM, ASSISTANT]),
    ("after-server-tool-use-before-an-assistant-turn", [USER, SEARCHING, SYSTEM, ASSISTANT]),
]


@pytest.mark.parametrize("upstream", [CHAT, RESPONSES, GEMINI, ANTHROPIC])
@pytest.mark.parametrize(("rule", "messages"), ACCEPTED, ids=[r for r, _ in ACCEPTED])
def test_a_well_placed_system_message_is_accepted(
    stack: Stack, fake: FakeUpstream, rule: str, messages: list[Any], upstream: ProtocolName
) -> None:
    fake.push(codec_answer(upstream, ANSWER))
    assert ask(stack.proxy(fake, upstream), messages, stream=False)[0] == "ok"
    assert len(fake.seen) == 1


# (the rule it breaks, the conversation, what the 400 says)
REFUSED = [
    (
        "first-in-messages",
        [SYSTEM, USER],
        'messages.0.role: a "system" message cannot be the first message. Put the system '
        "prompt in the top-level `system` parameter; a mid-conversation system message must "
        "immediately follow a user message.",
    ),
    (
        "after-an-assistant-turn",
        [USER, ASSISTANT, SYSTEM],
        'messages.2.role: a "system" message must immediately follow a user message (or an '
        "assistant message that ends in server tool use), not an assistant message.",
    ),
    (
        "two-in-a-row",
        [USER, SYSTEM, SYSTEM],
        'messages.1.role: a "system" message must be the last message or be followed by an '
        "assistant message, not a system message.",
    ),
    (
        "before-a-user-turn",
        [USER, SYSTEM, USER],
        'messages.1.role: a "system" message must be the last message or be followed by an '
        "assistant message, not a user message.",
    ),
]


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize("upstream", [CHAT, RESPONSES, GEMINI])
@pytest.mark.parametrize(("rule", "messages", "says"), REFUSED, ids=[r for r, _, _ in REFUSED])
def test_a_misplaced_system_message_is_a_400_in_anthropics_shape_before_any_upstream_call(
    stack: Stack,
    fake: FakeUpstream,
    inner: bool,
    rule: str,
    messages: list[Any],
    says: str,
    upstream: ProtocolName,
) -> None:
    fake.push(codec_answer(upstream, ANSWER))
    with pytest.raises(anthropic.BadRequestError) as caught:
        ask(stack.proxy(fake, upstream, inner=inner), messages, stream=False)
    assert caught.value.status_code == 400
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": says},
    }
    assert fake.seen == []


# ------------------------------------------------------------ what each upstream gets


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_misplaced_system_message_passes_through_to_anthropic_for_it_to_judge(
    stack: Stack, fake: FakeUpstream, inner: bool
) -> None:
    """Pass-through forwards the client's bytes; Anthropic answers its own 400."""
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
    fake.push(Reply(400, [("content-type", "application/json")], [json.dumps(error).encode()]))
    with pytest.raises(anthropic.BadRequestError) as caught:
        ask(stack.proxy(fake, ANTHROPIC, inner=inner), [SYSTEM, USER], stream=False)
    assert caught.value.body == error
    assert fake.seen[0].json()["messages"] == [SYSTEM, USER]


CONVERSATION = [USER, CALL, RESULT, SYSTEM]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_system_message_reaches_chat_as_a_system_message_in_place(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    fake.push(codec_answer(CHAT, ANSWER))
    text, headers = ask(stack.proxy(fake, CHAT, inner=inner), CONVERSATION, stream)
    assert text == "ok"
    sent = fake.seen[0].json()["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "system"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert sent[-1] == {"role": "system", "content": "Answer in French."}
    assert "x-proxai-dropped-fields" not in headers


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_system_message_reaches_responses_as_a_system_message_item_in_place(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    fake.push(codec_answer(RESPONSES, ANSWER))
    text, headers = ask(stack.proxy(fake, RESPONSES, inner=inner), CONVERSATION, stream)
    assert text == "ok"
    sent = fake.seen[0].json()
    assert sent["instructions"] == "Be brief."
    kinds = [i.get("role", i["type"]) for i in sent["input"]]
    assert kinds == ["user", "assistant", "function_call", "function_call_output", "system"]
    assert sent["input"][-1] == {
        "type": "message",
        "role": "system",
        "content": [{"type": "input_text", "text": "Answer in French."}],
    }
    assert "x-proxai-dropped-fields" not in headers


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_system_message_reaches_anthropic_untouched(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    fake.push(codec_answer(ANTHROPIC, ANSWER))
    text, _ = ask(stack.proxy(fake, ANTHROPIC, inner=inner), CONVERSATION, stream)
    assert text == "ok"
    sent = fake.seen[0].json()
    assert (sent["system"], sent["messages"]) == ("Be brief.", CONVERSATION)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_system_message_joins_gemini_system_instruction_and_is_reported(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    fake.push(codec_answer(GEMINI, ANSWER))
    text, headers = ask(stack.proxy(fake, GEMINI, inner=inner), CONVERSATION, stream)
    assert text == "ok"
    sent = fake.seen[0].json()
    assert sent["systemInstruction"] == {
        "parts": [{"text": "Be brief."}, {"text": "Answer in French."}]
    }
    assert [t["role"] for t in sent["contents"]] == ["user", "model", "user"]
    assert "Answer in French." not in str(sent["contents"])
    assert headers["x-proxai-dropped-fields"] == "messages.system"
