"""Budgets through the middleware: a spent budget is a 429 in the client's own
protocol, with ``retry-after`` to the next window and the client's own "stop retrying"
headers, and no upstream request; an answer's tokens are what its budget counts;
concurrent requests near the limit cannot all pass. For each client protocol, over
both transports (HTTP upstream and the wrapped app), streamed and not. The proxy runs
in process (``httpx.ASGITransport``); the HTTP upstream is a loopback server."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from proxai_asgi import Budget, ProxaiMiddleware, Route, Upstream
from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from proxai_asgi.usage.budget_memory import MemoryBudgets
from proxai_asgi.usage.budgets import Budgets
from proxai_asgi.usage.record import UsageRecord
from tests.helpers.canned import codec_answer
from tests.helpers.servers import FakeUpstream, Reply, Seen, serve
from tests.test_budgets import FlatPrices

from .test_errors import assert_shape
from .test_upstream_errors import GEMINI, client_request

pytestmark = pytest.mark.anyio

CHAT: ProtocolName = "openai_chat_completions"
RESPONSES: ProtocolName = "openai_responses"
ANTHROPIC: ProtocolName = "anthropic_messages"
CLIENTS: list[ProtocolName] = [CHAT, RESPONSES, ANTHROPIC, GEMINI]  # type: ignore[list-item]
OTHER: dict[str, ProtocolName] = {CHAT: ANTHROPIC, RESPONSES: CHAT, ANTHROPIC: RESPONSES}
OTHER[GEMINI] = ANTHROPIC
INNER = pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
USAGE = c.Usage(input_tokens=300, output_tokens=200, cached_tokens=100, cache_creation_tokens=50)
USED = 300 + 200  # (input_tokens counts the cached and written ones too)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def answer(usage: c.Usage = USAGE) -> c.Response:
    text = c.Text(text="hello")
    return c.Response(id="r1", model="m", content=[text], stop_reason="end_turn", usage=usage)


class Proxy:
    """One middleware in front of ``fake`` (over HTTP or as its wrapped app), called
    in process."""

    def __init__(self, es: ExitStack, fake: FakeUpstream, upstream: ProtocolName, inner: bool):
        self.es = es
        self.fake = fake
        self.upstream = upstream
        self.inner = inner

    def app(self, budgets: Any, **options: Any) -> ProxaiMiddleware:
        if self.inner:
            up = Upstream.inner_app(self.upstream)
        else:
            base = self.es.enter_context(serve(self.fake))
            if self.upstream in (CHAT, RESPONSES):
                base += "/v1"
            up = Upstream(self.upstream, base, "sk-upstream")
        return ProxaiMiddleware(self.fake, routes=[Route("*", up)], budgets=budgets, **options)


@pytest.fixture
def es() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


@pytest.fixture
async def client() -> AsyncIterator[Any]:
    opened: list[tuple[httpx.AsyncClient, ProxaiMiddleware]] = []

    def make(app: ProxaiMiddleware) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        http = httpx.AsyncClient(transport=transport, base_url="http://proxy", timeout=20)
        opened.append((http, app))
        return http

    yield make
    for http, app in opened:
        await http.aclose()
        await app.aclose()


def used(tokens: float) -> UsageRecord:
    rec = UsageRecord(
        request_id="r",
        time="",
        owner="",
        route=None,
        upstream=None,
        key_id=None,
        client_protocol="",
        upstream_protocol=None,
        requested_model="m",
        served_model="m",
        status=200,
    )
    rec.output_tokens = int(tokens)
    return rec


async def spend_all(budgets: Budgets, route: Route) -> None:
    """Spend a ``per="all"`` budget outside any request."""
    hold = await budgets.admit("someone", route, b"{}")
    assert hold is not None
    await budgets.settle(hold, used(budgets.budgets[0].limit))


def seconds_to_midnight() -> float:
    return 86400 - time.time() % 86400


def assert_budget_429(client: str, r: httpx.Response, before: float, after: float) -> None:
    assert r.status_code == 429, r.text
    wait = int(r.headers["retry-after"])
    assert math.ceil(after) <= wait <= math.ceil(before)
    if client == GEMINI:
        error = r.json()["error"]
        assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
        message = error["message"]
    else:
        message = assert_shape(client, r)
    assert "budget" in message and f"try again in {wait}s" in message
    if client == ANTHROPIC:  # Claude Code stops on it, instead of retrying forever
        assert r.json()["error"]["type"] == "rate_limit_error"
        assert r.headers["anthropic-ratelimit-unified-status"] == "rejected"
    if client in (CHAT, RESPONSES):
        assert r.json()["error"]["code"] == "insufficient_quota"
    if client != GEMINI:  # the OpenAI and Anthropic SDKs: no automatic retries
        assert r.headers["x-should-retry"] == "false"


@STREAM
@INNER
@pytest.mark.parametrize("translated", [False, True], ids=["same", "translated"])
@pytest.mark.parametrize("client_protocol", CLIENTS)
async def test_a_spent_budget_is_a_429_in_the_clients_protocol_and_no_upstream_request(
    es: ExitStack, client: Any, client_protocol: str, translated: bool, inner: bool, stream: bool
) -> None:
    upstream = OTHER[client_protocol] if translated else client_protocol
    fake = FakeUpstream().push(codec_answer(upstream, answer()))  # type: ignore[arg-type]
    budgets = Budgets([Budget(tokens=10_000, per="all")])
    app = Proxy(es, fake, upstream, inner).app(budgets)  # type: ignore[arg-type]
    http = client(app)
    path, body = client_request(client_protocol, stream)

    r = await http.post(path, json=body)
    assert r.status_code == 200 and len(fake.seen) == 1
    await spend_all(budgets, app.router.select("m"))  # type: ignore[arg-type]
    before = seconds_to_midnight()
    r = await http.post(path, json=body)
    assert_budget_429(client_protocol, r, before, seconds_to_midnight())
    assert len(fake.seen) == 1  # refused before any upstream was called


@STREAM
@INNER
@pytest.mark.parametrize("client_protocol", CLIENTS)
async def test_the_tokens_an_answer_used_are_what_its_budget_counts(
    es: ExitStack, client: Any, client_protocol: str, inner: bool, stream: bool
) -> None:
    upstream = OTHER[client_protocol]
    fake = FakeUpstream().push(codec_answer(upstream, answer()))
    engine = MemoryBudgets()
    # Two answers' worth: the second is admitted (500 < 1000), the third refused.
    budgets = Budgets([Budget(tokens=2 * USED, window="1d")], engine)
    http = client(Proxy(es, fake, upstream, inner).app(budgets))
    path, body = client_request(client_protocol, stream)

    for _ in range(2):
        r = await http.post(path, json=body)
        assert r.status_code == 200, r.text
    ((_key, counter),) = engine.counters.items()
    assert (counter.used, counter.held) == (2 * USED, 0)  # the holds replaced by use
    r = await http.post(path, json=body)
    assert r.status_code == 429 and len(fake.seen) == 2


# The pass-through relay (one protocol on both sides) reads the usage from the bytes it
# forwards (``Codec.relayed_usage``), so a relayed answer counts like a translated one.
@STREAM
@INNER
@pytest.mark.parametrize("client_protocol", CLIENTS)
async def test_a_pass_through_answers_tokens_are_what_its_budget_counts(
    es: ExitStack, client: Any, client_protocol: ProtocolName, inner: bool, stream: bool
) -> None:
    fake = FakeUpstream().push(codec_answer(client_protocol, answer()))
    engine = MemoryBudgets()
    budgets = Budgets([Budget(tokens=10 * USED, window="1d")], engine)
    http = client(Proxy(es, fake, client_protocol, inner).app(budgets))
    path, body = client_request(client_protocol, stream)

    r = await http.post(path, json=body)
    assert r.status_code == 200, r.text
    ((_key, counter),) = engine.counters.items()
    assert (counter.used, counter.held) == (USED, 0)


@INNER
@STREAM
async def test_concurrent_requests_near_the_limit_cannot_all_pass(
    es: ExitStack, client: Any, inner: bool, stream: bool
) -> None:
    def slow(seen: Seen) -> Reply:  # every request is in flight at once
        reply = codec_answer(ANTHROPIC, answer())(seen)
        reply.stall_after, reply.stall = 0, 0.3
        return reply

    fake = FakeUpstream().push(slow)
    # Each request holds its body (about 25 tokens) and its max_tokens (1000): the
    # fourth still sees room (~3075 held < 3500), the fifth (~4100) does not.
    budgets = Budgets([Budget(tokens=3500, window="1d")])
    http = client(Proxy(es, fake, ANTHROPIC, inner).app(budgets))
    path, body = client_request(CHAT, stream)
    body["max_tokens"] = 1000

    replies = await asyncio.gather(*(http.post(path, json=body) for _ in range(8)))
    statuses = sorted(r.status_code for r in replies)
    assert statuses == [200] * 4 + [429] * 4
    assert len(fake.seen) == 4


@INNER
@pytest.mark.parametrize("how", ["endpoint", "trigger"])
async def test_a_compactions_summary_request_holds_and_settles_with_its_exchange(
    es: ExitStack, client: Any, inner: bool, how: str
) -> None:
    fake = FakeUpstream().push(codec_answer(CHAT, answer()))
    engine = MemoryBudgets()
    budgets = Budgets([Budget(tokens=10 * USED, window="1d")], engine)
    http = client(Proxy(es, fake, CHAT, inner).app(budgets))
    history: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
    if how == "endpoint":
        r = await http.post("/v1/responses/compact", json={"model": "m", "input": history})
    else:
        history.append({"type": "compaction_trigger"})
        r = await http.post("/v1/responses", json={"model": "m", "input": history})
    assert r.status_code == 200, r.text
    assert len(fake.seen) == 1  # the summary
    ((_key, counter),) = engine.counters.items()
    assert (counter.used, counter.held) == (USED, 0)  # no hold left behind


@STREAM
@INNER
async def test_a_money_budget_counts_each_answers_cost_from_the_price_table(
    es: ExitStack, client: Any, inner: bool, stream: bool
) -> None:
    fake = FakeUpstream().push(codec_answer(CHAT, answer()))  # $0.50 an answer
    engine = MemoryBudgets()
    budgets = Budgets([Budget(usd=1.0, window="30d")], engine)
    app = Proxy(es, fake, CHAT, inner).app(budgets, prices=FlatPrices())
    http = client(app)
    path, body = client_request(ANTHROPIC, stream)

    statuses = [(await http.post(path, json=body)).status_code for _ in range(3)]
    assert statuses == [200, 200, 429] and len(fake.seen) == 2
    ((_key, counter),) = engine.counters.items()
    assert (counter.used, counter.held) == (pytest.approx(1.0), 0)
