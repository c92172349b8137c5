"""Budgets on the memory engine, on an injected clock: windows aligned to the epoch
and their roll-over, ``retry-after`` to the next window, reservations that keep
concurrent requests from all passing, settle replacing a hold by what was used, holds
that lapse, per owner / per route / for all, money budgets priced by the table."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from proxai_asgi import Budget, ProxyError, Route, Upstream
from proxai_asgi.server import config as cfg
from proxai_asgi.usage.budget_memory import MemoryBudgets
from proxai_asgi.usage.budgets import Budgets, estimate, window_seconds
from proxai_asgi.usage.holds import Hold
from proxai_asgi.usage.prices import ModelPrice, PriceTable
from proxai_asgi.usage.record import UsageRecord

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


UP = Upstream.inner_app("anthropic_messages", default_max_tokens=50)
CLAUDE = Route("claude-*", UP)
GPT = Route("gpt-*", UP)
SMALL = b'{"max_tokens": 10}'  # a hold of 5 + 10 tokens


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def record(
    tokens: int = 0, *, cost: float | None = None, status: int = 200, **more: Any
) -> UsageRecord:
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
        status=status,
    )
    rec.output_tokens = tokens
    rec.cost_usd = cost
    for k, v in more.items():
        setattr(rec, k, v)
    return rec


def budgets(*items: Budget, clock: Clock, **options: Any) -> Budgets:
    return Budgets(items, clock=clock, **options)


def state(b: Budgets, hold: Hold, now: float) -> tuple[float, float]:
    engine = b.engine
    assert isinstance(engine, MemoryBudgets)
    return engine.state(hold.draws[0], now)


async def spend(b: Budgets, owner: str, tokens: int, route: Route = CLAUDE) -> None:
    hold = await b.admit(owner, route, SMALL)
    assert hold is not None
    await b.settle(hold, record(tokens))


async def refused(b: Budgets, owner: str = "a", route: Route = CLAUDE) -> ProxyError:
    with pytest.raises(ProxyError) as caught:
        await b.admit(owner, route, SMALL)
    return caught.value


# ---------------------------------------------------------------------- windows


def test_windows_are_parsed_from_units_or_seconds() -> None:
    assert window_seconds("1d") == 86400
    assert window_seconds("12h") == 43200
    assert window_seconds("30d") == 30 * 86400
    assert window_seconds("90s") == 90
    assert window_seconds("1w") == 604800
    assert window_seconds(3600) == 3600
    for bad in ("1 day", "0s", "-1h", "", 0, -5, float("inf"), True):
        with pytest.raises(ValueError):
            window_seconds(bad)  # type: ignore[arg-type]


async def test_a_spent_budget_refuses_until_its_window_rolls_over() -> None:
    clock = Clock(3600 * 1000 + 10)  # 10 s into an hour
    b = budgets(Budget(tokens=100, window="1h"), clock=clock)
    await spend(b, "a", 60)
    await spend(b, "a", 40)  # 60 < 100: admitted, then 100 used
    err = await refused(b)
    assert err.status == 429 and err.kind == "rate_limit" and err.code == "insufficient_quota"
    clock.now = 3600 * 1001 - 0.001  # the window's last moment: still spent
    await refused(b)
    clock.now = 3600 * 1001  # the next window: a fresh count
    await spend(b, "a", 99)
    await spend(b, "a", 0)


async def test_retry_after_is_the_seconds_to_the_next_window() -> None:
    clock = Clock(86400 * 20_000 + 86400 - 3599.5)  # 3599.5 s before midnight UTC
    b = budgets(Budget(tokens=10, window="1d"), clock=clock)
    await spend(b, "a", 10)
    err = await refused(b)
    assert err.headers == [(b"retry-after", b"3600")]  # rounded up
    assert "try again in 3600s" in err.message and "10 tokens per 1d" in err.message


async def test_retry_after_is_the_latest_renewal_of_the_spent_budgets() -> None:
    clock = Clock(86400 * 20_000 + 43200)  # noon UTC
    b = budgets(Budget(tokens=10, window="1h"), Budget(tokens=10, window="1d"), clock=clock)
    await spend(b, "a", 10)
    assert (await refused(b)).headers == [(b"retry-after", b"43200")]  # midnight


# ------------------------------------------------------------------ reservations


async def test_settle_replaces_the_hold_by_what_was_used() -> None:
    clock = Clock()
    b = budgets(Budget(tokens=10_000, window="1d"), clock=clock)
    body = b'{"max_tokens": 300, "messages": "' + b"x" * 385 + b'"}'
    assert len(body) == 420
    hold = await b.admit("a", CLAUDE, body)
    assert hold is not None
    assert state(b, hold, clock.now) == (0, 105 + 300)  # a token a 4 bytes, + the cap
    used = record(
        40, input_tokens=7, cache_read_tokens=100, cache_write_5m_tokens=20,
        cache_write_1h_tokens=3, reasoning_tokens=30,
    )  # fmt: skip
    await b.settle(hold, used)
    # input + output + cache reads + both cache writes (reasoning is within output)
    assert state(b, hold, clock.now) == (170, 0)


async def test_concurrent_requests_near_the_limit_cannot_all_pass() -> None:
    clock = Clock()
    b = budgets(Budget(tokens=100, window="1d"), clock=clock)
    await spend(b, "a", 60)

    async def one() -> bool:
        try:
            await b.admit("a", CLAUDE, SMALL)  # holds 15, never settled here
        except ProxyError:
            return False
        return True

    passed = await asyncio.gather(*(one() for _ in range(10)))
    assert sum(passed) == 3  # 60, 75, 90 < 100; then 105: spent


async def test_a_hold_never_settled_stops_counting_after_its_ttl() -> None:
    clock = Clock()
    b = budgets(Budget(tokens=20, window="1d", hold_ttl=60), clock=clock)
    assert await b.admit("a", CLAUDE, SMALL) is not None  # 15 held: its instance dies
    assert await b.admit("a", CLAUDE, SMALL) is not None  # 15 < 20
    await refused(b)  # 30 held
    clock.now += 59.9
    await refused(b)
    clock.now += 0.1  # both holds lapse
    hold = await b.admit("a", CLAUDE, SMALL)
    assert hold is not None and state(b, hold, clock.now) == (0, 15)


async def test_a_late_settle_still_counts_after_its_hold_lapsed() -> None:
    clock = Clock()
    b = budgets(Budget(tokens=100, window="1d", hold_ttl=10), clock=clock)
    hold = await b.admit("a", CLAUDE, SMALL)
    assert hold is not None
    clock.now += 30
    await b.settle(hold, record(70))
    assert state(b, hold, clock.now) == (70, 0)


async def test_an_exchange_counts_in_the_window_it_was_admitted_in() -> None:
    clock = Clock(7200.0 - 1)
    b = budgets(Budget(tokens=100, window="1h"), clock=clock)
    hold = await b.admit("a", CLAUDE, SMALL)
    assert hold is not None
    clock.now += 2  # the answer ends in the next window: the last one is over
    await b.settle(hold, record(500))
    await spend(b, "a", 99)  # the new window owes nothing


async def test_a_failed_exchange_uses_nothing() -> None:
    clock = Clock()
    b = budgets(Budget(tokens=100, window="1d"), clock=clock)
    hold = await b.admit("a", CLAUDE, SMALL)
    assert hold is not None
    await b.settle(hold, record(0, status=502))
    assert state(b, hold, clock.now) == (0, 0)


async def test_a_sub_exchanges_hold_is_released_with_its_parent() -> None:
    clock = Clock()
    b = budgets(Budget(tokens=100, window="1d"), clock=clock)
    parent, sub = await b.admit("a", CLAUDE, SMALL), await b.admit("a", CLAUDE, SMALL)
    assert parent is not None and sub is not None
    parent.later.append(sub)
    await b.settle(parent, record(50))
    assert state(b, parent, clock.now) == (50, 0)


def test_the_estimate_reads_each_protocols_output_cap() -> None:
    # (input: a token per 4 bytes, rounded up)
    assert estimate(b'{"max_tokens": 7}', 50) == (5, 7)  # 17 bytes
    assert estimate(b'{"max_completion_tokens": 8}', 50) == (7, 8)  # 28
    assert estimate(b'{"max_output_tokens": 9}', 50) == (6, 9)  # 24
    assert estimate(b'{"generationConfig": {"maxOutputTokens": 11}}', 50) == (12, 11)  # 46
    assert estimate(b"{}", 50) == (1, 50)  # the upstream's default_max_tokens
    # A body the codec will refuse: estimated all the same, never an error here.
    assert estimate(b'{"max_tokens": "many"', 50) == (6, 50)


# ----------------------------------------------------------------------- scopes


async def test_an_owner_budget_counts_each_owner_apart() -> None:
    clock = Clock()
    b = budgets(Budget(tokens=100, window="1d"), clock=clock)
    await spend(b, "a", 100)
    await refused(b, "a")
    await refused(b, "a", GPT)  # every route together
    await spend(b, "b", 99)


async def test_a_route_budget_counts_every_owner_of_a_route_together() -> None:
    clock = Clock()
    b = budgets(Budget(tokens=100, window="1d", per="route"), clock=clock)
    await spend(b, "a", 100)
    await refused(b, "b")  # another owner, the same route
    await spend(b, "b", 99, GPT)  # another route: its own count


async def test_a_budget_for_all_counts_every_owner_and_route_together() -> None:
    clock = Clock()
    b = budgets(Budget(tokens=100, window="1d", per="all"), clock=clock)
    await spend(b, "a", 100)
    await refused(b, "b", GPT)


async def test_a_budget_naming_routes_leaves_the_others_alone() -> None:
    clock = Clock()
    b = budgets(Budget(tokens=100, window="1d", routes=["claude-*"]), clock=clock)
    await spend(b, "a", 100)
    await refused(b, "a")
    assert await b.admit("a", GPT, SMALL) is None  # draws on no budget


# ------------------------------------------------------------------------ money


def FlatPrices() -> PriceTable:
    """$1 per thousand tokens of any kind, for the model "m" only."""
    per_million = 1000.0
    flat = ModelPrice(
        input=per_million,
        output=per_million,
        cache_read=per_million,
        cache_write_5m=per_million,
        cache_write_1h=per_million,
    )
    return PriceTable({"m": flat}, "test")


async def test_a_money_budget_holds_the_priced_estimate_and_counts_the_cost() -> None:
    clock = Clock()
    b = budgets(Budget(usd=1.0, window="1d"), clock=clock, prices=FlatPrices())
    hold = await b.admit("a", CLAUDE, SMALL, "m")
    assert hold is not None and state(b, hold, clock.now) == (0, pytest.approx(0.015))
    await b.settle(hold, record(cost=0.75))
    assert state(b, hold, clock.now) == (0.75, 0)
    await spend(b, "a", 0)  # 0.75 < 1
    hold = await b.admit("a", CLAUDE, SMALL, "m")
    assert hold is not None
    await b.settle(hold, record(cost=0.25))
    err = await refused(b)
    assert "1 USD per 1d" in err.message


async def test_an_unpriced_model_adds_nothing_to_a_money_budget_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    b = budgets(Budget(usd=1.0, window="1d"), clock=clock, prices=FlatPrices())
    with caplog.at_level(logging.WARNING, logger="proxai_asgi"):
        for _ in range(3):
            hold = await b.admit("a", CLAUDE, SMALL, "free-model")
            assert hold is not None and state(b, hold, clock.now) == (0, 0)
            await b.settle(hold, record(10_000, served_model="free-model"))
            assert state(b, hold, clock.now) == (0, 0)
    assert caplog.text.count("'free-model' has no price") == 1


# ------------------------------------------------------------------ the engine


def test_the_memory_engine_is_bounded_by_bytes() -> None:
    engine = MemoryBudgets(max_bytes=64 * 1024)
    b = Budgets([Budget(tokens=100, window="1d")], engine, clock=Clock())

    async def many() -> None:
        for i in range(5000):  # a stream of new owners
            await spend(b, f"owner-{i}", 1)

    asyncio.run(many())
    assert engine.counters.nbytes <= 64 * 1024
    assert len(engine.counters) < 5000


# ------------------------------------------------------------- configuration


def test_a_budget_is_refused_when_its_definition_is_not_one() -> None:
    for bad in (
        {},
        {"tokens": 1, "usd": 1.0},
        {"tokens": 0},
        {"usd": -1.0},
        {"tokens": 1.5},
        {"tokens": 1, "per": "team"},
        {"tokens": 1, "window": "1 month"},
        {"tokens": 1, "routes": "claude-*"},
        {"tokens": 1, "name": "a:b"},
        {"tokens": 1, "hold_ttl": 0},
    ):
        with pytest.raises(ValueError):
            Budget(**bad)
    with pytest.raises(ValueError, match="give each a name"):
        Budgets([Budget(tokens=1), Budget(tokens=2)])
    Budgets([Budget(tokens=1), Budget(tokens=2, name="second")])


def test_the_toml_budgets_become_budgets() -> None:
    conf = cfg.parse(
        {
            "budgets": [
                {"tokens": 2000, "window": "1h"},
                {"usd": 5.5, "window": 86400, "per": "route", "routes": ["claude-*"]},
            ]
        }
    )
    assert cfg.build_budgets(conf) == [
        Budget(tokens=2000, window="1h"),
        Budget(usd=5.5, window=86400, per="route", routes=("claude-*",)),
    ]
    for bad, where in (
        ({"tokens": 1, "window": "soon"}, r"budgets\[0\]: window"),
        ({"tokens": 1, "colour": "red"}, "colour"),
    ):
        with pytest.raises(cfg.ConfigError, match=where):
            cfg.parse({"budgets": [bad]})
    with pytest.raises(cfg.ConfigError, match="give each a name"):
        cfg.parse({"budgets": [{"tokens": 1}, {"tokens": 2}]})


def test_the_standalone_servers_toml_budgets_reach_the_middleware(tmp_path: Any) -> None:
    from proxai_asgi.server.cli import build_app, build_parser

    path = tmp_path / "proxai.toml"
    path.write_text(
        '[[budgets]]\ntokens = 5000\nwindow = "1h"\n\n'
        '[[budgets]]\nusd = 2.5\nper = "route"\nroutes = ["*"]\nhold_ttl = 60\n'
    )
    app, _server = build_app(build_parser().parse_args(["--config", str(path)]), {})
    found = app.context.accounting.budgets
    assert found is not None and isinstance(found.engine, MemoryBudgets)
    assert found.budgets == (
        Budget(tokens=5000, window="1h"),
        Budget(usd=2.5, per="route", routes=("*",), hold_ttl=60),
    )
    assert found.prices is app.context.accounting.prices  # money holds are priced
    app, _server = build_app(build_parser().parse_args([]), {})
    assert app.context.accounting.budgets is None
