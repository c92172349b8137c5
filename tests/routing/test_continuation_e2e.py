"""An answer cut after its content reached the client is continued, not truncated:
for a client of each protocol, over both transports, the upstream (Anthropic, which
continues an assistant prefill) breaks its stream after a few words, and the client
still receives the whole answer once, as one message with one end."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from proxai_asgi import Fallback, Route
from proxai_asgi.codec import ProtocolName, fold
from proxai_asgi.protocols import get_codec
from proxai_asgi.sse import SSEDecoder
from tests.helpers.servers import Reply, Seen
from tests.routing.test_failover import (
    ANTHROPIC,
    GEMINI,
    SSE,
    env,
    proxy,
    script,
    transport,
    upstream,
)

__all__ = ["env", "transport"]  # the fixtures this module uses

WORDS = [
    "the",
    "whole",
    "answer",
    "arrives",
    "once",
    "even",
    "though",
    "the",
    "first",
    "stream",
    "broke",
]
ANSWER = " ".join(WORDS)
CUT_AFTER = 4  # words sent before the first stream breaks

CLIENTS: dict[ProtocolName, tuple[str, dict[str, Any]]] = {
    "anthropic_messages": (
        "/v1/messages",
        {"model": "m", "max_tokens": 99, "stream": True,
         "messages": [{"role": "user", "content": "go"}]},
    ),
    "openai_chat_completions": (
        "/v1/chat/completions",
        {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]},
    ),
    "openai_responses": ("/v1/responses", {"model": "m", "stream": True, "input": "go"}),
    "gemini_generate_content": (
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "go"}]}]},
    ),
}  # fmt: skip


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def anthropic_stream(words: list[str], leading_space: bool) -> list[bytes]:
    """An Anthropic stream of ``words``, one delta each."""
    start = {"type": "message_start", "message": {
        "id": "msg_cut", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 0}}}  # fmt: skip
    frames = [
        _event("message_start", start),
        _event("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}}),
    ]  # fmt: skip
    for i, w in enumerate(words):
        text = (" " + w) if (i or leading_space) else w
        delta = {"type": "content_block_delta", "index": 0,
                 "delta": {"type": "text_delta", "text": text}}  # fmt: skip
        frames.append(_event("content_block_delta", delta))
    frames += [
        _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _event("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                 "usage": {"output_tokens": len(words)}}),
        _event("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return frames


def cut_then_continue(seen: Seen, n: int) -> Reply:
    """The first stream breaks after CUT_AFTER words; a request ending with an
    assistant prefill of the answer's start gets the rest (as Anthropic does)."""
    messages = seen.json()["messages"]
    last = messages[-1]
    if last["role"] == "assistant":
        parts = last["content"]
        prefix = parts if isinstance(parts, str) else "".join(p["text"] for p in parts)
        assert ANSWER.startswith(prefix.strip()), prefix
        rest = ANSWER[len(prefix.strip()) :].split()
        return Reply(200, SSE, anthropic_stream(rest, leading_space=True))
    frames = anthropic_stream(WORDS, leading_space=False)
    return Reply(200, SSE, frames, crash_after=2 + CUT_AFTER)


def client_text(protocol: ProtocolName, body: bytes) -> tuple[str, int]:
    """The text the client's own protocol reads from its stream, and how many
    terminal events (an end or an error) it holds."""
    codec = get_codec(protocol)
    decoder = codec.stream_decoder()
    events = []
    for frame in SSEDecoder().decode(body):
        events.extend(decoder.feed(frame))
    events.extend(decoder.close())
    ends = sum(type(e).__name__ in ("Finish", "StreamError") for e in events)
    response = fold(events)
    text = "".join(getattr(p, "text", "") for p in response.content)
    return text, ends


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_stream_cut_after_its_content_is_continued_to_one_whole_answer(
    env: Any, transport: str, client: ProtocolName
) -> None:
    s = script(env, cut_then_continue)
    # The wrapped app alone in the client's own protocol is relayed as it always was
    # (the request down the ASGI chain as it came, nothing to retry or continue); with
    # a fallback it is a target like any other, which this continues.
    spare = [Fallback(upstream(GEMINI, env[1]), model="spare")]
    url = proxy(env, transport, lambda base: Route("*", upstream(ANTHROPIC, base), fallbacks=spare))
    path, body = CLIENTS[client]
    r = httpx.post(url + path, json=body, timeout=10)
    assert r.status_code == 200
    text, ends = client_text(client, r.content)
    assert text == ANSWER
    assert ends == 1
    assert s.counts == {"m": 2}  # the broken stream, then the continuation
    continued = env[0].fake.seen[1].json()["messages"][-1]
    assert continued["role"] == "assistant"  # asked as a prefill of the text sent


@pytest.mark.parametrize("client", ["anthropic_messages", "openai_chat_completions"])
def test_a_continued_answer_bills_the_cut_answer_and_its_continuation(
    env: Any, transport: str, client: ProtocolName
) -> None:
    """Both upstream answers were billed: the ledger records the cut one's prompt (its
    ``message_start``) beside the continuation's whole usage, relayed or translated."""
    import asyncio
    import time

    from proxai_asgi import ProxaiMiddleware
    from proxai_asgi.usage import MemoryLedger
    from tests.helpers.servers import serve

    script(env, cut_then_continue)
    board, base, es = env
    spare = [Fallback(upstream(GEMINI, base), model="spare")]
    target = None if transport == "inner" else base
    ledger = MemoryLedger()
    route = Route("*", upstream(ANTHROPIC, target), fallbacks=spare)
    url = es.enter_context(serve(ProxaiMiddleware(board, routes=[route], ledger=ledger)))
    path, body = CLIENTS[client]
    r = httpx.post(url + path, json=body, timeout=10)
    assert r.status_code == 200 and client_text(client, r.content)[0] == ANSWER
    # The account is settled once the answer is sent: the client may read its end first.
    for _ in range(300):
        records = asyncio.run(ledger.records())
        if records:
            break
        time.sleep(0.01)
    (rec,) = records
    rest = len(ANSWER.split()) - CUT_AFTER
    assert (rec.input_tokens, rec.output_tokens) == (5 + 5, rest)  # two prompts billed
