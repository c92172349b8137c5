"""A system prompt in several parts reaches a Chat upstream as ONE string, the parts
kept apart by a blank line, as Responses ``instructions`` are (issue 17): many
Chat-compatible servers reject a content array in a system message. Anthropic, Responses
and Gemini clients through their SDKs, streamed and not, over both transports."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from proxai_asgi import canonical as c
from tests.helpers.canned import codec_answer
from tests.helpers.servers import FakeUpstream

from .conftest import Stack

CHAT = "openai_chat_completions"
ANSWER = c.Response(
    id="chatcmpl-1",
    model="m",
    content=[c.Text(text="ok")],
    stop_reason="end_turn",
    usage=c.Usage(input_tokens=3, output_tokens=1),
)


def ask(base: str, client: str, stream: bool) -> str:
    if client == "anthropic_messages":
        a = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
        system: Any = [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "No."}]
        kw: dict[str, Any] = {
            "model": "m",
            "max_tokens": 20,
            "system": system,
            "messages": [{"role": "user", "content": "hi"}],
        }
        if stream:
            with a.messages.stream(**kw) as s:
                return s.get_final_text()
        return "".join(b.text for b in a.messages.create(**kw).content if b.type == "text")
    if client == "openai_responses":
        o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
        items: Any = [{"role": "developer", "content": "No."}, {"role": "user", "content": "hi"}]
        if stream:
            with o.responses.stream(model="m", instructions="Be brief.", input=items) as rs:
                return rs.get_final_response().output_text
        return o.responses.create(model="m", instructions="Be brief.", input=items).output_text
    g = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=base))
    config = types.GenerateContentConfig(
        system_instruction=types.Content(
            parts=[types.Part(text="Be brief."), types.Part(text="No.")]
        )
    )
    if stream:
        chunks = g.models.generate_content_stream(model="m", contents="hi", config=config)
        return "".join(ch.text or "" for ch in chunks)
    return g.models.generate_content(model="m", contents="hi", config=config).text or ""


@pytest.mark.parametrize(
    "client", ["anthropic_messages", "openai_responses", "gemini_generate_content"]
)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_system_prompt_in_several_parts_reaches_chat_as_one_string(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool, client: str
) -> None:
    fake.push(codec_answer(CHAT, ANSWER))
    assert ask(stack.proxy(fake, CHAT, inner=inner), client, stream) == "ok"
    first = fake.seen[0].json()["messages"][0]
    assert first == {"role": "system", "content": "Be brief.\n\nNo."}
