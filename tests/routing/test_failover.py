"""Routing through the public API: key pools, retries, fallbacks across protocols,
in-band failures before the first content, hedging a silent target. Every case runs
over both transports (an HTTP upstream and the wrapped app) and streamed and not,
through the official SDKs, with one scripted upstream that answers every protocol's
path and fails as each test tells it to."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import anthropic
import openai
import pytest

from proxai_asgi import Fallback, ProxaiMiddleware, Route, Upstream
from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from tests.helpers.canned import codec_answer
from tests.helpers.servers import FakeUpstream, Reply, Seen, serve

ANTHROPIC: ProtocolName = "anthropic_messages"
CHAT: ProtocolName = "openai_chat_completions"
RESPONSES: ProtocolName = "openai_responses"
GEMINI: ProtocolName = "gemini_generate_content"
JSON = [("content-type", "application/json")]
SSE = [("content-type", "text/event-stream")]
PATHS = {
    "/v1/messages": ANTHROPIC,
    "/v1/chat/completions": CHAT,
    "/v1/responses": RESPONSES,
}
GOOD_KEY = "sk-good-key-0123456789"
REVOKED_KEY = "sk-revoked-key-0123456789"


def protocol_of(seen: Seen) -> ProtocolName:
    return GEMINI if seen.path.startswith("/v1beta/") else PATHS[seen.path]


def answer_text(model: str) -> c.Response:
    return c.Response(
        id="msg_1",
        model=model,
        content=[c.Text(text=f"answered by {model}")],
        stop_reason="end_turn",
        usage=c.Usage(input_tokens=5, output_tokens=4),
    )


def requested_model(seen: Seen) -> str:
    if seen.path.startswith("/v1beta/"):
        return seen.path.split("/models/")[1].split(":")[0]
    return str(seen.json()["model"])


def ok(seen: Seen) -> Reply:
    return codec_answer(protocol_of(seen), answer_text(requested_model(seen)))(seen)


def key_of(seen: Seen) -> str:
    for name in ("authorization", "x-api-key", "x-goog-api-key"):
        if name in seen.headers:
            return seen.headers[name].removeprefix("Bearer ")
    return ""


def error(status: int, kind: str = "overloaded_error", message: str = "busy") -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply(status, JSON, [json.dumps(body).encode()])


class Script:
    """The upstream's behaviour per request: ``rule(seen, n)`` where ``n`` counts the
    requests of that model so far (1 first); None answers normally."""

    def __init__(self, rule: Callable[[Seen, int], Reply | None]) -> None:
        self.rule = rule
        self.counts: dict[str, int] = {}

    def __call__(self, seen: Seen) -> Reply:
        model = requested_model(seen)
        self.counts[model] = n = self.counts.get(model, 0) + 1
        return self.rule(seen, n) or ok(seen)


class Board:
    """The wrapped app / HTTP upstream: forwards to the current test's fake."""

    def __init__(self) -> None:
        self.fake = FakeUpstream()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.fake(scope, receive, send)


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[Board, str, ExitStack]]:
    board = Board()
    with ExitStack() as es:
        yield board, es.enter_context(serve(board)), es


def upstream(protocol: ProtocolName, base: str | None, key: Any = None, **options: Any) -> Upstream:
    if base is None:
        return Upstream.inner_app(protocol, api_key=key, **options)
    if protocol in (CHAT, RESPONSES):
        base += "/v1"
    return Upstream(protocol, base, key, **options)


