"""Shared, sans-IO helpers of the spec tests: hand-written upstream wire inputs, and
the production pipeline (``proxai_asgi.pipeline``) that translates them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxai_asgi import Upstream, pipeline
from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from proxai_asgi.errors import ProxyError
from proxai_asgi.protocols import get_codec
from proxai_asgi.sse import SSEDecoder, SSEEvent
from tests.helpers.validate_anthropic import AnthropicStream, validate_anthropic_stream
from tests.helpers.validate_chat import ChatStream, validate_chat_stream
from tests.helpers.validate_responses import ResponsesStream, validate_responses_stream

CHAT: ProtocolName = "openai_chat_completions"
RESPONSES: ProtocolName = "openai_responses"
ANTHROPIC: ProtocolName = "anthropic_messages"


def rejected(fn: Any, *args: Any, status: int) -> ProxyError:
    """The ``ProxyError`` ``fn(*args)`` raises, with the expected HTTP status."""
    with pytest.raises(ProxyError) as info:
        fn(*args)
    assert info.value.status == status, info.value
    return info.value


# ------------------------------------------------------------------ requests


def client_request(
    *, stream: bool = True, include_usage: bool = True, model: str = "client-model"
) -> c.Request:
    """The canonical request a client stream/response encoder is built from."""
    return c.Request(
        model=model,
        messages=[c.Message(role="user", content=[c.Text(text="hi")])],
        stream=stream,
        include_usage=include_usage,
    )


def translate_request(
    client: ProtocolName, upstream: ProtocolName, body: dict[str, Any], lossy: bool = False
) -> dict[str, Any]:
    """A client request body as the body sent to the upstream. Without the cache
    breakpoints an Anthropic upstream gets for OpenAI clients: the spec rules are about
    placement (the breakpoints are tested in
    ``tests/protocols/anthropic_messages/test_cache_breakpoints.py``)."""
    up = Upstream(upstream, "http://upstream.test", lossy=lossy, cache_breakpoints=False)
    out = pipeline.prepare(get_codec(client), get_codec(upstream), json.dumps(body).encode(), up)
    result: dict[str, Any] = json.loads(out.body)
    return result


# ---------------------------------------------------------------- responses


def translate_json(
    upstream: ProtocolName,
    client: ProtocolName,
    body: dict[str, Any],
    request: c.Request | None = None,
) -> dict[str, Any]:
    """A non-streamed upstream answer as the body the client receives."""
    translation = pipeline.answering(
        get_codec(client), get_codec(upstream), request or client_request(stream=False)
    )
    out, _ = pipeline.translate_response(translation, json.dumps(body).encode())
    result: dict[str, Any] = json.loads(out)
    return result


# ------------------------------------------------------------------ streams


def sse_events(raw: bytes) -> list[SSEEvent]:
    dec = SSEDecoder()
    return dec.decode(raw) + dec.flush()


def anthropic_sse(*events: dict[str, Any]) -> bytes:
    return b"".join(
        b"event: " + ev["type"].encode() + b"\ndata: " + json.dumps(ev).encode() + b"\n\n"
        for ev in events
    )


def chat_sse(*chunks: dict[str, Any] | str) -> bytes:
    return b"".join(
        b"data: " + (ch if isinstance(ch, str) else json.dumps(ch)).encode() + b"\n\n"
        for ch in chunks
    )


def responses_sse(*events: dict[str, Any]) -> bytes:
    out = b""
    for n, ev in enumerate(events):
        ev = {**ev, "sequence_number": n}
        out += b"event: " + ev["type"].encode() + b"\ndata: " + json.dumps(ev).encode() + b"\n\n"
    return out


class Pipe:
    """One translated stream, fed upstream SSE bytes piece by piece, returning what
    the client receives for each piece: the production ``StreamTranslator``. A piece
    that cut the stream short on the proxy's side (an upstream stream the codec
    refuses) raises that error; the client saw it as its protocol's terminal error."""

    def __init__(
        self, upstream: ProtocolName, client: ProtocolName, request: c.Request | None = None
    ) -> None:
        translation = pipeline.answering(
            get_codec(client), get_codec(upstream), request or client_request()
        )
        self.translator = pipeline.StreamTranslator(translation)

    def feed(self, raw: bytes) -> bytes:
        return self._checked(self.translator.feed(raw))

    def close(self) -> bytes:
        return self._checked(self.translator.close())

    def _checked(self, out: bytes) -> bytes:
        if self.translator.error is not None:
            raise self.translator.error
        return out


def decode_stream(upstream: ProtocolName, raw: bytes) -> list[c.StreamEvent]:
    dec = get_codec(upstream).stream_decoder()
    out: list[c.StreamEvent] = []
    for e in sse_events(raw):
        out.extend(dec.feed(e))
    out.extend(dec.close())
    return out


def translate_stream(
    upstream: ProtocolName, client: ProtocolName, raw: bytes, request: c.Request | None = None
) -> bytes:
    pipe = Pipe(upstream, client, request)
    return pipe.feed(raw) + pipe.close()


def validate_chat(raw: bytes, include_usage: bool | None = True) -> ChatStream:
    return validate_chat_stream(raw, include_usage=include_usage)


def validate_anthropic(raw: bytes) -> AnthropicStream:
    return validate_anthropic_stream(raw)


def validate_responses(raw: bytes) -> ResponsesStream:
    return validate_responses_stream(raw)


