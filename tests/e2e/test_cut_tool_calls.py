"""An upstream error in the middle of a tool call never announces the half-built call as
done (issue 17, defect 7): clients run a tool call when it is complete — Codex at its
``response.output_item.done``, Chat clients at ``finish_reason: tool_calls``, Anthropic
clients at ``content_block_stop`` — and its arguments are cut short."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.helpers.servers import FakeUpstream, Reply, sse_frames
from tests.helpers.validate_responses import validate_responses_stream

from .conftest import Stack

SSE = [("content-type", "text/event-stream")]
CUT = '{"cmd": "rm -rf ./build/x'


ANTHROPIC_START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    },
}


def cut_call_events(index: int) -> list[dict[str, object]]:
    """An Anthropic tool call's start and the first, cut, piece of its input."""
    tool = {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}}
    delta = {"type": "input_json_delta", "partial_json": CUT}
    return [
        {"type": "content_block_start", "index": index, "content_block": tool},
        {"type": "content_block_delta", "index": index, "delta": delta},
    ]


def anthropic_sse(events: list[dict[str, object]]) -> bytes:
    return b"".join(f"event: {d['type']}\ndata: {json.dumps(d)}\n\n".encode() for d in events)


def anthropic_cut_stream() -> bytes:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    return anthropic_sse([ANTHROPIC_START, *cut_call_events(0), error])


def chat_cut_stream() -> bytes:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "shell", "arguments": CUT},
    }
    chunks = [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]},
        {"error": {"message": "Overloaded", "type": "server_error", "param": None, "code": None}},
    ]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


UPSTREAMS = {"anthropic_messages": anthropic_cut_stream, "openai_chat_completions": chat_cut_stream}
TOOLS = {
    "openai_responses": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
    "openai_chat_completions": [
        {"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}
    ],
    "anthropic_messages": [{"name": "shell", "input_schema": {"type": "object"}}],
}
PATH = {
    "openai_responses": "/v1/responses",
    "openai_chat_completions": "/v1/chat/completions",
    "anthropic_messages": "/v1/messages",
}
CASES = [(c, u) for u in UPSTREAMS for c in PATH if c != u]


def request(client: str) -> dict[str, object]:
    body: dict[str, object] = {"model": "m", "stream": True, "tools": TOOLS[client]}
    if client == "openai_responses":
        body["input"] = "clean up"
    else:
        body["messages"] = [{"role": "user", "content": "clean up"}]
    if client == "anthropic_messages":
        body["max_tokens"] = 100
    return body


@pytest.mark.parametrize(("client", "upstream"), CASES)
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_tool_call_cut_by_an_upstream_error_is_never_announced_as_done(
    stack: Stack, fake: FakeUpstream, inner: bool, client: str, upstream: str
) -> None:
    fake.push(Reply(200, SSE, sse_frames(UPSTREAMS[upstream]())))
    proxy = stack.proxy(fake, upstream, inner=inner)  # type: ignore[arg-type]
    r = httpx.post(proxy + PATH[client], json=request(client), timeout=20)
    body = r.content
    if client == "openai_responses":
        s = validate_responses_stream(body)  # strict, and it allows the unfinished call
        assert s.response is not None and s.response["status"] == "failed"
        assert b"response.function_call_arguments.done" not in body
        assert not [e for e in s.events if e["type"] == "response.output_item.done"]
        assert s.response["output"] == []
    elif client == "openai_chat_completions":
        assert b'"finish_reason":"tool_calls"' not in body
        assert b'"error"' in body and body.endswith(b"data: [DONE]\n\n")
    else:
        assert b"event: content_block_stop" not in body and b"event: error" in body
        assert b"message_stop" not in body


def cut_answer(upstream: str) -> bytes:
    """A non-streamed answer that the token limit cut inside a tool call's arguments."""
    if upstream == "openai_chat_completions":
        call = {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": CUT}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        choice = {"index": 0, "message": message, "finish_reason": "length"}
        usage = {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}
        body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m"}
        return json.dumps({**body, "choices": [choice], "usage": usage}).encode()
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "shell",
        "arguments": CUT,
        "status": "incomplete",
    }
    return json.dumps(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "m",
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [item],
            "usage": {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14},
        }
    ).encode()


@pytest.mark.parametrize("upstream", ["openai_chat_completions", "openai_responses"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_non_streamed_answer_cut_inside_a_tool_call_is_a_max_tokens_stop(
    stack: Stack, fake: FakeUpstream, inner: bool, upstream: str
) -> None:
    """Issue 17, defect 2: the same ``max_tokens`` stop the streamed answer gives, with a
    best-effort ``tool_use`` whose input is empty (a cut value is never handed over as
    if whole), not a 502."""
    import anthropic

    fake.push(Reply(200, [("content-type", "application/json")], [cut_answer(upstream)]))
    proxy = stack.proxy(fake, upstream, inner=inner)  # type: ignore[arg-type]
    a = anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0)
    msg = a.messages.create(
        model="m",
        max_tokens=9,
        messages=[{"role": "user", "content": "clean up"}],
        tools=[{"name": "shell", "input_schema": {"type": "object"}}],
    )
    assert msg.stop_reason == "max_tokens"
    (block,) = [b for b in msg.content if b.type == "tool_use"]
    assert block.input == {}