@pytest.fixture(params=["http", "inner"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def proxy(
    env: tuple[Board, str, ExitStack], transport: str, route: Callable[[str | None], Route]
) -> str:
    board, base, es = env
    target = None if transport == "inner" else base
    app = ProxaiMiddleware(board, routes=[route(target)])
    return es.enter_context(serve(app))


def script(env: tuple[Board, str, ExitStack], rule: Callable[[Seen, int], Reply | None]) -> Script:
    s = Script(rule)
    env[0].fake = FakeUpstream().push(s)
    return s


def seen(env: tuple[Board, str, ExitStack]) -> list[Seen]:
    return env[0].fake.seen


def ask_anthropic(
    url: str,
    stream: bool,
    model: str = "claude-x",
    *,
    prompt: str = "hi",
    headers: dict[str, str] | None = None,
) -> tuple[str, str]:
    client = anthropic.Anthropic(
        base_url=url, api_key="client-key", max_retries=0, default_headers=headers
    )
    kw: dict[str, Any] = {
        "model": model,
        "max_tokens": 50,
        "messages": [{"role": "user", "content": prompt}],
    }
    if stream:
        with client.messages.stream(**kw) as s:
            msg = s.get_final_message()
    else:
        msg = client.messages.create(**kw)
    text = "".join(b.text for b in msg.content if b.type == "text")
    return text, msg.model


def ask_chat(url: str, stream: bool, model: str = "gpt-x") -> tuple[str, str]:
    client = openai.OpenAI(base_url=url + "/v1", api_key="client-key", max_retries=0)
    msgs: Any = [{"role": "user", "content": "hi"}]
    if stream:
        text, served = "", ""
        for chunk in client.chat.completions.create(model=model, messages=msgs, stream=True):
            served = chunk.model or served
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
        return text, served
    r = client.chat.completions.create(model=model, messages=msgs)
    return r.choices[0].message.content or "", r.model


STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])


@STREAMS
def test_a_revoked_key_of_a_pool_is_passed_over_and_cooled(
    env: Any, transport: str, stream: bool
) -> None:
    s = script(
        env,
        lambda seen, n: (
            error(401, "authentication_error", "invalid x-api-key")
            if key_of(seen) == REVOKED_KEY
            else None
        ),
    )
    url = proxy(
        env, transport, lambda base: Route("*", upstream(ANTHROPIC, base, [REVOKED_KEY, GOOD_KEY]))
    )
    for _ in range(3):
        text, _model = ask_anthropic(url, stream)
        assert text == "answered by claude-x"
    keys = [key_of(x) for x in seen(env)]
    # The revoked key is tried at most once: after its 401 it is cooled down.
    assert keys.count(REVOKED_KEY) <= 1 and keys.count(GOOD_KEY) == 3
    assert sum(s.counts.values()) == len(keys)


@STREAMS
def test_an_overloaded_anthropic_primary_is_answered_by_a_chat_fallback(
    env: Any, transport: str, stream: bool
) -> None:
    script(env, lambda seen, n: error(529) if protocol_of(seen) == ANTHROPIC else None)
    url = proxy(
        env,
        transport,
        lambda base: Route(
            "claude-*",
            upstream(ANTHROPIC, base, max_retries=1, retry_budget=1.0),
            fallbacks=[Fallback(upstream(CHAT, base), model="backup-model")],
        ),
    )
    text, model = ask_anthropic(url, stream)
    assert (text, model) == ("answered by backup-model", "backup-model")
    protocols = [protocol_of(x) for x in seen(env)]
    assert protocols == [ANTHROPIC, ANTHROPIC, CHAT]  # one retry, then the fallback


@STREAMS
def test_a_gemini_fallback_answers_a_chat_client_whose_primary_is_down(
    env: Any, transport: str, stream: bool
) -> None:
    script(env, lambda seen, n: error(503) if protocol_of(seen) == CHAT else None)
    url = proxy(
        env,
        transport,
        lambda base: Route(
            "*",
            upstream(CHAT, base, max_retries=0),
            fallbacks=[Fallback(upstream(GEMINI, base), model="gemini-backup")],
        ),
    )
    assert ask_chat(url, stream) == ("answered by gemini-backup", "gemini-backup")


@STREAMS
def test_a_transient_500_is_retried_on_the_same_target(
    env: Any, transport: str, stream: bool
) -> None:
    s = script(env, lambda seen, n: error(500, "api_error") if n == 1 else None)
    # (A fallback, never used: the wrapped app alone in the client's protocol is
    # called as it always was, with nothing else to try.)
    spare = [Fallback(upstream(GEMINI, env[1]), model="spare")]
    url = proxy(env, transport, lambda base: Route("*", upstream(CHAT, base), fallbacks=spare))
    assert ask_chat(url, stream) == ("answered by gpt-x", "gpt-x")
    assert s.counts == {"gpt-x": 2}


