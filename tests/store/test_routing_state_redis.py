"""The routing state shared through a real redis-server by two instances (two
``RedisRoutingState`` on their own clients, as two middlewares have): what one learns
the other obeys; Redis keeps the time (its own key expiry) and bounds every key; and
Redis down never fails a call, nor makes each call wait for it."""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from proxai_asgi.routing.shared_redis import RedisRoutingState
from proxai_asgi.routing.state import open_routing_state
from proxai_asgi.store import open_store
from proxai_asgi.store.redis import RedisStore
from tests.helpers.redis_server import RedisServer, redis_server

pytestmark = pytest.mark.anyio

DOWN = "routing state: Redis unavailable, using this process's own view"
BACK = "answers again"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture
async def pair(redis: RedisServer) -> AsyncIterator[tuple[RedisRoutingState, RedisRoutingState]]:
    prefix = f"test:{secrets.token_hex(4)}:route:"
    one = RedisRoutingState(redis.url, prefix=prefix)
    other = RedisRoutingState(redis.url, prefix=prefix)
    try:
        yield one, other
    finally:
        await one.aclose()
        await other.aclose()


async def test_a_cooldown_set_by_one_instance_is_obeyed_by_the_other(
    pair: tuple[RedisRoutingState, RedisRoutingState],
) -> None:
    one, other = pair
    assert await other.cooled(["t:a", "k:1"]) == {}
    await one.cool("t:a", 30)
    await other.cool("t:a", 5)  # shorter: the longer one stands
    seen = await other.cooled(["t:a", "k:1"])
    assert list(seen) == ["t:a"] and 29 < seen["t:a"] <= 30


async def test_a_cooldown_ends_by_redis_expiry_and_then_one_instance_probes(
    pair: tuple[RedisRoutingState, RedisRoutingState],
) -> None:
    one, other = pair
    await one.cool("t:a", 0.1)
    assert not await other.claim_probe("t:a", 5)  # still cooled
    await asyncio.sleep(0.15)
    assert await other.cooled(["t:a"]) == {"t:a": 0.0}  # lapsed, not recovered
    won = await asyncio.gather(*(s.claim_probe("t:a", 5) for s in (one, other) * 4))
    assert won.count(True) == 1


async def test_a_failed_probe_cools_again_for_every_instance(
    pair: tuple[RedisRoutingState, RedisRoutingState],
) -> None:
    one, other = pair
    assert await one.cool("t:a", 0.05) == 1
    assert await other.cool("t:a", 0.05) == 1  # the same cooldown: one in a row
    await asyncio.sleep(0.1)
    assert await other.claim_probe("t:a", 5)
    assert await other.cool("t:a", 30) == 2
    assert 29 < (await one.cooled(["t:a"]))["t:a"] <= 30
    assert not await one.claim_probe("t:a", 5)


async def test_a_success_seen_by_one_instance_clears_it_for_all(
    pair: tuple[RedisRoutingState, RedisRoutingState],
) -> None:
    one, other = pair
    await one.cool("t:a", 0.05)
    await asyncio.sleep(0.1)
    assert await other.cooled(["t:a"]) == {"t:a": 0.0}
    assert await other.claim_probe("t:a", 5)
    await other.recovered("t:a")
    assert await one.cooled(["t:a"]) == {}
    assert await one.cool("t:a", 10) == 1  # the failures in a row start again


async def test_a_binding_made_by_one_instance_is_read_by_the_other_and_renewed(
    pair: tuple[RedisRoutingState, RedisRoutingState],
) -> None:
    one, other = pair
    await one.bind("ab12", "t:primary", ttl=0.3)
    assert await other.bound("ab12") == "t:primary"
    for _ in range(3):  # used every 200 ms: outlives its 300 ms
        await asyncio.sleep(0.2)
        assert await other.bound("ab12") == "t:primary"
    await asyncio.sleep(0.35)
    assert await one.bound("ab12") is None
    await other.bind("ab12", "t:fallback", ttl=60)
    assert await one.bound("ab12") == "t:fallback"


async def test_a_success_of_a_name_never_seen_failing_costs_no_round_trip(
    pair: tuple[RedisRoutingState, RedisRoutingState],
) -> None:
    one, _ = pair

    async def dels() -> int:
        stats = await one.redis.info("commandstats")
        return int(stats.get("cmdstat_del", {}).get("calls", 0))

    await one.cool("t:a", 10)
    before = await dels()
    await one.recovered("t:healthy")  # the healthy path
    assert await dels() == before
    await one.recovered("t:a")
    assert await dels() == before + 1


async def test_the_process_view_follows_redis_for_an_outage(
    pair: tuple[RedisRoutingState, RedisRoutingState],
) -> None:
    one, other = pair
    await one.cool("t:a", 30)
    assert "t:a" in await other.cooled(["t:a"])  # learned: kept for an outage
    assert "t:a" in await other.local.cooled(["t:a"])
    await one.recovered("t:a")
    assert await other.cooled(["t:a"]) == {}  # and forgotten with Redis
    assert await other.local.cooled(["t:a"]) == {}


