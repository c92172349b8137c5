"""A tool call without arguments reaches every client as an empty JSON object —
``"{}"`` for OpenAI clients, ``input: {}`` for Anthropic clients — from every upstream,
streamed and not, over both transports (issue 17, defect 1: streams used to carry
``""``, which clients that ``JSON.parse`` the arguments, Codex among them, fail on)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from tests.helpers.servers import FakeUpstream, Reply, sse_frames

from .conftest import Stack

SSE = [("content-type", "text/event-stream")]
JSON = [("content-type", "application/json")]


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = b""
    for event, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        out += (f"event: {event}\n" if event else "").encode() + f"data: {payload}\n\n".encode()
    return out


USAGE = {"input_tokens": 5, "output_tokens": 2}
ANTHROPIC_MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": USAGE,
}
CHAT_HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "m",
    "status": "in_progress",
    "output": [],
}
CALL_ITEM = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "now",
    "arguments": "",
    "status": "completed",
}


def upstream_reply(upstream: str, stream: bool) -> Reply:
    if upstream == "anthropic_messages":
        if not stream:
            body = {
                **ANTHROPIC_MESSAGE,
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}],
            }
            return Reply(200, JSON, [json.dumps(body).encode()])
        events: list[tuple[str | None, dict[str, Any] | str]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {**ANTHROPIC_MESSAGE, "content": [], "stop_reason": None},
                },
            ),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "now",
                        "input": {},
                    },
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": ""},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": 2},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    elif upstream == "openai_chat_completions":
        call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "now"}}
        if not stream:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{**call, "function": {"name": "now", "arguments": ""}}],
            }
            body = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
            }
            return Reply(200, JSON, [json.dumps(body).encode()])
        events = [
            (
                None,
                {
                    **CHAT_HEAD,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": None},
                            "finish_reason": None,
                        }
                    ],
                },
            ),
            (
                None,
                {
                    **CHAT_HEAD,
                    "choices": [
                        {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}
                    ],
                },
            ),
            (
                None,
                {
                    **CHAT_HEAD,
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
                },
            ),
            (
                None,
                {
                    **CHAT_HEAD,
                    "choices": [],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
                },
            ),
            (None, "[DONE]"),
        ]
    else:
        done = {
            **RESPONSE,
            "status": "completed",
            "output": [CALL_ITEM],
            "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
        }
        if not stream:
            return Reply(200, JSON, [json.dumps(done).encode()])
        added = {**CALL_ITEM, "status": "in_progress"}
        events = [
            (
                "response.created",
                {"type": "response.created", "response": RESPONSE, "sequence_number": 0},
            ),
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": added,
                    "sequence_number": 1,
                },
            ),
            (
                "response.function_call_arguments.done",
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": "fc_1",
                    "output_index": 0,
                    "name": "now",
                    "arguments": "",
                    "sequence_number": 2,
                },
            ),
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "output_index": 0,
                    "item": CALL_ITEM,
                    "sequence_number": 3,
                },
            ),
            (
                "response.completed",
                {"type": "response.completed", "response": done, "sequence_number": 4},
            ),
        ]
    return Reply(200, SSE, sse_frames(_sse(events)))


TOOL = {
    "name": "now",
    "description": "the time",
    "parameters": {"type": "object", "properties": {}},
}
PROTOCOLS = ["openai_chat_completions", "openai_responses", "anthropic_messages"]
PAIRS = [(c, u) for c in PROTOCOLS for u in PROTOCOLS if c != u]


def call_arguments(base: str, client: str, stream: bool) -> Any:
    """The arguments of the one tool call, as the client's SDK hands them over."""
    if client == "anthropic_messages":
        a = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
        kw: dict[str, Any] = {
            "model": "m",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "time?"}],
            "tools": [
                {"name": "now", "description": "the time", "input_schema": TOOL["parameters"]}
            ],
        }
        if stream:
            with a.messages.stream(**kw) as s:
                msg = s.get_final_message()
        else:
            msg = a.messages.create(**kw)
        (block,) = [b for b in msg.content if b.type == "tool_use"]
        return block.input
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    if client == "openai_chat_completions":
        tools: Any = [{"type": "function", "function": TOOL}]
        chat_kw: dict[str, Any] = {
            "model": "m",
            "messages": [{"role": "user", "content": "time?"}],
            "tools": tools,
        }
        if stream:
            with o.chat.completions.stream(**chat_kw) as cs:
                completion = cs.get_final_completion()
        else:
            completion = o.chat.completions.create(**chat_kw)
        calls = completion.choices[0].message.tool_calls or []
        (only,) = calls
        return only.function.arguments  # type: ignore[union-attr]
    rtools: Any = [{"type": "function", **TOOL}]
    if stream:
        with o.responses.stream(model="m", input="time?", tools=rtools) as rs:
            response = rs.get_final_response()
    else:
        response = o.responses.create(model="m", input="time?", tools=rtools)
    (item,) = [i for i in response.output if i.type == "function_call"]
    return item.arguments  # type: ignore[union-attr]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("client", "upstream"), PAIRS)
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_an_argumentless_tool_call_is_an_empty_json_object_for_every_client(
    stack: Stack, fake: FakeUpstream, inner: bool, client: str, upstream: str, stream: bool
) -> None:
    fake.push(upstream_reply(upstream, stream))
    base = stack.proxy(fake, upstream, inner=inner)  # type: ignore[arg-type]
    arguments = call_arguments(base, client, stream)
    assert arguments == ({} if client == "anthropic_messages" else "{}")
