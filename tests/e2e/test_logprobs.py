"""Log probabilities toward a Chat upstream (issue 17, defect 3): a Chat answer's
``logprobs`` are not translated into other protocols, so the proxy never asks a Chat
upstream for them. A Responses client's ``top_logprobs`` and a Gemini client's
``responseLogprobs`` / ``logprobs`` are a 400 in the client's own shape, streamed and not;
in lossy mode they are dropped (reported) and the answer arrives whole. The scripted
upstream answers with logprobs exactly when it is asked for them, as OpenAI does, so a
proxy that asked and then refused the chunks fails these tests."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from tests.helpers.servers import FakeUpstream, Reply, Seen, sse_frames

from .conftest import Stack

CHAT = "openai_chat_completions"
RESPONSES = "openai_responses"
GEMINI = "gemini_generate_content"
HEAD = {"id": "chatcmpl-1", "created": 1, "model": "m"}
USAGE = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
LOGPROBS = {
    "content": [
        {"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []},
    ],
    "refusal": None,
}


def chat_answer(seen: Seen) -> Reply:
    """``Hi``, with logprobs when the request asked for them."""
    req = seen.json()
    lp = LOGPROBS if req.get("logprobs") else None
    if not req.get("stream"):
        message = {"role": "assistant", "content": "Hi"}
        choice = {"index": 0, "message": message, "logprobs": lp, "finish_reason": "stop"}
        body = {**HEAD, "object": "chat.completion", "choices": [choice], "usage": USAGE}
        return Reply(200, [("content-type", "application/json")], [json.dumps(body).encode()])
    head = {**HEAD, "object": "chat.completion.chunk"}
    chunks: list[dict[str, Any]] = [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {**head, "choices": [{"index": 0, "delta": {"content": "Hi"}, "logprobs": lp}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**head, "choices": [], "usage": USAGE},
    ]
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return Reply(
        200, [("content-type", "text/event-stream")], sse_frames(body + b"data: [DONE]\n\n")
    )


def responses_text(base: str, stream: bool) -> str:
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    kw: dict[str, Any] = {"model": "m", "input": "hi", "top_logprobs": 2}
    if stream:
        with o.responses.stream(**kw) as s:
            return s.get_final_response().output_text
    return o.responses.create(**kw).output_text


def gemini_text(base: str, stream: bool) -> str:
    g = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=base))
    config = types.GenerateContentConfig(response_logprobs=True, logprobs=2)
    if stream:
        parts = g.models.generate_content_stream(model="m", contents="hi", config=config)
        return "".join(p.text or "" for p in parts)
    return g.models.generate_content(model="m", contents="hi", config=config).text or ""


def ask(base: str, client: str, stream: bool) -> str:
    return responses_text(base, stream) if client == RESPONSES else gemini_text(base, stream)


@pytest.mark.parametrize("client", [RESPONSES, GEMINI])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_logprobs_toward_chat_are_a_400_in_the_clients_shape_never_asked_for(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool, client: str
) -> None:
    fake.push(chat_answer)
    base = stack.proxy(fake, CHAT, inner=inner)
    if client == RESPONSES:
        with pytest.raises(openai.BadRequestError) as e:
            ask(base, client, stream)
        assert e.value.status_code == 400 and e.value.param == "top_logprobs"
    else:
        with pytest.raises(genai_errors.ClientError) as g:
            ask(base, client, stream)
        assert g.value.code == 400 and "logprobs" in (g.value.message or "")
    assert fake.seen == []


@pytest.mark.parametrize("client", [RESPONSES, GEMINI])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_in_lossy_mode_logprobs_are_dropped_and_the_answer_arrives_whole(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool, client: str
) -> None:
    fake.push(chat_answer)
    base = stack.proxy(fake, CHAT, inner=inner, lossy=True)
    assert ask(base, client, stream) == "Hi"
    (seen,) = fake.seen
    assert "logprobs" not in seen.json() and "top_logprobs" not in seen.json()