def chat_chunks(raw: bytes) -> list[dict[str, Any] | str]:
    """The payloads of a Chat stream, ``"[DONE]"`` verbatim."""
    out: list[dict[str, Any] | str] = []
    for e in sse_events(raw):
        text = e.data.decode()
        out.append(text if text == "[DONE]" else json.loads(text))
    return out


def typed_events(raw: bytes) -> list[dict[str, Any]]:
    """The data objects of an Anthropic or Responses stream (``event:`` lines checked
    by the validators, not here)."""
    out: list[dict[str, Any]] = []
    for e in sse_events(raw):
        out.append(json.loads(e.data))
    return out


def event_types(raw: bytes) -> list[str]:
    return [str(ev["type"]) for ev in typed_events(raw)]


# ------------------------------------------------------ upstream building blocks


def chat_chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    choices: list[dict[str, Any]] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """An upstream Chat chunk in OpenAI's shape (one choice unless ``choices``)."""
    out: dict[str, Any] = {
        "id": "chatcmpl-up1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-up",
        "choices": choices
        if choices is not None
        else [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
    }
    out.update(kw)
    return out


def chat_usage_chunk(prompt: int = 11, completion: int = 7) -> dict[str, Any]:
    return chat_chunk(
        choices=[],
        usage={
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    )


def chat_tool_start(index: int, call_id: str, name: str) -> dict[str, Any]:
    return chat_chunk(
        {
            "tool_calls": [
                {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
            ]
        }
    )


def chat_tool_args(index: int, fragment: str) -> dict[str, Any]:
    return chat_chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})


def chat_completion(message: dict[str, Any], finish: str = "stop", **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": "chatcmpl-up1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-up",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }
    out.update(kw)
    return out


def a_message_start(msg_id: str = "msg_01UP") -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-up",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 11, "output_tokens": 1},
        },
    }


def a_block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def a_text_start(index: int) -> dict[str, Any]:
    return a_block_start(index, {"type": "text", "text": ""})


def a_tool_start(index: int, tool_id: str, name: str) -> dict[str, Any]:
    return a_block_start(index, {"type": "tool_use", "id": tool_id, "name": name, "input": {}})


def a_thinking_start(index: int) -> dict[str, Any]:
    return a_block_start(index, {"type": "thinking", "thinking": "", "signature": ""})


def a_delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def a_text(index: int, text: str) -> dict[str, Any]:
    return a_delta(index, {"type": "text_delta", "text": text})


def a_json(index: int, partial: str) -> dict[str, Any]:
    return a_delta(index, {"type": "input_json_delta", "partial_json": partial})


def a_thinking(index: int, text: str) -> dict[str, Any]:
    return a_delta(index, {"type": "thinking_delta", "thinking": text})


def a_signature(index: int, signature: str) -> dict[str, Any]:
    return a_delta(index, {"type": "signature_delta", "signature": signature})


def a_block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def a_message_delta(
    stop_reason: str = "end_turn",
    output_tokens: int = 7,
    stop_details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    delta: dict[str, Any] = {"stop_reason": stop_reason, "stop_sequence": None}
    if stop_details is not None:
        delta["stop_details"] = stop_details
    return {"type": "message_delta", "delta": delta, "usage": {"output_tokens": output_tokens}}


def a_message_stop() -> dict[str, Any]:
    return {"type": "message_stop"}


def anthropic_message(
    content: list[dict[str, Any]],
    stop_reason: str = "end_turn",
    stop_details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": "msg_01UP",
        "type": "message",
        "role": "assistant",
        "model": "claude-up",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 7},
    }
    if stop_details is not None:
        out["stop_details"] = stop_details
    return out


def r_snapshot(status: str, output: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": "resp_up1",
        "object": "response",
        "created_at": 1700000000,
        "model": "gpt-up",
        "status": status,
        "output": output,
        "usage": {
            "input_tokens": 11,
            "output_tokens": 7,
            "total_tokens": 18,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    out.update(kw)
    return out


def r_message(item_id: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": parts,
    }


def r_text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


def r_refusal_part(text: str) -> dict[str, Any]:
    return {"type": "refusal", "refusal": text}


def r_call(item_id: str, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def responses_message_stream(
    parts: list[dict[str, Any]],
    status: str = "completed",
    item_id: str = "msg_up1",
    **snapshot_kw: Any,
) -> bytes:
    """A Responses upstream stream of one message item with these parts, each part
    streamed as added / delta / done."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": r_snapshot("in_progress", [])},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**r_message(item_id, []), "status": "in_progress"},
        },
    ]
    for ci, part in enumerate(parts):
        key = "refusal" if part["type"] == "refusal" else "text"
        kind = "refusal" if key == "refusal" else "output_text"
        empty = {**part, key: ""}
        common = {"item_id": item_id, "output_index": 0, "content_index": ci}
        events += [
            {"type": "response.content_part.added", **common, "part": empty},
            {"type": f"response.{kind}.delta", **common, "delta": part[key]},
            {"type": f"response.{kind}.done", **common, key: part[key]},
            {"type": "response.content_part.done", **common, "part": part},
        ]
    message = r_message(item_id, parts)
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        {
            "type": f"response.{status}",
            "response": r_snapshot(status, [message], **snapshot_kw),
        },
    ]
    return responses_sse(*events)
