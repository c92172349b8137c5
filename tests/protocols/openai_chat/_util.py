"""Shared helpers of the Chat codec tests."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessageToolCallUnion,
)

from proxai_asgi import canonical as c
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols.openai_chat import CODEC
from tests.helpers.validate_chat import ChatStream
from tests.protocols import _codec
from tests.protocols._codec import sse_events


def req(**kw: Any) -> c.Request:
    kw.setdefault("model", "gpt-test")
    kw.setdefault("messages", [c.Message(role="user", content=[c.Text(text="hi")])])
    return c.Request(**kw)


def decode_req(body: dict[str, Any]) -> tuple[c.Request, TranslationReport]:
    report = TranslationReport()
    return CODEC.decode_request(json.dumps(body).encode(), report), report


def frames(*chunks: dict[str, Any] | str) -> bytes:
    """Chat SSE from chunk objects (a str is sent verbatim, e.g. "[DONE]")."""
    out = b""
    for ch in chunks:
        data = ch if isinstance(ch, str) else json.dumps(ch)
        out += b"data: " + data.encode() + b"\n\n"
    return out


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **kw: Any
) -> dict[str, Any]:
    """An upstream chunk in OpenAI's shape."""
    base: dict[str, Any] = {
        "id": "chatcmpl-up1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-up",
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
    }
    base.update(kw)
    return base


def usage_chunk(prompt: int = 5, completion: int = 7, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "chatcmpl-up1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-up",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }
    base.update(kw)
    return base


def normalized_stream(s: ChatStream) -> dict[str, Any]:
    """A validated stream folded into the fields of a non-streamed message."""
    return {
        "id": s.id,
        "created": s.created,
        "model": s.model,
        "content": s.content,
        "refusal": s.refusal,
        "reasoning_content": s.reasoning,
        "tool_calls": [
            {
                "id": t["id"],
                "type": t["type"],
                t["type"]: {"name": t["name"], _arg(t): t["arguments"]},
            }
            for t in s.tool_calls
        ]
        or None,
        "annotations": s.annotations or None,
        "finish_reason": s.finish_reason,
        "usage": s.usage,
    }


def _arg(t: dict[str, Any]) -> str:
    return "arguments" if t["type"] == "function" else "input"


def normalized_response(body: bytes) -> dict[str, Any]:
    obj = json.loads(body)
    msg = obj["choices"][0]["message"]
    return {
        "id": obj["id"],
        "created": obj["created"],
        "model": obj["model"],
        "content": msg["content"],
        "refusal": msg["refusal"],
        "reasoning_content": msg.get("reasoning_content"),
        "tool_calls": msg.get("tool_calls"),
        "annotations": msg.get("annotations"),
        "finish_reason": obj["choices"][0]["finish_reason"],
        "usage": obj["usage"],
    }


def sdk_calls(calls: list[ChatCompletionMessageToolCallUnion] | None) -> list[tuple[str, str, str]]:
    """(id, name, arguments or input) of an SDK message's tool calls."""
    out = []
    for t in calls or ():
        if t.type == "function":
            out.append((t.id, t.function.name, t.function.arguments))
        else:
            out.append((t.id, t.custom.name, t.custom.input))
    return out


def sdk_accumulate(body: bytes) -> ChatCompletion:
    """The client's view of a stream through the openai SDK's own accumulator."""
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for ev in sse_events(body):
        if ev.is_done:
            break
        obj = json.loads(ev.data)
        if "error" in obj:
            raise RuntimeError(obj["error"]["message"])
        state.handle_chunk(ChatCompletionChunk.model_validate(obj))
    # The snapshot, not get_final_completion(): the latter parses and raises on length.
    snapshot = state.current_completion_snapshot
    return ChatCompletion.model_validate(snapshot.model_dump(exclude_unset=True))


def decode_stream(body: bytes, step: int | None = None) -> list[c.StreamEvent]:
    return _codec.decode_stream(CODEC, body, step)


def encode_stream(events: Iterable[c.StreamEvent], request: c.Request | None = None) -> bytes:
    return _codec.encode_stream(CODEC, events, request or req(stream=True))
