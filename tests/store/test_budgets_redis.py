"""Budgets shared through a real redis-server by several instances (``Budgets`` on
``RedisBudgets`` engines with clients of their own, as two middlewares have), on an
injected clock: one budget stops every instance at the same total, concurrent
admissions on two instances cannot all pass, holds lapse, windows roll over, keys
expire; Redis down fails no call (each instance goes on from the last totals it saw)
and is logged once. Then through two ``ProxaiMiddleware`` on ``store="redis://..."``."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from proxai_asgi import Budget, ProxaiMiddleware, ProxyError, Route, Upstream
from proxai_asgi import canonical as c
from proxai_asgi.store import open_store
from proxai_asgi.store.redis import RedisStore
from proxai_asgi.usage.budget_memory import MemoryBudgets
from proxai_asgi.usage.budget_redis import RedisBudgets, shared_engine
from proxai_asgi.usage.budgets import Budgets, open_budgets
from proxai_asgi.usage.record import UsageRecord
from tests.helpers.canned import codec_answer
from tests.helpers.redis_server import RedisServer, redis_server
from tests.helpers.servers import FakeUpstream, serve

from .test_routing_state_redis import BACK, restart

pytestmark = pytest.mark.anyio

DOWN = "budgets: Redis unavailable, using this process's own view"
ROUTE = Route("*", Upstream.inner_app("anthropic_messages", default_max_tokens=50))
SMALL = b'{"max_tokens": 10}'  # a hold of 5 + 10 tokens
DAY = 86400.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


class Clock:
    def __init__(self, now: float = DAY * 20_000 + 100) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def record(tokens: int) -> UsageRecord:
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
    rec.output_tokens = tokens
    return rec


class Fleet:
    """Instances of one budget definition on one Redis, closed at the end."""

    def __init__(self, url: str, clock: Clock) -> None:
        self.url = url
        self.clock = clock
        self.prefix = f"test:{secrets.token_hex(4)}:budget:"
        self.opened: list[Budgets] = []

    def instance(self, *budgets: Budget, backoff: float = 1.0) -> Budgets:
        engine = RedisBudgets(self.url, prefix=self.prefix, backoff=backoff)
        made = Budgets(budgets, engine, clock=self.clock)
        self.opened.append(made)
        return made

    async def aclose(self) -> None:
        for b in self.opened:
            await b.aclose()


@pytest.fixture
async def fleet(redis: RedisServer) -> AsyncIterator[Fleet]:
    made = Fleet(redis.url, Clock())
    try:
        yield made
    finally:
        await made.aclose()


async def spend(b: Budgets, tokens: int, owner: str = "a") -> bool:
    """One exchange of ``tokens``; False when refused."""
    try:
        hold = await b.admit(owner, ROUTE, SMALL)
    except ProxyError as err:
        assert err.status == 429
        return False
    assert hold is not None
    await b.settle(hold, record(tokens))
    return True


def engine_of(b: Budgets) -> RedisBudgets:
    assert isinstance(b.engine, RedisBudgets)
    return b.engine


async def test_one_budget_stops_two_instances_at_the_same_total(fleet: Fleet) -> None:
    one = fleet.instance(Budget(tokens=1000, window="1d"))
    other = fleet.instance(Budget(tokens=1000, window="1d"))
    passed = 0
    for i in range(20):
        if not await spend((one, other)[i % 2], 100):
            break
        passed += 1
    assert passed == 10  # 10 x 100 = 1000, whichever instance served each
    assert not await spend(one, 1) and not await spend(other, 1)
    assert await spend(one, 1, owner="b")  # another owner, its own count


async def test_concurrent_admissions_on_two_instances_cannot_all_pass(fleet: Fleet) -> None:
    one = fleet.instance(Budget(tokens=100, window="1d", per="all"))
    other = fleet.instance(Budget(tokens=100, window="1d", per="all"))
    await spend(one, 40)

    async def admit(b: Budgets, owner: str) -> bool:
        try:
            await b.admit(owner, ROUTE, SMALL)  # holds 15, not settled
        except ProxyError:
            return False
        return True

    passed = await asyncio.gather(*(admit((one, other)[i % 2], f"o{i}") for i in range(12)))
    assert sum(passed) == 4  # 40, 55, 70, 85 < 100; then 100: spent


async def test_a_hold_of_a_dead_instance_lapses_after_its_ttl(fleet: Fleet) -> None:
    dead = fleet.instance(Budget(tokens=20, window="1d", hold_ttl=60))
    alive = fleet.instance(Budget(tokens=20, window="1d", hold_ttl=60))
    assert await dead.admit("a", ROUTE, SMALL) is not None  # 15 held, never settled
    assert await spend(alive, 0)  # 15 < 20 (its own hold came and went)
    assert await dead.admit("a", ROUTE, SMALL) is not None  # 30 held
    assert not await spend(alive, 0)
    fleet.clock.now += 60
    assert await spend(alive, 3)
    assert await spend(alive, 3)


async def test_a_window_rolls_over_for_every_instance(fleet: Fleet) -> None:
    one = fleet.instance(Budget(tokens=100, window="1h"))
    other = fleet.instance(Budget(tokens=100, window="1h"))
    assert await spend(one, 100)
    with pytest.raises(ProxyError) as refused:
        await other.admit("a", ROUTE, SMALL)
    assert refused.value.headers == [(b"retry-after", b"3500")]  # 100 s into the hour
    fleet.clock.now += 3500
    assert await spend(other, 99) and await spend(one, 0)


async def test_a_settle_replaces_the_hold_by_what_was_used(fleet: Fleet) -> None:
    one = fleet.instance(Budget(tokens=1000, window="1d", per="all"))
    hold = await one.admit("a", ROUTE, SMALL)
    assert hold is not None
    engine = engine_of(one)
    (counter, _holds) = engine._keys(hold)
    assert await engine.redis.hget(counter, "held") == b"15"
    await one.settle(hold, record(70))
    found = await engine.redis.hgetall(counter)
    assert float(found[b"used"]) == 70 and float(found.get(b"held", 0)) == 0
    assert set(found) <= {b"used", b"held"}  # the hold's own field gone


async def test_every_key_expires_when_its_window_and_holds_are_over(fleet: Fleet) -> None:
    one = fleet.instance(Budget(tokens=1000, window="1h", hold_ttl=600))
    await spend(one, 10)
    hold = await one.admit("a", ROUTE, SMALL)
    assert hold is not None
    redis = engine_of(one).redis
    keys = [k async for k in redis.scan_iter(match=fleet.prefix + "*")]
    assert len(keys) == 2  # the counter and its holds
    for key in keys:
        ttl = await redis.pttl(key)
        assert 0 < ttl <= (3500 + 600) * 1000  # the rest of the hour, then a hold's TTL


async def test_redis_down_fails_open_on_the_last_totals_seen_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with redis_server() as server:
        fleet = Fleet(server.url, Clock())
        try:
            one = fleet.instance(Budget(tokens=100, window="1d"), backoff=0.05)
            other = fleet.instance(Budget(tokens=100, window="1d"), backoff=0.05)
            assert await spend(other, 60)  # other's view: 60
            hold = await one.admit("a", ROUTE, SMALL)  # one's view: 60, from Redis
            assert hold is not None and hold.shared
            server.stop()
            with caplog.at_level(logging.WARNING, logger="proxai_asgi"):
                await one.settle(hold, record(20))  # counted in one's view: 80
                # Each instance goes on alone from there: at most the limit each.
                assert [await spend(one, 15) for _ in range(3)] == [True, True, False]
                assert [await spend(other, 30) for _ in range(3)] == [True, True, False]
                assert caplog.text.count(DOWN) == 2  # once for each instance
                assert not [r for r in caplog.records if r.levelno >= logging.ERROR]

                restart(server)  # (empty: no persistence)
                for _ in range(200):
                    if caplog.text.count(BACK) == 2:
                        break
                    for b in (one, other):
                        await spend(b, 0, owner="probe")
                    await asyncio.sleep(0.01)
                assert caplog.text.count(BACK) == 2
            hold = await one.admit("a", ROUTE, SMALL)  # shared again: Redis decides
            assert hold is not None and hold.shared
            await one.settle(hold, record(100))
            assert not await spend(other, 0)
        finally:
            await fleet.aclose()


async def test_the_redis_engine_shares_the_response_stores_client(redis: RedisServer) -> None:
    store = open_store(redis.url, prefix=f"test:{secrets.token_hex(4)}:")
    assert isinstance(store, RedisStore)
    engine = shared_engine(store)
    assert isinstance(engine, RedisBudgets) and engine.redis is store.redis
    assert isinstance(shared_engine(redis.url), RedisBudgets)
    for other in (None, "memory", "sqlite:////tmp/x.db", "off"):
        assert isinstance(shared_engine(other), MemoryBudgets)
    await engine.aclose()
    budgets = open_budgets([Budget(tokens=10)], store)
    assert budgets is not None and isinstance(budgets.engine, RedisBudgets)
    assert budgets.engine.redis is store.redis
    await budgets.aclose()
    assert await store.redis.ping()  # (the client is left open for the store)
    await store.aclose()


# ---------------------------------------------------------- through the middleware

ANSWER = c.Response(
    id="r1",
    model="m",
    content=[c.Text(text="hello")],
    stop_reason="end_turn",
    usage=c.Usage(input_tokens=300, output_tokens=200),  # 500 tokens an answer
)
ASK = {"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}


class Instances:
    """``ProxaiMiddleware`` instances on one Redis store with the same budget, in front
    of one Chat upstream (over HTTP or as each one's wrapped app), called in process
    by an Anthropic client."""

    def __init__(self, es: ExitStack, url: str, inner: bool) -> None:
        self.es = es
        self.url = url
        self.fake = FakeUpstream().push(codec_answer("openai_chat_completions", ANSWER))
        self.base = None if inner else es.enter_context(serve(self.fake)) + "/v1"
        self.apps: list[ProxaiMiddleware] = []
        self.clients: list[httpx.AsyncClient] = []

    def add(self, budget: Budget) -> httpx.AsyncClient:
        if self.base is None:
            up = Upstream.inner_app("openai_chat_completions")
        else:
            up = Upstream("openai_chat_completions", self.base, "sk-upstream")
        app = ProxaiMiddleware(self.fake, routes=[Route("*", up)], store=self.url, budgets=[budget])
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        client = httpx.AsyncClient(transport=transport, base_url="http://proxy", timeout=20)
        self.apps.append(app)
        self.clients.append(client)
        return client

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()
        for app in self.apps:
            await app.aclose()


async def ask(client: httpx.AsyncClient, key: str = "sk-client-one", stream: bool = False) -> int:
    body: dict[str, Any] = {**ASK, "stream": stream}
    r = await client.post("/v1/messages", json=body, headers={"x-api-key": key})
    if r.status_code != 200:
        assert r.status_code == 429 and r.json()["error"]["type"] == "rate_limit_error", r.text
        assert int(r.headers["retry-after"]) >= 1
    return r.status_code


INNER = pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])


@INNER
async def test_two_middlewares_sharing_redis_stop_at_the_same_total(
    redis: RedisServer, inner: bool
) -> None:
    budget = Budget(tokens=2000, window="1d", name=f"t{secrets.token_hex(4)}")
    with ExitStack() as es:
        fleet = Instances(es, redis.url, inner)
        try:
            a, b = fleet.add(budget), fleet.add(budget)
            statuses = [await ask((a, b)[i % 2], stream=i % 3 == 0) for i in range(8)]
            # 0, 500, 1000, 1500 < 2000: four answers, whichever instance; then spent.
            assert statuses == [200] * 4 + [429] * 4
            assert len(fleet.fake.seen) == 4
            assert await ask(a, "sk-client-two") == 200  # another client: its own budget
        finally:
            await fleet.aclose()


@INNER
async def test_redis_stopped_under_two_middlewares_fails_no_request(
    inner: bool, caplog: pytest.LogCaptureFixture
) -> None:
    budget = Budget(tokens=2000, window="1d")
    with redis_server() as own, ExitStack() as es:
        fleet = Instances(es, own.url, inner)
        try:
            a, b = fleet.add(budget), fleet.add(budget)
            # A saw 0 used, then its own 500; B saw those 500, then its own: 1000.
            assert [await ask(a), await ask(b)] == [200, 200]
            own.stop()
            with caplog.at_level(logging.WARNING, logger="proxai_asgi"):
                # Each instance goes on alone from the total it last saw, up to the
                # limit; never a 500.
                for client, answered in ((a, 3), (b, 2)):  # 500, 1000, 1500; 1000, 1500
                    statuses = [await ask(client, stream=i == 1) for i in range(4)]
                    assert statuses == [200] * answered + [429] * (4 - answered)
            assert caplog.text.count(DOWN) == 2  # once for each instance
            assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        finally:
            await fleet.aclose()
