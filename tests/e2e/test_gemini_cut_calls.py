"""A Gemini client's answer cut by the token limit inside a tool call's arguments (issue
26): the text, no half-built call (Gemini's ``args`` is an object), ``finishReason:
MAX_TOKENS`` and the usage, as Chat and Responses clients get the text and a length
stop; never a 502."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.helpers.servers import FakeUpstream, Reply, sse_frames

from .conftest import Stack
from .test_cut_tool_calls import ANTHROPIC_START, anthropic_sse, cut_answer, cut_call_events

GEMINI_TOOLS = [
    {"functionDeclarations": [{"name": "shell", "parametersJsonSchema": {"type": "object"}}]}
]
BODY = {"contents": [{"role": "user", "parts": [{"text": "clean up"}]}], "tools": GEMINI_TOOLS}


def anthropic_stream_cut_by_max_tokens() -> bytes:
    text = {"type": "text", "text": ""}
    said = {"type": "text_delta", "text": "On it."}
    stop = {"stop_reason": "max_tokens", "stop_sequence": None}
    return anthropic_sse(
        [
            ANTHROPIC_START,
            {"type": "content_block_start", "index": 0, "content_block": text},
            {"type": "content_block_delta", "index": 0, "delta": said},
            {"type": "content_block_stop", "index": 0},
            *cut_call_events(1),
            {"type": "content_block_stop", "index": 1},
            {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 9}},
            {"type": "message_stop"},
        ]
    )


def _frames(body: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")
    ]


def _parts(answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        p
        for a in answers
        for cand in a.get("candidates") or []
        for p in (cand.get("content") or {}).get("parts") or []
    ]


def _check(answers: list[dict[str, Any]]) -> None:
    assert not [a for a in answers if "error" in a], answers
    parts = _parts(answers)
    assert not [p for p in parts if "functionCall" in p], parts
    assert "".join(p.get("text", "") for p in parts) == "On it."
    last = answers[-1]
    assert last["candidates"][0]["finishReason"] == "MAX_TOKENS"
    usage = last["usageMetadata"]
    assert usage["promptTokenCount"] == 5 and usage["candidatesTokenCount"] == 9


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_an_anthropic_answer_cut_inside_a_call_reaches_a_gemini_client_as_max_tokens(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    sse = [("content-type", "text/event-stream")]
    fake.push(Reply(200, sse, sse_frames(anthropic_stream_cut_by_max_tokens())))
    proxy = stack.proxy(fake, "anthropic_messages", inner=inner)
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    r = httpx.post(f"{proxy}/v1beta/models/m:{method}", json=BODY, timeout=20)
    assert r.status_code == 200, r.text
    _check(_frames(r.content) if stream else [r.json()])


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize("upstream", ["openai_chat_completions", "openai_responses"])
def test_a_non_streamed_answer_cut_inside_a_call_reaches_a_gemini_client_as_max_tokens(
    stack: Stack, fake: FakeUpstream, inner: bool, upstream: str
) -> None:
    fake.push(Reply(200, [("content-type", "application/json")], [cut_answer(upstream)]))
    proxy = stack.proxy(fake, upstream, inner=inner)  # type: ignore[arg-type]
    r = httpx.post(f"{proxy}/v1beta/models/m:generateContent", json=BODY, timeout=20)
    assert r.status_code == 200, r.text
    cand = r.json()["candidates"][0]
    assert cand["finishReason"] == "MAX_TOKENS"
    assert not [p for p in cand["content"].get("parts", []) if "functionCall" in p]
    assert r.json()["usageMetadata"]["candidatesTokenCount"] == 9
