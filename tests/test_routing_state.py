"""The routing state of one process (``MemoryRoutingState``) on an injected clock:
cooldowns only lengthen, lapse into a probe for one caller, and are forgotten on a
success; session bindings expire unless used; every table is bounded by bytes. And
``open_routing_state`` picks the engine from the ``store=`` value."""

from __future__ import annotations

import asyncio
import threading

import pytest

from proxai_asgi.routing.health import MIN_PROBATION, MemoryRoutingState
from proxai_asgi.routing.shared_redis import RedisRoutingState
from proxai_asgi.routing.state import open_routing_state
from proxai_asgi.store import MemoryStore, open_store
from proxai_asgi.store.redis import RedisStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    def __init__(self) -> None:
        self.now = 5_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def state(clock: Clock) -> MemoryRoutingState:
    return MemoryRoutingState(clock=clock)


async def test_a_cooldown_is_reported_only_for_the_names_asked_and_cooled(
    state: MemoryRoutingState,
) -> None:
    assert await state.cooled(["t:a", "k:1"]) == {}
    await state.cool("t:a", 10)
    assert await state.cooled(["t:a", "k:1"]) == {"t:a": 10.0}
    assert await state.cooled(["k:1"]) == {}


async def test_a_cooldown_is_only_ever_lengthened(
    state: MemoryRoutingState, clock: Clock
) -> None:
    await state.cool("t:a", 30)
    await state.cool("t:a", 5)  # a shorter one later does not cut it
    assert await state.cooled(["t:a"]) == {"t:a": 30.0}
    clock.now += 10
    await state.cool("t:a", 60)
    assert await state.cooled(["t:a"]) == {"t:a": 60.0}


async def test_a_lapsed_cooldown_waits_for_a_probe_then_is_forgotten(
    state: MemoryRoutingState, clock: Clock
) -> None:
    await state.cool("t:a", 10)
    clock.now += 9.5
    assert await state.cooled(["t:a"]) == {"t:a": 0.5}
    clock.now += 0.5
    assert await state.cooled(["t:a"]) == {"t:a": 0.0}  # failing, no longer cooled
    clock.now += MIN_PROBATION - 0.1
    assert await state.cooled(["t:a"]) == {"t:a": 0.0}
    clock.now += 0.1
    assert await state.cooled(["t:a"]) == {}  # healthy again, probed or not


async def test_only_one_caller_wins_the_probe_per_window(
    state: MemoryRoutingState, clock: Clock
) -> None:
    await state.cool("t:a", 10)
    assert not await state.claim_probe("t:a", 5)  # still cooled: nobody probes
    clock.now += 10
    won = await asyncio.gather(*(state.claim_probe("t:a", 5) for _ in range(8)))
    assert won.count(True) == 1
    clock.now += 4.9
    assert not await state.claim_probe("t:a", 5)  # the probe is still out
    clock.now += 0.1
    assert await state.claim_probe("t:a", 5)  # it never came back: another one
    assert not await state.claim_probe("t:a", 5)


async def test_a_name_that_is_not_failing_needs_no_probe(state: MemoryRoutingState) -> None:
    assert await state.claim_probe("t:healthy", 5)
    assert await state.claim_probe("t:healthy", 5)


async def test_a_failed_probe_cools_again_and_counts_one_more_in_a_row(
    state: MemoryRoutingState, clock: Clock
) -> None:
    assert await state.cool("t:a", 10) == 1
    assert await state.cool("t:a", 10) == 1  # (failures during a cooldown count once)
    clock.now += 10
    assert await state.claim_probe("t:a", 5)
    assert await state.cool("t:a", 20) == 2
    assert await state.cooled(["t:a"]) == {"t:a": 20.0}
    clock.now += 20
    assert await state.claim_probe("t:a", 5)  # the failed probe's window is over


async def test_a_success_forgets_the_cooldown_and_the_failures_in_a_row(
    state: MemoryRoutingState, clock: Clock
) -> None:
    await state.cool("t:a", 10)
    clock.now += 10
    await state.cool("t:a", 10)
    await state.recovered("t:a")
    assert await state.cooled(["t:a"]) == {}
    assert await state.claim_probe("t:a", 5)
    assert await state.cool("t:a", 10) == 1


