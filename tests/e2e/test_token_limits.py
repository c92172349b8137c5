"""An output-token limit is never changed silently on the way to an upstream (issue 26).

- A limit the client's own provider refuses (OpenAI Chat: ``max_tokens`` /
  ``max_completion_tokens`` below 1; Responses: ``max_output_tokens`` below 16;
  Anthropic: ``max_tokens`` below 0) is a 400 in that provider's words, for every
  translated upstream, before any upstream call. (Before: a negative limit was raised
  to 16 toward a Responses upstream, or sent on as it was.)
- Anthropic's ``max_tokens: 0`` (write the prompt cache, answer nothing) has no
  equivalent elsewhere: a 400 naming ``max_tokens`` (before: replaced by the default
  toward Anthropic from another client, passed on as 0 or raised to 16 elsewhere); in
  lossy mode the target's minimum, reported.
- A valid limit under the Responses API's minimum of 16 (Claude Code's quota probe
  sends 1) is raised to 16 and reported in ``x-proxai-dropped-fields``.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from tests.helpers.canned import codec_answer
from tests.helpers.servers import FakeUpstream

from .conftest import Stack

CHAT: ProtocolName = "openai_chat_completions"
RESPONSES: ProtocolName = "openai_responses"
ANTHROPIC: ProtocolName = "anthropic_messages"
GEMINI: ProtocolName = "gemini_generate_content"
PATH = {CHAT: "/v1/chat/completions", RESPONSES: "/v1/responses", ANTHROPIC: "/v1/messages"}
ANSWER = c.Response(
    id="x-1",
    model="m",
    content=[c.Text(text="ok")],
    stop_reason="end_turn",
    usage=c.Usage(input_tokens=3, output_tokens=1),
)


def body(client: ProtocolName, stream: bool, **limit: int) -> dict[str, Any]:
    if client == RESPONSES:
        return {"model": "m", "input": "hi", "stream": stream, **limit}
    out: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if client == ANTHROPIC:
        out["max_tokens"] = 64
    return {**out, "stream": stream, **limit}


def openai_error(param: str, low: int, got: int) -> dict[str, Any]:
    return {
        "error": {
            "message": f"Invalid '{param}': integer below minimum value. Expected a value "
            f">= {low}, but got {got} instead.",
            "type": "invalid_request_error",
            "param": param,
            "code": "integer_below_min_value",
        }
    }


# (client, the limit sent, the error its provider answers)
REFUSED = [
    (CHAT, {"max_tokens": -1}, openai_error("max_tokens", 1, -1)),
    (CHAT, {"max_tokens": 0}, openai_error("max_tokens", 1, 0)),
    (CHAT, {"max_completion_tokens": -5}, openai_error("max_completion_tokens", 1, -5)),
    (CHAT, {"max_completion_tokens": 0}, openai_error("max_completion_tokens", 1, 0)),
    (RESPONSES, {"max_output_tokens": -1}, openai_error("max_output_tokens", 16, -1)),
    (RESPONSES, {"max_output_tokens": 15}, openai_error("max_output_tokens", 16, 15)),
    (
        ANTHROPIC,
        {"max_tokens": -1},
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "max_tokens: Input should be greater than or equal to 0",
            },
        },
    ),
]


# every translated upstream (pass-through leaves the client's own bytes to the upstream)
REFUSED_TO = [
    (client, limit, error, upstream)
    for client, limit, error in REFUSED
    for upstream in (CHAT, RESPONSES, ANTHROPIC, GEMINI)
    if upstream != client
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize(
    ("client", "limit", "error", "upstream"),
    REFUSED_TO,
    ids=[f"{cl[:6]}-{next(iter(lim.items()))}-{up[:6]}" for cl, lim, _, up in REFUSED_TO],
)
def test_a_token_limit_the_clients_provider_refuses_is_a_400_before_any_upstream_call(
    stack: Stack,
    fake: FakeUpstream,
    inner: bool,
    stream: bool,
    upstream: ProtocolName,
    client: ProtocolName,
    limit: dict[str, int],
    error: dict[str, Any],
) -> None:
    fake.push(codec_answer(upstream, ANSWER))
    proxy = stack.proxy(fake, upstream, inner=inner)
    r = httpx.post(proxy + PATH[client], json=body(client, stream, **limit), timeout=20)
    assert (r.status_code, r.json()) == (400, error)
    assert fake.seen == []


ZERO_REFUSED = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "max_tokens: 0 (writing the prompt cache without an answer) has no "
        "equivalent in {target}, which takes at least {minimum}",
    },
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize(
    ("upstream", "target", "minimum"),
    [(CHAT, "Chat Completions", 1), (RESPONSES, "the Responses API", 16), (GEMINI, "Gemini", 1)],
    ids=["chat", "responses", "gemini"],
)
def test_an_anthropic_zero_token_limit_is_refused_where_the_upstream_has_no_such_request(
    stack: Stack,
    fake: FakeUpstream,
    inner: bool,
    stream: bool,
    upstream: ProtocolName,
    target: str,
    minimum: int,
) -> None:
    fake.push(codec_answer(upstream, ANSWER))
    proxy = stack.proxy(fake, upstream, inner=inner)
    r = httpx.post(proxy + PATH[ANTHROPIC], json=body(ANTHROPIC, stream, max_tokens=0), timeout=20)
    error = ZERO_REFUSED["error"]
    message = error["message"].format(target=target, minimum=minimum)
    assert (r.status_code, r.json()) == (
        400,
        {**ZERO_REFUSED, "error": {**error, "message": message}},
    )
    assert fake.seen == []


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_an_anthropic_zero_token_limit_in_lossy_mode_is_the_targets_minimum_reported(
    stack: Stack, fake: FakeUpstream, inner: bool
) -> None:
    fake.push(codec_answer(RESPONSES, ANSWER))
    proxy = stack.proxy(fake, RESPONSES, inner=inner, lossy=True)
    r = httpx.post(proxy + PATH[ANTHROPIC], json=body(ANTHROPIC, False, max_tokens=0), timeout=20)
    assert r.status_code == 200, r.text
    assert fake.seen[0].json()["max_output_tokens"] == 16
    assert r.headers["x-proxai-dropped-fields"] == "max_tokens"


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_an_anthropic_zero_token_limit_passes_through_to_anthropic_untouched(
    stack: Stack, fake: FakeUpstream, inner: bool
) -> None:
    fake.push(codec_answer(ANTHROPIC, ANSWER))
    proxy = stack.proxy(fake, ANTHROPIC, inner=inner)
    sent = body(ANTHROPIC, False, max_tokens=0)
    r = httpx.post(proxy + PATH[ANTHROPIC], json=sent, timeout=20)
    assert r.status_code == 200, r.text
    assert fake.seen[0].json() == sent


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize(
    ("client", "limit"),
    [
        (CHAT, {"max_tokens": 1}),
        (CHAT, {"max_completion_tokens": 15}),
        (ANTHROPIC, {"max_tokens": 1}),
    ],
    ids=["chat-max_tokens", "chat-max_completion_tokens", "anthropic-max_tokens"],
)
def test_a_limit_under_the_responses_minimum_is_raised_to_16_and_reported(
    stack: Stack,
    fake: FakeUpstream,
    inner: bool,
    stream: bool,
    client: ProtocolName,
    limit: dict[str, int],
) -> None:
    fake.push(codec_answer(RESPONSES, ANSWER))
    proxy = stack.proxy(fake, RESPONSES, inner=inner)
    r = httpx.post(proxy + PATH[client], json=body(client, stream, **limit), timeout=20)
    assert r.status_code == 200, r.text
    assert fake.seen[0].json()["max_output_tokens"] == 16
    assert r.headers["x-proxai-dropped-fields"] == "max_tokens"


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize(
    ("client", "limit", "upstream", "field"),
    [
        (CHAT, {"max_tokens": 1}, ANTHROPIC, "max_tokens"),
        (RESPONSES, {"max_output_tokens": 16}, ANTHROPIC, "max_tokens"),
        (ANTHROPIC, {"max_tokens": 1}, CHAT, "max_completion_tokens"),
        (RESPONSES, {"max_output_tokens": 16}, CHAT, "max_completion_tokens"),
        (CHAT, {"max_tokens": 1}, GEMINI, "maxOutputTokens"),
        (ANTHROPIC, {"max_tokens": 1}, GEMINI, "maxOutputTokens"),
    ],
    ids=[
        "chat-anthropic",
        "responses-anthropic",
        "anthropic-chat",
        "responses-chat",
        "chat-gemini",
        "anthropic-gemini",
    ],
)
def test_a_valid_limit_reaches_every_other_upstream_unchanged(
    stack: Stack,
    fake: FakeUpstream,
    inner: bool,
    client: ProtocolName,
    limit: dict[str, int],
    upstream: ProtocolName,
    field: str,
) -> None:
    fake.push(codec_answer(upstream, ANSWER))
    proxy = stack.proxy(fake, upstream, inner=inner)
    r = httpx.post(proxy + PATH[client], json=body(client, False, **limit), timeout=20)
    assert r.status_code == 200, r.text
    sent = fake.seen[0].json()
    got = sent["generationConfig"][field] if upstream == GEMINI else sent[field]
    assert got == next(iter(limit.values()))
    assert "x-proxai-dropped-fields" not in r.headers
