"""All twelve translated directions end to end: the official SDK as the client, the
middleware on uvicorn (127.0.0.1), a fake upstream replaying real captured answers —
over HTTP and as the wrapped inner app, streamed and not, including a streaming
client meeting a JSON answer and a non-streaming client meeting an SSE answer.

Each test checks that the client received what the upstream said: text, refusal,
tool calls (names and arguments), stop category and token usage."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from tests.helpers import expect
from tests.helpers.captures import load
from tests.helpers.servers import FakeUpstream, reply_from_capture

from .conftest import Stack

UPSTREAM_CAPTURES = {
    "openai_chat_completions": [
        "chat_json_text_basic",
        "chat_json_parallel_tool_calls",
        "chat_json_refusal",
        "chat_json_cached_tokens",
        "chat_sse_text_basic_include_usage",
        "chat_sse_parallel_tool_calls",
        "chat_sse_max_tokens_length",
    ],
    "openai_responses": [
        "responses_json_text_basic",
        "responses_json_refusal",
        "responses_json_cached_tokens",
        "responses_sse_text_basic",
        "responses_sse_parallel_function_calls",
        "responses_sse_reasoning_summary",
        "responses_sse_incomplete_max_output_tokens",
    ],
    "anthropic_messages": [
        "anthropic_json_text_basic",
        "anthropic_json_parallel_tool_use",
        "anthropic_json_max_tokens",
        "anthropic_json_cache_read",
        "anthropic_json_redacted_thinking",
        "anthropic_sse_text_basic",
        "anthropic_sse_parallel_tool_use",
        "anthropic_sse_thinking_signature_delta",
    ],
    "gemini_generate_content": [
        "gemini_json_text_basic",
        "gemini_json_tools",
        "gemini_json_max_tokens",
        "gemini_json_thinking",
        "gemini_json_safety_settings",
        "gemini_sse_text_basic",
        "gemini_sse_tools",
        "gemini_sse_thinking",
        "gemini_sse_tool_call_thought_signature",
    ],
}
CLIENTS = [
    "openai_chat_completions",
    "openai_responses",
    "anthropic_messages",
    "gemini_generate_content",
]
CASES = [
    (client, upstream, name)
    for upstream, names in UPSTREAM_CAPTURES.items()
    for name in names
    for client in CLIENTS
    if client != upstream
]


def gemini_client(base: str) -> genai.Client:
    return genai.Client(
        api_key="g-test",
        http_options=types.HttpOptions(base_url=base, retry_options=None),
    )


def call_client(client: str, base: str, stream: bool) -> expect.Gist:
    """One request of the client's protocol, the SDK's way; the answer's gist."""
    if client == "gemini_generate_content":
        g = gemini_client(base)
        if stream:
            chunks = list(g.models.generate_content_stream(model="any-model", contents="hi"))
            return expect.from_gemini(chunks)
        return expect.from_gemini([g.models.generate_content(model="any-model", contents="hi")])
    if client == "anthropic_messages":
        a = anthropic.Anthropic(base_url=base, api_key="sk-ant-test", max_retries=0)
        args: dict[str, Any] = {
            "model": "any-model",
            "max_tokens": 256,
            "messages": [{"role": "user", "content": "hi"}],
        }
        if stream:
            with a.messages.stream(**args) as s:
                return expect.from_anthropic(s.get_final_message())
        return expect.from_anthropic(a.messages.create(**args))
    o = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    if client == "openai_chat_completions":
        msgs = [{"role": "user", "content": "hi"}]
        if stream:
            with o.chat.completions.stream(
                model="any-model",
                messages=msgs,
                stream_options={"include_usage": True},  # type: ignore[arg-type]
            ) as s:
                # get_final_completion() refuses finish_reason "length"; the stream's
                # accumulated snapshot is what the SDK built from the events.
                for _ in s:
                    pass
                return expect.from_chat(s.current_completion_snapshot)
        return expect.from_chat(o.chat.completions.create(model="any-model", messages=msgs))  # type: ignore[arg-type]
    if stream:
        # The SDK's get_final_response() only accepts response.completed; refusals end
        # in response.failed (spec: refusal -> failed), so take whichever terminal came.
        with o.responses.stream(model="any-model", input="hi") as s:
            terminal = [
                ev.response
                for ev in s
                if ev.type in ("response.completed", "response.incomplete", "response.failed")
            ]
        assert len(terminal) == 1
        return expect.from_responses(terminal[0])
    return expect.from_responses(o.responses.create(model="any-model", input="hi"))


