"""Failures beyond failoverbench's catalogue, on the same faulty provider: a key pool
whose first key is revoked, an Anthropic primary overloaded (529) answered by a
fallback of another protocol, and an in-band error before the first content, for each
upstream protocol."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from proxai_asgi import Fallback, ProxaiMiddleware, Route, Upstream
from proxai_asgi.codec import ProtocolName
from tests.helpers.faulty_upstream import ANSWER, REVOKED_KEY, FaultyUpstream, faulty_upstream
from tests.helpers.servers import serve
from tests.routing.test_fault_catalogue import KNOBS, Result, _not_found, ask

UPSTREAMS: dict[str, ProtocolName] = {
    "chat": "openai_chat_completions",
    "responses": "openai_responses",
    "anthropic": "anthropic_messages",
    "gemini": "gemini_generate_content",
}
STREAMED = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
UPSTREAM = pytest.mark.parametrize("up", list(UPSTREAMS))


def _upstream(base: str, up: str, key: str | list[str] = "sk-good", **extra: Any) -> Upstream:
    url = base + "/v1" if up in ("chat", "responses") else base
    return Upstream(UPSTREAMS[up], url, key, name=up, **KNOBS, **extra)


def _routes(base: str) -> list[Route]:
    routes = []
    for up in UPSTREAMS:
        pool = _upstream(base, up, [REVOKED_KEY, "sk-good"])
        routes.append(Route(f"pool-{up}", pool, "fb-ok"))
        ok = Fallback(_upstream(base, up), model="fb-ok")
        routes.append(Route(f"inband-{up}", _upstream(base, up), "fb-inband", fallbacks=[ok]))
        # An Anthropic primary, overloaded; a fallback of this protocol.
        claude = _upstream(base, "anthropic")
        routes.append(Route(f"overloaded-to-{up}", claude, "fb-overloaded", fallbacks=[ok]))
    return routes


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[FaultyUpstream, str]]:
    with (
        faulty_upstream(scale=0.05) as (fake, base),
        serve(ProxaiMiddleware(_not_found, routes=_routes(base))) as url,
    ):
        yield fake, url


def chat(stack: tuple[FaultyUpstream, str], model: str, stream: bool) -> Result:
    stack[0].reset()
    return ask(stack[1], model, stream, 5.0)


@UPSTREAM
@STREAMED
def test_a_revoked_pool_key_is_replaced_at_once_and_then_skipped(
    stack: tuple[FaultyUpstream, str], up: str, stream: bool
) -> None:
    got = chat(stack, f"pool-{up}", stream)
    assert got.complete, got.error
    assert [a.key for a in stack[0].log] in (["sk-good"], [REVOKED_KEY, "sk-good"])
    # The key is cooled down: the next request goes to the good key straight away.
    assert chat(stack, f"pool-{up}", stream).complete
    assert [a.key for a in stack[0].log] == ["sk-good"]


@UPSTREAM
def test_an_in_band_error_before_content_fails_over_like_a_5xx(
    stack: tuple[FaultyUpstream, str], up: str
) -> None:
    # Streamed: an upstream asked for JSON answers a failure with its status.
    got = chat(stack, f"inband-{up}", True)
    assert got.complete, got.error
    assert got.model == "fb-ok"


@UPSTREAM
@STREAMED
def test_an_overloaded_anthropic_primary_is_answered_by_another_protocol(
    stack: tuple[FaultyUpstream, str], up: str, stream: bool
) -> None:
    fake, url = stack
    fake.reset()
    client = anthropic.Anthropic(base_url=url, api_key="sk-client", max_retries=0, timeout=5)
    model, msgs = f"overloaded-to-{up}", [{"role": "user", "content": "Say it."}]
    if stream:
        with client.messages.stream(model=model, max_tokens=200, messages=msgs) as s:  # type: ignore[arg-type]
            message = s.get_final_message()
    else:
        message = client.messages.create(model=model, max_tokens=200, messages=msgs)  # type: ignore[arg-type]
    client.close()
    text = "".join(b.text for b in message.content if b.type == "text")
    assert " ".join(text.split()) == ANSWER
    assert message.model == "fb-ok" and message.usage.output_tokens > 0
    # The primary's attempts were its 529s; once cooled down (an earlier case asked
    # the same overloaded model of it), it is not asked at all.
    *primary, served = fake.log
    assert served.protocol == up and served.model == "fb-ok"
    assert all(a.protocol == "anthropic" and a.action == "529 overloaded" for a in primary)