async def test_the_probe_is_won_once_across_threads(
    state: MemoryRoutingState, clock: Clock
) -> None:
    await state.cool("t:a", 1)
    clock.now += 1
    won: list[bool] = []
    start = threading.Barrier(8)

    def claim() -> None:
        start.wait()
        won.append(asyncio.run(state.claim_probe("t:a", 5)))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert won.count(True) == 1 and len(won) == 8


async def test_a_binding_expires_unless_used_and_each_use_renews_it(
    state: MemoryRoutingState, clock: Clock
) -> None:
    await state.bind("ab12", "t:primary", ttl=100)
    for _ in range(3):
        clock.now += 90
        assert await state.bound("ab12") == "t:primary"
    clock.now += 100
    assert await state.bound("ab12") is None
    assert await state.bound("cd34") is None


async def test_a_binding_moves_when_bound_again(state: MemoryRoutingState, clock: Clock) -> None:
    await state.bind("ab12", "t:primary", ttl=100)
    await state.bind("ab12", "t:fallback-with-a-longer-name", ttl=10)
    assert await state.bound("ab12") == "t:fallback-with-a-longer-name"
    clock.now += 10
    assert await state.bound("ab12") is None
    assert state._bindings.nbytes == state._bindings.size_of(
        "ab12", state._bindings.get("ab12")  # type: ignore[arg-type]
    )


async def test_bindings_are_bounded_by_bytes(clock: Clock) -> None:
    state = MemoryRoutingState(max_bytes=64 * 1024, clock=clock)
    for i in range(5_000):
        await state.bind(f"{i:064x}", "t:" + "x" * 200, ttl=3600)
    assert state._bindings.nbytes <= 64 * 1024
    assert await state.bound(f"{4_999:064x}") == "t:" + "x" * 200  # the newest are kept
    assert await state.bound(f"{0:064x}") is None  # the oldest went first


async def test_cooldowns_are_bounded_by_bytes(state: MemoryRoutingState) -> None:
    for i in range(50_000):
        await state.cool(f"k:{i}", 60)
    assert state._health.nbytes <= state._health.max_bytes
    assert len(state._health) <= state._health.max_entries
    assert await state.cooled(["k:49999"]) == {"k:49999": 60.0}


async def test_closing_forgets_everything(state: MemoryRoutingState) -> None:
    await state.cool("t:a", 10)
    await state.bind("ab12", "t:a", 10)
    await state.aclose()
    assert await state.cooled(["t:a"]) == {}
    assert await state.bound("ab12") is None


# ------------------------------------------------------- one engine: the store value


@pytest.mark.parametrize("spec", [None, "memory", "off", "sqlite:///routing.db"])
async def test_memory_and_sqlite_stores_keep_routing_state_in_the_process(
    spec: str | None,
) -> None:
    state = open_routing_state(spec)
    assert isinstance(state, MemoryRoutingState)
    await state.aclose()


async def test_a_store_object_other_than_redis_keeps_routing_state_in_the_process() -> None:
    state = open_routing_state(MemoryStore())
    assert isinstance(state, MemoryRoutingState)


async def test_a_redis_url_opens_redis_without_connecting_yet() -> None:
    state = open_routing_state("redis://:secret@127.0.0.1:9/0")
    assert isinstance(state, RedisRoutingState)
    assert "secret" not in state.outage.url
    await state.aclose()


async def test_an_opened_redis_store_shares_its_client() -> None:
    store = open_store("redis://127.0.0.1:9/0")
    assert isinstance(store, RedisStore)
    state = open_routing_state(store)
    assert isinstance(state, RedisRoutingState) and state.redis is store.redis
    await state.aclose()
    await store.aclose()


async def test_an_unknown_store_value_is_refused() -> None:
    with pytest.raises(ValueError, match="store must be"):
        open_routing_state("postgres://db")
