"""Stored Responses on a real redis-server: two proxies sharing it (a turn answered
by one is continued through the other), and the store going down mid-test."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import openai
import pytest

from proxai_asgi import ProxaiMiddleware, Upstream
from tests.e2e.test_stored_responses import ANTHROPIC, CHAT, COMMAND, MODEL, _error, _kinds
from tests.helpers.redis_server import RedisServer, redis_server
from tests.helpers.scripted_model import ScriptedModel
from tests.helpers.servers import serve


async def _not_found(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"not here"})


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


def instances(es: ExitStack, model: ScriptedModel, n: int, **options: Any) -> list[openai.OpenAI]:
    """``n`` proxies in front of one model (over HTTP), each its own middleware and
    server; a client for each."""
    upstream_url = es.enter_context(serve(model))
    base = upstream_url if model.protocol == ANTHROPIC else upstream_url + "/v1"
    clients = []
    for _ in range(n):
        up = Upstream(model.protocol, base, "sk-upstream-key")
        url = es.enter_context(serve(ProxaiMiddleware(_not_found, upstream=up, **options)))
        clients.append(openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0))
    return clients


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("upstream", [CHAT, ANTHROPIC], ids=["chat", "anthropic"])
def test_a_turn_answered_by_one_instance_is_continued_through_another(
    redis: RedisServer, upstream: str, stream: bool
) -> None:
    model = ScriptedModel(upstream, COMMAND)  # type: ignore[arg-type]
    with ExitStack() as es:
        a, b = instances(es, model, 2, store=redis.url, store_secret="fleet-secret")
        if stream:
            events = list(a.responses.create(model=MODEL, input="remember 4711", stream=True))
            first = events[-1].response  # type: ignore[union-attr]
        else:
            first = a.responses.create(model=MODEL, input="remember 4711")
        second = b.responses.create(
            model=MODEL, input="what was it?", previous_response_id=first.id
        )
        third = a.responses.create(model=MODEL, input="sure?", previous_response_id=second.id)
        assert b.responses.retrieve(first.id).model_dump() == first.model_dump()
        assert len(list(a.responses.input_items.list(third.id))) == 5
        b.responses.delete(first.id)
        with pytest.raises(openai.NotFoundError):
            a.responses.retrieve(first.id)
    assert third.previous_response_id == second.id
    assert _kinds(model.exchanges[1].decoded) == ["user:Text", "assistant:Text", "user:Text"]  # type: ignore[arg-type]
    assert len(_kinds(model.exchanges[2].decoded)) == 5  # type: ignore[arg-type]


def test_instances_without_a_secret_share_the_key_redis_keeps(redis: RedisServer) -> None:
    """No configured secret: every instance reads the owner key Redis keeps, so a
    client's conversation is its own on every instance, and another key's is not."""
    model = ScriptedModel(CHAT, COMMAND)
    with ExitStack() as es:
        a, b = instances(es, model, 2, store=redis.url)
        first = a.responses.create(model=MODEL, input="mine")
        assert b.responses.retrieve(first.id).id == first.id
        b.responses.create(model=MODEL, input="next", previous_response_id=first.id)
        other = b.with_options(api_key="sk-other")
        with pytest.raises(openai.NotFoundError):
            other.responses.retrieve(first.id)


def test_instances_with_different_secrets_do_not_share_owners(redis: RedisServer) -> None:
    model = ScriptedModel(CHAT, COMMAND)
    with ExitStack() as es:
        (a,) = instances(es, model, 1, store=redis.url, store_secret="one")
        (b,) = instances(es, model, 1, store=redis.url, store_secret="two")
        first = a.responses.create(model=MODEL, input="mine")
        with pytest.raises(openai.NotFoundError):
            b.responses.retrieve(first.id)
        assert a.responses.retrieve(first.id).id == first.id


def test_a_store_that_goes_down_fails_only_what_needs_it(
    redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel(CHAT, COMMAND)
    with ExitStack() as es:
        (client,) = instances(es, model, 1, store=redis.url)
        first = client.responses.create(model=MODEL, input="stored while up")
        redis.stop()
        calls = len(model.exchanges)
        with caplog.at_level(logging.WARNING, logger="proxai_asgi"):
            plain = client.responses.create(model=MODEL, input="no chain, no store needed")
            events = list(client.responses.create(model=MODEL, input="streamed", stream=True))
        failures = []
        for call in (
            lambda: client.responses.create(
                model=MODEL, input="chained", previous_response_id=first.id
            ),
            lambda: client.responses.retrieve(first.id),
            lambda: client.responses.input_items.list(first.id),
            lambda: client.responses.delete(first.id),
        ):
            with pytest.raises(openai.InternalServerError) as info:
                call()
            failures.append((info.value.status_code, _error(info.value)))
    assert plain.status == "completed" and plain.output_text
    assert events[-1].type == "response.completed"
    assert len(model.exchanges) == calls + 2  # the chained request never went upstream
    assert [status for status, _ in failures] == [503] * 4
    assert {e["code"] for _, e in failures} == {"store_unavailable"}
    assert {e["type"] for _, e in failures} == {"server_error"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("answered but not stored" in w and plain.id in w for w in warnings), warnings
    assert not any(redis.url.split("//")[1] in e["message"] for _, e in failures)