@STREAMS
def test_a_request_the_provider_refuses_is_not_retried_nor_failed_over(
    env: Any, transport: str, stream: bool
) -> None:
    s = script(
        env,
        lambda seen, n: (
            error(400, "invalid_request_error", "bad field")
            if protocol_of(seen) == ANTHROPIC
            else None
        ),
    )
    url = proxy(
        env,
        transport,
        lambda base: Route(
            "*", upstream(ANTHROPIC, base), fallbacks=[Fallback(upstream(CHAT, base))]
        ),
    )
    with pytest.raises(anthropic.BadRequestError, match="bad field"):
        ask_anthropic(url, stream)
    assert s.counts == {"claude-x": 1}


@STREAMS
def test_every_target_failing_answers_with_the_primarys_own_error(
    env: Any, transport: str, stream: bool
) -> None:
    script(
        env,
        lambda seen, n: (
            error(529, "overloaded_error", "primary overloaded")
            if protocol_of(seen) == ANTHROPIC
            else error(503, "server_error", "fallback down")
        ),
    )
    url = proxy(
        env,
        transport,
        lambda base: Route(
            "*",
            upstream(ANTHROPIC, base, max_retries=0),
            fallbacks=[Fallback(upstream(CHAT, base, max_retries=0))],
        ),
    )
    with pytest.raises(anthropic.APIStatusError, match="primary overloaded") as info:
        ask_anthropic(url, stream)
    assert info.value.status_code == 529


def inband_error_first(seen: Seen, n: int) -> Reply | None:
    """An Anthropic stream that starts, then fails before any content."""
    if protocol_of(seen) != ANTHROPIC or not seen.json().get("stream"):
        return None
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_x",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 0},
        },
    }
    err = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    frames = [
        f"event: message_start\ndata: {json.dumps(start)}\n\n".encode(),
        f"event: error\ndata: {json.dumps(err)}\n\n".encode(),
    ]
    return Reply(200, SSE, frames)


def test_an_in_band_error_before_any_content_fails_over_unseen(env: Any, transport: str) -> None:
    script(env, inband_error_first)
    url = proxy(
        env,
        transport,
        lambda base: Route(
            "*",
            upstream(ANTHROPIC, base, max_retries=0),
            fallbacks=[Fallback(upstream(GEMINI, base), model="gemini-backup")],
        ),
    )
    assert ask_anthropic(url, stream=True) == ("answered by gemini-backup", "gemini-backup")


def test_a_silent_primary_is_hedged_by_the_fallback(env: Any, transport: str) -> None:
    def rule(seen: Seen, n: int) -> Reply | None:
        if requested_model(seen) == "gpt-x":
            reply = ok(seen)
            return Reply(
                reply.status, reply.headers, [b"", *reply.chunks], stall_after=1, stall=5.0
            )
        return None

    script(env, rule)
    url = proxy(
        env,
        transport,
        lambda base: Route(
            "*",
            upstream(CHAT, base, first_content_timeout=0.3),
            fallbacks=[Fallback(upstream(CHAT, base), model="gpt-backup")],
        ),
    )
    assert ask_chat(url, stream=True) == ("answered by gpt-backup", "gpt-backup")


def test_the_exchange_log_line_says_how_the_answer_was_routed(
    env: Any, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    script(env, lambda seen, n: error(529) if protocol_of(seen) == ANTHROPIC else None)
    url = proxy(
        env,
        transport,
        lambda base: Route(
            "*",
            upstream(ANTHROPIC, base, max_retries=0),
            fallbacks=[Fallback(upstream(CHAT, base, "sk-fallback-key-0123"), model="backup")],
        ),
    )
    with caplog.at_level(logging.INFO, logger="proxai_asgi"):
        assert ask_anthropic(url, stream=False) == ("answered by backup", "backup")
        # The line is written once the answer has left: wait for it, a bounded while.
        deadline = time.monotonic() + 5
        while not (lines := [r.getMessage() for r in caplog.records]) or not any(
            m.startswith("exchange ") for m in lines
        ):
            assert time.monotonic() < deadline, "no exchange line was logged"
            time.sleep(0.01)
    line = next(m for m in lines if m.startswith("exchange "))
    assert "attempts=2 fallback=1" in line
    assert "failures=0:target:529" in line
    assert "key=k-" in line and "sk-fallback" not in line  # the key's id, never the key
    assert "input_tokens=5 output_tokens=4" in line  # the fallback's usage only