async def test_a_binding_not_written_here_reads_as_none(
    pair: tuple[RedisRoutingState, RedisRoutingState],
) -> None:
    one, _ = pair
    await one.redis.set(one.prefix + "b:ab12", "garbage", px=60_000)
    assert await one.bound("ab12") is None


async def test_every_key_expires(
    pair: tuple[RedisRoutingState, RedisRoutingState],
) -> None:
    one, other = pair
    await one.cool("t:a", 10)
    await one.cool("k:1", 0.01)
    await asyncio.sleep(0.02)
    assert await other.claim_probe("k:1", 5)
    await one.bind("ab12", "t:a", ttl=60)
    keys = [k async for k in one.redis.scan_iter(match=one.prefix + "*")]
    assert len(keys) == 5  # c:t:a f:t:a f:k:1 p:k:1 b:ab12
    assert all([await one.redis.pttl(k) > 0 for k in keys])


async def test_the_routing_state_shares_the_response_stores_client(redis: RedisServer) -> None:
    store = open_store(redis.url, prefix=f"test:{secrets.token_hex(4)}:")
    assert isinstance(store, RedisStore)
    state = open_routing_state(store, prefix=f"test:{secrets.token_hex(4)}:route:")
    assert isinstance(state, RedisRoutingState) and state.redis is store.redis
    await state.cool("t:a", 10)
    await state.aclose()
    assert await store.redis.ping()  # (the client is left open for the store)
    await store.aclose()


# -------------------------------------------------------------------- Redis down


def restart(server: RedisServer) -> None:
    """A new redis-server on the same port (empty: no persistence)."""
    args = ["redis-server", "--port", str(server.port), "--bind", "127.0.0.1"]
    args += ["--save", "", "--appendonly", "no"]
    server.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "redis-server did not restart"
        time.sleep(0.01)


async def timed(call: object) -> float:
    start = time.perf_counter()
    await call  # type: ignore[misc]
    return time.perf_counter() - start


async def test_redis_down_answers_from_the_process_view_warns_once_and_comes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with redis_server() as server:
        prefix = f"test:{secrets.token_hex(4)}:route:"
        one = RedisRoutingState(server.url, prefix=prefix, backoff=0.05)
        other = RedisRoutingState(server.url, prefix=prefix, backoff=0.05)
        try:
            await other.cool("t:learned", 60)
            assert "t:learned" in await one.cooled(["t:learned"])  # learned from Redis
            await one.bind("ab12", "t:primary", ttl=60)
            server.stop()
            with caplog.at_level(logging.WARNING, logger="proxai_asgi"):
                # the first call finds Redis down; every later one does not wait for it
                assert "t:learned" in await one.cooled(["t:learned", "t:b"])
                slowest = 0.0
                for i in range(20):
                    slowest = max(
                        slowest,
                        await timed(one.cooled(["t:learned", "t:b"])),
                        await timed(one.cool("t:b", 60)),
                        await timed(one.bound("ab12")),
                        await timed(one.bind(f"s{i}", "t:a", 60)),
                        await timed(one.claim_probe("t:c", 5)),
                        await timed(one.recovered("t:c")),
                    )
                    await asyncio.sleep(0.01)  # (background pings come and fail)
                assert slowest < 0.05
                assert set(await one.cooled(["t:learned", "t:b"])) == {"t:learned", "t:b"}
                assert await one.bound("ab12") == "t:primary"
                assert await one.bound("s3") == "t:a"
                assert caplog.text.count(DOWN) == 1 and BACK not in caplog.text
                assert "Error" in caplog.text or "Timeout" in caplog.text  # (what failed)

                restart(server)
                deadline = time.monotonic() + 5
                while BACK not in caplog.text:
                    assert time.monotonic() < deadline, "never went back to Redis"
                    await one.cooled(["t:a"])
                    await asyncio.sleep(0.02)
            await other.cool("t:after", 60)  # (the restarted Redis is empty)
            assert "t:after" in await one.cooled(["t:after"])
            assert caplog.text.count(DOWN) == 1
        finally:
            await one.aclose()
            await other.aclose()


async def test_a_redis_that_never_answers_costs_one_timeout_not_one_per_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    silent = socket.socket()  # accepts connections (the backlog), never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
    state = RedisRoutingState(url, timeout=0.1, backoff=60)
    try:
        with caplog.at_level(logging.WARNING, logger="proxai_asgi"):
            assert await timed(state.cool("t:a", 10)) < 1.0
            for _ in range(10):
                assert await timed(state.cooled(["t:a"])) < 0.05
            assert await state.cooled(["t:a"]) == {"t:a": pytest.approx(10, abs=1)}
        assert caplog.text.count(DOWN) == 1
    finally:
        await state.aclose()
        silent.close()
