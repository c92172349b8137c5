"""Each codec's reading of a relayed answer's model and usage (``Codec.relayed_usage``,
``Codec.relayed_stream_usage``) and the pass-through relay that calls them."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import Relayed
from proxai_asgi.protocols import get_codec
from proxai_asgi.serving.passthrough import PassthroughRelay, relayed_usage
from proxai_asgi.stream_tail import TAIL_BYTES, StreamTail

CHAT = "openai_chat_completions"
RESPONSES = "openai_responses"
ANTHROPIC = "anthropic_messages"
GEMINI = "gemini_generate_content"

PLAIN = {
    CHAT: {
        "model": "gpt-4o",
        "choices": [],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 4},
        },
    },
    RESPONSES: {
        "model": "gpt-5",
        "output": [{"type": "web_search_call"}, {"type": "message"}],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 3,
            "input_tokens_details": {"cached_tokens": 4},
            "output_tokens_details": {"reasoning_tokens": 2},
        },
    },
    ANTHROPIC: {
        "model": "claude-x",
        "content": [],
        "usage": {
            "input_tokens": 6,
            "output_tokens": 3,
            "cache_read_input_tokens": 4,
            "cache_creation_input_tokens": 0,
        },
    },
    GEMINI: {
        "modelVersion": "gemini-2.5-flash",
        "candidates": [],
        "usageMetadata": {
            "promptTokenCount": 10,
            "cachedContentTokenCount": 4,
            "candidatesTokenCount": 1,
            "thoughtsTokenCount": 2,
        },
    },
}
MODEL = {CHAT: "gpt-4o", RESPONSES: "gpt-5", ANTHROPIC: "claude-x", GEMINI: "gemini-2.5-flash"}


@pytest.mark.parametrize("protocol", list(PLAIN))
def test_a_relayed_plain_answer_gives_its_model_and_usage(protocol: str) -> None:
    got = get_codec(protocol).relayed_usage(json.dumps(PLAIN[protocol]).encode())  # type: ignore[arg-type]
    assert got is not None and got.model == MODEL[protocol]
    assert got.usage.input_tokens == 10 and got.usage.cached_tokens == 4
    assert got.usage.output_tokens == 3
    if protocol == RESPONSES:
        assert got.usage.server_tool_requests == 1 and got.usage.reasoning_tokens == 2


@pytest.mark.parametrize("protocol", list(PLAIN))
@pytest.mark.parametrize("body", [b"", b"<html>", b'{"model": "m"}', b"[1, 2]", b'{"usage": 7}'])
def test_a_body_without_usage_gives_none(protocol: str, body: bytes) -> None:
    assert get_codec(protocol).relayed_usage(body) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_compressed_relayed_body_is_read_through(coding: str) -> None:
    raw = json.dumps(PLAIN[ANTHROPIC]).encode()
    body = gzip.compress(raw) if coding == "gzip" else zlib.compress(raw)
    codec = get_codec(ANTHROPIC)
    got = relayed_usage(codec, [(b"content-encoding", coding.encode())], body)
    assert got is not None and got.usage.cached_tokens == 4
    assert relayed_usage(codec, [(b"content-encoding", b"br")], body) is None
    assert relayed_usage(codec, [(b"content-encoding", b"gzip")], b"not gzip") is None


def _tail(frames: list[bytes], keep: int = TAIL_BYTES) -> StreamTail:
    tail = StreamTail(keep)
    for f in frames:
        tail.feed(f)
    return tail


def _frame(obj: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + json.dumps(obj).encode() + b"\n\n"


def test_an_anthropic_stream_merges_message_delta_over_message_start() -> None:
    start = {
        "type": "message_start",
        "message": {
            "model": "claude-x",
            "usage": {
                "input_tokens": 5,
                "cache_read_input_tokens": 7,
                "cache_creation_input_tokens": 9,
                "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 9},
                "output_tokens": 1,
            },
        },
    }
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": 40, "server_tool_use": {"web_search_requests": 3}},
    }
    tail = _tail(
        [
            _frame(start, "message_start"),
            b"event: ping\ndata: {}\n\n" * 2000,
            _frame(delta, "message_delta"),
            _frame({"type": "message_stop"}, "message_stop"),
        ]
    )
    got = get_codec(ANTHROPIC).relayed_stream_usage(tail)
    assert got == Relayed(
        "claude-x",
        c.Usage(
            input_tokens=21,
            output_tokens=40,
            cached_tokens=7,
            cache_creation_tokens=9,
            cache_creation_1h_tokens=9,
            server_tool_requests=3,
        ),
    )


def test_a_chat_stream_without_its_usage_chunk_gives_none() -> None:
    chunk = {"model": "gpt-4o", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    tail = _tail([_frame(chunk), b"data: [DONE]\n\n"])
    assert get_codec(CHAT).relayed_stream_usage(tail) is None


def test_a_gemini_stream_gives_its_last_chunks_usage() -> None:
    first = {"modelVersion": "gemini-2.5-flash", "usageMetadata": {"promptTokenCount": 3}}
    last = {**PLAIN[GEMINI], "candidates": [{"finishReason": "STOP"}]}
    tail = _tail([_frame(first).replace(b"\n", b"\r\n"), _frame(last).replace(b"\n", b"\r\n")])
    got = get_codec(GEMINI).relayed_stream_usage(tail)
    assert got is not None and got.usage.output_tokens == 3 and got.usage.reasoning_tokens == 2


def _responses_stream(text_bytes: int) -> list[bytes]:
    snapshot = {**PLAIN[RESPONSES], "status": "completed"}
    snapshot["output"] = [
        *snapshot["output"],
        {"type": "message", "content": [{"type": "output_text", "text": "x" * text_bytes}]},
    ]
    return [
        _frame({"type": "response.created", "response": {"model": "gpt-5"}}, "response.created"),
        _frame({"type": "response.completed", "response": snapshot}, "response.completed"),
    ]


def test_a_responses_stream_whose_final_snapshot_is_large_is_read_with_accounting() -> None:
    """``response.completed`` repeats the whole answer: past the epilogue's tail."""
    frames = _responses_stream(200_000)

    async def relay(on_usage: Any) -> None:
        async def start(status: int, headers: Any) -> None: ...

        async def body(data: bytes, more: bool) -> None: ...

        r = PassthroughRelay(get_codec(RESPONSES), start, body, on_usage)
        await r.start(200, [(b"content-type", b"text/event-stream")])
        for f in frames:
            for i in range(0, len(f), 4096):  # as a server sends it: in pieces
                await r.chunk(f[i : i + 4096])
        await r.end()

    seen: list[Relayed | None] = []
    asyncio.run(relay(seen.append))
    assert seen[0] is not None and seen[0].usage.server_tool_requests == 1
    assert seen[0].model == "gpt-5"
    # The epilogue's own tail alone would not hold that frame whole.
    small = _tail([f[i : i + 4096] for f in frames for i in range(0, len(f), 4096)])
    assert get_codec(RESPONSES).relayed_stream_usage(small) is None


def test_a_relay_without_accounting_never_reads_usage() -> None:
    class Spy:
        def __getattr__(self, name: str) -> Any:
            if name.startswith("relayed"):
                raise AssertionError(f"{name} called without accounting")
            return getattr(get_codec(CHAT), name)

    async def run(ctype: bytes, data: bytes) -> None:
        async def start(status: int, headers: Any) -> None: ...

        async def body(data: bytes, more: bool) -> None: ...

        r = PassthroughRelay(Spy(), start, body)  # type: ignore[arg-type]
        await r.start(200, [(b"content-type", ctype)])
        await r.chunk(data)
        await r.end()

    asyncio.run(run(b"application/json", json.dumps(PLAIN[CHAT]).encode()))
    asyncio.run(run(b"text/event-stream", _frame(PLAIN[CHAT]) + b"data: [DONE]\n\n"))