def assert_same_gist(got: expect.Gist, want: expect.Gist) -> None:
    assert got.text == want.text
    if want.stop == "refused" and not want.refusal:
        # A block without wording (Gemini SAFETY): the client may be told why.
        assert got.refusal in ("", "The answer was blocked by Gemini (SAFETY).")
    else:
        assert got.refusal == want.refusal
    assert got.calls == want.calls
    assert got.stop == want.stop
    if got.input_tokens is not None and want.input_tokens is not None:
        assert got.input_tokens == want.input_tokens
    if got.output_tokens is not None and want.output_tokens is not None:
        assert got.output_tokens == want.output_tokens


@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize(("client", "upstream", "name"), CASES)
def test_client_receives_what_the_upstream_answered(
    stack: Stack,
    fake: FakeUpstream,
    client: str,
    upstream: str,
    name: str,
    stream: bool,
    transport: str,
) -> None:
    fake.push(reply_from_capture(name))
    base = stack.proxy(fake, upstream, inner=transport == "inner")  # type: ignore[arg-type]
    got = call_client(client, base, stream)
    assert_same_gist(got, expect.from_capture(name))
    # The upstream received one request of its own protocol, at its own path.
    assert len(fake.seen) == 1
    sent = fake.seen[0]
    body = sent.json()
    if upstream == "gemini_generate_content":
        method = "streamGenerateContent" if stream else "generateContent"
        assert sent.path.endswith(f"/v1beta/models/any-model:{method}")
        assert sent.query == (b"alt=sse" if stream else b"")
        assert "model" not in body and "stream" not in body
        return
    assert sent.path.endswith(
        {
            "openai_chat_completions": "/chat/completions",
            "openai_responses": "/responses",
            "anthropic_messages": "/v1/messages",
        }[upstream]
    )
    assert body["model"] == "any-model"
    assert bool(body.get("stream")) == stream
    if upstream == "openai_chat_completions" and stream:
        assert body["stream_options"] == {"include_usage": True}
    if upstream == "anthropic_messages":
        assert sent.headers["anthropic-version"] == "2023-06-01"


def test_capture_requests_translate_to_valid_upstream_requests_keeping_tools(
    stack: Stack, fake: FakeUpstream
) -> None:
    """The parallel-tools capture's Chat request, sent to an Anthropic upstream, keeps
    its system text, user turn and tool definition."""
    fake.push(reply_from_capture("anthropic_json_parallel_tool_use"))
    base = stack.proxy(fake, "anthropic_messages")
    o = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    req = load("chat_json_parallel_tool_calls")["request"]["body"]
    o.chat.completions.create(**req)
    sent = fake.seen[0].json()
    # with the cache breakpoints an OpenAI client gets toward Anthropic
    mark = {"cache_control": {"type": "ephemeral"}}
    assert sent["system"] == [{"type": "text", "text": "Use parallel tool calling.", **mark}]
    user = {"type": "text", "text": req["messages"][1]["content"], **mark}
    assert sent["messages"] == [{"role": "user", "content": [user]}]
    (tool,) = sent["tools"]
    assert tool["name"] == "secret_retrieval_tool"
    assert tool["input_schema"] == req["tools"][0]["function"]["parameters"]
    assert sent["max_tokens"] == 4096
