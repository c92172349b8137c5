"""How a Chat upstream's stream may end without ``data: [DONE]`` (issue 26).

- After its ``finish_reason`` chunk (and its usage chunk) the answer is complete: the
  client gets it finished (``[DONE]`` for a Chat client, the normal terminal events for
  the others), never an error.
- After an error chunk of the upstream's: that error is the terminal one; a Chat
  client gets ``[DONE]`` after it, not a second error of ours.
- Before its finish: cut, the client protocol's terminal error (unchanged).

Over both HTTP pools and the wrapped app as the upstream; Chat clients are the real
``openai`` SDK where the answer is a success.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest

from proxai_asgi import ProxaiMiddleware
from tests.helpers.validate_anthropic import validate_anthropic_stream
from tests.helpers.validate_chat import validate_chat_stream
from tests.helpers.validate_gemini import validate_gemini_stream
from tests.helpers.validate_responses import validate_responses_stream

from ._keepalive import Upstream1, chunked_answer, request_body, run
from .corpus import ANTHROPIC, CHAT, GEMINI, PATH, RESPONSES

TRANSPORTS = ["lean", "httpx", "inner"]
TEXT = "complete answer"
USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def _chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-9",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


CONTENT = _chunk({"role": "assistant", "content": TEXT})
FINISH = _chunk({}, "stop")
USAGE_ONLY = _chunk(None, usage=USAGE)
ERROR = b'data: {"error": {"message": "upstream overloaded", "type": "server_error"}}\n\n'
# Upstream streams that end (cleanly: the body's framing ends) without data: [DONE].
ENDINGS = {
    "after_usage": CONTENT + FINISH + USAGE_ONLY,
    "after_finish": CONTENT + FINISH,
    "after_error": CONTENT + ERROR,
    "cut": CONTENT,
}


def _inner(sse: bytes) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": sse, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def _serve(sse: bytes, transport: str, test: Any) -> None:
    async def script(n: int, w: asyncio.StreamWriter) -> bool:
        w.write(chunked_answer(sse))
        return True

    run(script, CHAT, transport, test, inner=_inner(sse))


def _path(client: str) -> str:
    return "/v1beta/models/m:streamGenerateContent?alt=sse" if client == GEMINI else PATH[client]


async def _stream(http: httpx.AsyncClient, client: str) -> bytes:
    r = await http.post(_path(client), content=request_body(client, "q", stream=True))
    assert r.status_code == 200, r.text
    return r.content


def _sdk(mw: ProxaiMiddleware) -> openai.AsyncOpenAI:
    transport = httpx.ASGITransport(app=mw)
    return openai.AsyncOpenAI(
        base_url="http://proxy/v1",
        api_key="sk-client",
        http_client=httpx.AsyncClient(transport=transport, base_url="http://proxy"),
        max_retries=0,
    )


# ------------------------------------------------------------------ pass-through


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("ending", ["after_usage", "after_finish"])
def test_chat_stream_ending_after_its_finish_without_done_is_complete_in_pass_through(
    transport: str, ending: str
) -> None:
    sse = ENDINGS[ending]

    async def test(mw: ProxaiMiddleware, http: httpx.AsyncClient, up: Upstream1) -> None:
        body = await _stream(http, CHAT)
        assert body == sse + b"data: [DONE]\n\n"  # the upstream's bytes, finished
        validate_chat_stream(body)
        sdk = _sdk(mw)
        try:
            text, finish, usage = "", None, None
            stream = await sdk.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "q"}], stream=True
            )
            async for chunk in stream:
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
                    finish = chunk.choices[0].finish_reason or finish
                usage = chunk.usage or usage
        finally:
            await sdk.close()
        assert (text, finish) == (TEXT, "stop")
        assert (usage is not None) == (ending == "after_usage")

    _serve(sse, transport, test)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_chat_stream_ending_after_an_upstream_error_chunk_gets_no_second_error(
    transport: str,
) -> None:
    """The upstream's error is the terminal error: ``[DONE]`` after it, nothing else."""
    sse = ENDINGS["after_error"]

    async def test(mw: ProxaiMiddleware, http: httpx.AsyncClient, up: Upstream1) -> None:
        body = await _stream(http, CHAT)
        assert body == sse + b"data: [DONE]\n\n"
        assert body.count(b'"error"') == 1
        sdk = _sdk(mw)
        try:
            with pytest.raises(openai.APIError, match="upstream overloaded"):
                stream = await sdk.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "q"}], stream=True
                )
                async for _ in stream:
                    pass
        finally:
            await sdk.close()

    _serve(sse, transport, test)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_chat_stream_cut_before_its_finish_still_ends_with_our_error(transport: str) -> None:
    sse = ENDINGS["cut"]

    async def test(mw: ProxaiMiddleware, http: httpx.AsyncClient, up: Upstream1) -> None:
        body = await _stream(http, CHAT)
        assert body.startswith(sse) and body.endswith(b"data: [DONE]\n\n")
        assert validate_chat_stream(body).error is not None

    _serve(sse, transport, test)


# ------------------------------------------------------------------ translated


def _complete(client: str, body: bytes) -> None:
    """``body`` is the client protocol's complete, successful stream of TEXT."""
    if client == RESPONSES:
        got = validate_responses_stream(body)
        assert got.error is None and got.status == "completed"
        assert TEXT in json.dumps(got.items)
    elif client == ANTHROPIC:
        anthropic = validate_anthropic_stream(body)
        assert anthropic.error is None and anthropic.stop_reason == "end_turn"
        assert [b.text for b in anthropic.blocks] == [TEXT]
    else:
        gemini = validate_gemini_stream(body)
        assert gemini.error is None
        assert TEXT in body.decode() and b'"finishReason": "STOP"' in body.replace(b'":"', b'": "')


def _failed(client: str, body: bytes) -> None:
    if client == RESPONSES:
        assert validate_responses_stream(body).error is not None
    elif client == ANTHROPIC:
        assert validate_anthropic_stream(body).error is not None
    else:
        assert validate_gemini_stream(body).error is not None


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("client", [RESPONSES, ANTHROPIC, GEMINI])
@pytest.mark.parametrize("ending", list(ENDINGS))
def test_chat_upstream_stream_without_done_translated_to_every_client(
    transport: str, client: str, ending: str
) -> None:
    """Complete after its finish (with or without usage); the upstream's error, or a
    cut before the finish, is the client protocol's error."""
    sse = ENDINGS[ending]

    async def test(mw: ProxaiMiddleware, http: httpx.AsyncClient, up: Upstream1) -> None:
        body = await _stream(http, client)
        if ending.startswith("after_") and ending != "after_error":
            _complete(client, body)
        else:
            _failed(client, body)

    _serve(sse, transport, test)
