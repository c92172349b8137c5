"""Prompt caching across protocols, through the public API: an OpenAI SDK client in
front of a scripted Anthropic upstream (over HTTP and as the wrapped app, streamed and
not). The upstream checks the cache breakpoints it received and bills as Anthropic
does; the client must see the cached tokens in its own usage shape. The other way, an
Anthropic SDK client sees an OpenAI upstream's cached tokens as
``cache_read_input_tokens``."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName, unfold
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols import get_codec
from tests.helpers.servers import FakeUpstream, Reply, Seen, sse_frames

from .conftest import Stack

UNCACHED, WRITTEN, READ, OUTPUT = 50, 200, 1500, 7
PROMPT = UNCACHED + WRITTEN + READ  # OpenAI semantics: every prompt token
SYSTEM = "You are a coding agent."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "sh",
            "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
    }
]
CHAT_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "List the files."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "a.txt b.txt"},
]
RESPONSES_INPUT: list[dict[str, Any]] = [
    {"role": "developer", "content": SYSTEM},
    {"role": "user", "content": "List the files."},
    {"type": "function_call", "call_id": "call_1", "name": "sh", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "a.txt b.txt"},
]
RESPONSES_TOOLS = [{"type": "function", **TOOLS[0]["function"]}]
# What the upstream must receive: tools, system, the end of the previous turn (the
# first user message) and the tail (the tool result).
EXPECTED_MARKERS = ["tools[0]", "system[0]", "messages[0].content[0]", "messages[2].content[0]"]


def markers(body: dict[str, Any]) -> list[str]:
    found = [f"tools[{i}]" for i, t in enumerate(body.get("tools") or []) if "cache_control" in t]
    if isinstance(body.get("system"), list):
        found += [f"system[{i}]" for i, b in enumerate(body["system"]) if "cache_control" in b]
    for i, m in enumerate(body["messages"]):
        if isinstance(m["content"], list):
            found += [
                f"messages[{i}].content[{j}]"
                for j, b in enumerate(m["content"])
                if b.get("cache_control") == {"type": "ephemeral"}
            ]
    return found


def anthropic_answer(seen: Seen) -> Reply:
    """Anthropic's answer, billed as Anthropic bills a request whose prefix was cached:
    ``input_tokens`` counts only what came after the last cache hit or write."""
    usage = {
        "input_tokens": UNCACHED,
        "cache_creation_input_tokens": WRITTEN,
        "cache_read_input_tokens": READ,
    }
    if not seen.json().get("stream"):
        body = {
            "id": "msg_cache",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": "Two files."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": OUTPUT},
        }
        return Reply(200, [("content-type", "application/json")], [json.dumps(body).encode()])
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_cache",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {**usage, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Two files."},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": OUTPUT},
        },
        {"type": "message_stop"},
    ]
    data = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    return Reply(200, [("content-type", "text/event-stream")], sse_frames(data))


def openai_answer(protocol: ProtocolName) -> Any:
    """An OpenAI upstream's answer (written by its codec) reporting cached tokens."""

    def answer(seen: Seen) -> Reply:
        codec = get_codec(protocol)
        request = codec.decode_request(seen.body, TranslationReport(lossy=True))
        response = c.Response(
            id="resp_cache",
            model="gpt-test",
            content=[c.Text(text="Two files.")],
            stop_reason="end_turn",
            usage=c.Usage(input_tokens=PROMPT, output_tokens=OUTPUT, cached_tokens=READ),
        )
        if not request.stream:
            body = codec.encode_response(response, request)
            return Reply(200, [("content-type", "application/json")], [body])
        encoder = codec.stream_encoder(request)
        chunks = [b for b in map(encoder.encode, unfold(response)) if b]
        return Reply(200, [("content-type", "text/event-stream")], chunks)

    return answer


TRANSPORTS = [pytest.param(False, id="http"), pytest.param(True, id="inner")]
STREAMS = [pytest.param(False, id="json"), pytest.param(True, id="stream")]


@pytest.mark.parametrize("inner", TRANSPORTS)
@pytest.mark.parametrize("stream", STREAMS)
def test_chat_client_on_anthropic_gets_breakpoints_and_sees_cached_tokens(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    fake.push(anthropic_answer)
    base = stack.proxy(fake, "anthropic_messages", inner=inner)
    o = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    args: dict[str, Any] = {"model": "claude-test", "messages": CHAT_MESSAGES, "tools": TOOLS}
    if stream:
        chunks = list(
            o.chat.completions.create(**args, stream=True, stream_options={"include_usage": True})
        )
        usage = chunks[-1].usage
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    else:
        completion = o.chat.completions.create(**args)
        usage, text = completion.usage, completion.choices[0].message.content
    assert text == "Two files."
    assert markers(fake.seen[-1].json()) == EXPECTED_MARKERS
    assert usage is not None and usage.prompt_tokens_details is not None
    assert usage.prompt_tokens == PROMPT
    assert usage.prompt_tokens_details.cached_tokens == READ
    assert usage.completion_tokens == OUTPUT


@pytest.mark.parametrize("inner", TRANSPORTS)
@pytest.mark.parametrize("stream", STREAMS)
def test_responses_client_on_anthropic_gets_breakpoints_and_sees_cached_tokens(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    fake.push(anthropic_answer)
    base = stack.proxy(fake, "anthropic_messages", inner=inner)
    o = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    args: dict[str, Any] = {
        "model": "claude-test",
        "input": RESPONSES_INPUT,
        "tools": RESPONSES_TOOLS,
    }
    if stream:
        with o.responses.stream(**args) as s:
            response = s.get_final_response()
    else:
        response = o.responses.create(**args)
    assert response.output_text == "Two files."
    assert markers(fake.seen[-1].json()) == EXPECTED_MARKERS
    usage = response.usage
    assert usage is not None
    assert usage.input_tokens == PROMPT
    assert usage.input_tokens_details.cached_tokens == READ


def test_prompt_cache_key_toward_anthropic_is_reported_not_silently_dropped(
    stack: Stack, fake: FakeUpstream
) -> None:
    fake.push(anthropic_answer)
    base = stack.proxy(fake, "anthropic_messages")
    o = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    raw = o.responses.with_raw_response.create(
        model="claude-test", input="hi", prompt_cache_key="session-42"
    )
    assert "prompt_cache_key" in raw.headers["x-proxai-dropped-fields"].split(", ")
    assert "prompt_cache_key" not in fake.seen[-1].json()
    # the breakpoints still give Anthropic's cache what the key asked of OpenAI's
    assert markers(fake.seen[-1].json()) == ["messages[0].content[0]"]


@pytest.mark.parametrize("inner", TRANSPORTS)
@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("upstream", ["openai_chat_completions", "openai_responses"])
def test_anthropic_client_sees_openai_cached_tokens_as_cache_reads(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool, upstream: ProtocolName
) -> None:
    fake.push(openai_answer(upstream))
    base = stack.proxy(fake, upstream, inner=inner)
    a = anthropic.Anthropic(base_url=base, api_key="sk-ant-test", max_retries=0)
    args: dict[str, Any] = {
        "model": "gpt-test",
        "max_tokens": 64,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": "List the files."}],
    }
    if stream:
        with a.messages.stream(**args) as s:
            message = s.get_final_message()
    else:
        message = a.messages.create(**args)
    assert message.content[0].type == "text" and message.content[0].text == "Two files."
    # Anthropic's input_tokens excludes cache reads
    assert message.usage.input_tokens == PROMPT - READ
    assert message.usage.cache_read_input_tokens == READ
    assert message.usage.output_tokens == OUTPUT
