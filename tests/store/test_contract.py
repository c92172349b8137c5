"""One contract, three stores: memory, a SQLite file, and a real redis-server."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from proxai_asgi.store import MemoryStore, ResponseStore, StoredResponse, open_store
from proxai_asgi.store.redis import RedisStore
from proxai_asgi.store.sqlite import SQLiteStore
from tests.helpers.redis_server import RedisServer, redis_server

pytestmark = pytest.mark.anyio

TTL = 3600.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Subject:
    store: ResponseStore
    clock: Clock | None  # None: the backend keeps time itself (Redis)


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


def build(request: pytest.FixtureRequest, tmp_path: Path, **options: Any) -> Subject:
    """The engine ``request.param`` names, with ``options``."""
    clock = Clock()
    store: ResponseStore
    if request.param == "memory":
        store = MemoryStore(ttl=TTL, clock=clock, **options)
    elif request.param == "sqlite":
        store = SQLiteStore(str(tmp_path / "responses.db"), ttl=TTL, clock=clock, **options)
    else:
        server: RedisServer = request.getfixturevalue("redis")
        prefix = f"test:{secrets.token_hex(4)}:"
        return Subject(RedisStore(server.url, prefix=prefix, ttl=TTL, **options), None)
    return Subject(store, clock)


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def subject(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Subject]:
    made = build(request, tmp_path)
    try:
        yield made
    finally:
        await made.store.aclose()


def record(rid: str, owner: str = "alice", previous: str | None = None) -> StoredResponse:
    response = msgspec.json.encode(
        {"id": rid, "object": "response", "status": "completed", "output": [{"id": "m" + rid}]}
    )
    item = msgspec.json.encode({"id": "in_" + rid, "type": "message", "content": "é ünicode"})
    return StoredResponse(
        id=rid,
        owner=owner,
        created_at=1.5,
        previous_id=previous,
        input=[msgspec.Raw(item)],
        response=msgspec.Raw(response),
    )


def same(a: StoredResponse | None, b: StoredResponse) -> bool:
    assert a is not None
    return msgspec.json.encode(a) == msgspec.json.encode(b)


async def test_put_then_get_gives_the_record_back_byte_for_byte(subject: Subject) -> None:
    r = record("resp_1")
    await subject.store.put(r)
    got = await subject.store.get("resp_1", "alice")
    assert same(got, r)
    assert got is not None and bytes(got.response) == bytes(r.response)


async def test_unknown_ids_and_other_owners_read_as_absent(subject: Subject) -> None:
    await subject.store.put(record("resp_1"))
    assert await subject.store.get("resp_nope", "alice") is None
    assert await subject.store.get("resp_1", "mallory") is None
    assert await subject.store.chain("resp_1", "mallory") == []
    assert await subject.store.chain("resp_nope", "alice") == []


async def test_stored_ids_are_never_replaced_whoever_puts_them(subject: Subject) -> None:
    # (This test said the opposite before issue 26: a put replaced a held id, so an
    # upstream repeating its ids overwrote another tenant's conversation.)
    assert await subject.store.put(record("resp_1", previous=None)) is True
    assert await subject.store.put(record("resp_1", previous="resp_0")) is False
    assert await subject.store.put(record("resp_1", owner="mallory", previous="resp_1")) is False
    got = await subject.store.get("resp_1", "alice")
    assert got is not None and got.previous_id is None
    assert await subject.store.get("resp_1", "mallory") is None
    assert not await subject.store.delete("resp_1", "mallory")
    assert await subject.store.get("resp_1", "alice") is not None


async def test_stored_chains_cannot_loop_on_self_pointing_or_cyclic_records(
    subject: Subject,
) -> None:
    """Whatever the ids say (ids are minted, so only a store written by something else
    could hold these), a walk visits each record at most once: it ends at once."""
    await subject.store.put(record("resp_self", previous="resp_self"))
    chain = await subject.store.chain("resp_self", "alice")
    assert [r.id for r in chain] == ["resp_self"]  # its previous_id: the break shows
    await subject.store.put(record("resp_p", previous="resp_q"))
    await subject.store.put(record("resp_q", previous="resp_p"))
    assert [r.id for r in await subject.store.chain("resp_q", "alice")] == ["resp_p", "resp_q"]
    # memory and SQLite step only to older records, Redis to records not yet seen
    assert [r.id for r in await subject.store.chain("resp_p", "alice")] in (
        ["resp_p"],
        ["resp_q", "resp_p"],
    )


@pytest.mark.parametrize("engine", ["memory", "sqlite", "redis"])
async def test_store_bounds_per_owner_one_tenant_cannot_evict_another(
    request: pytest.FixtureRequest, tmp_path: Path, engine: str
) -> None:
    request.param = engine  # type: ignore[attr-defined]
    made = build(request, tmp_path, max_owner_entries=3)
    store = made.store
    try:
        await store.put(record("resp_bob", owner="bob"))
        for i in range(12):
            if made.clock is not None:
                made.clock.now += 1
            await store.put(record(f"resp_a{i}", owner="alice"))
        assert await store.get("resp_bob", "bob") is not None
        kept = [i for i in range(12) if await store.get(f"resp_a{i}", "alice") is not None]
        assert kept == [9, 10, 11]  # alice's own least recently used went
    finally:
        await store.aclose()


async def test_memory_store_bounds_each_owner_by_bytes_too() -> None:
    size = record("resp_0").size()
    store = MemoryStore(max_owner_bytes=size * 2 + size // 2)
    await store.put(record("resp_bob", owner="bob"))
    for i in range(6):
        await store.put(record(f"resp_{i}"))
    assert await store.get("resp_bob", "bob") is not None
    assert [i for i in range(6) if await store.get(f"resp_{i}", "alice")] == [4, 5]


async def test_chain_walks_to_the_first_turn_oldest_first(subject: Subject) -> None:
    await subject.store.put(record("resp_a"))
    await subject.store.put(record("resp_b", previous="resp_a"))
    await subject.store.put(record("resp_c", previous="resp_b"))
    await subject.store.put(record("resp_x", previous="resp_a"))  # a branch
    chain = await subject.store.chain("resp_c", "alice")
    assert [r.id for r in chain] == ["resp_a", "resp_b", "resp_c"]
    assert [r.id for r in await subject.store.chain("resp_x", "alice")] == ["resp_a", "resp_x"]
    assert [r.id for r in await subject.store.chain("resp_a", "alice")] == ["resp_a"]


async def test_chain_stops_where_an_ancestor_is_gone(subject: Subject) -> None:
    await subject.store.put(record("resp_a"))
    await subject.store.put(record("resp_b", previous="resp_a"))
    await subject.store.put(record("resp_c", previous="resp_b"))
    assert await subject.store.delete("resp_b", "alice")
    chain = await subject.store.chain("resp_c", "alice")
    assert [r.id for r in chain] == ["resp_c"]
    assert chain[0].previous_id == "resp_b"  # the caller sees the break


async def test_chain_never_crosses_into_another_owner(subject: Subject) -> None:
    await subject.store.put(record("resp_a", owner="mallory"))
    await subject.store.put(record("resp_b", previous="resp_a"))
    assert [r.id for r in await subject.store.chain("resp_b", "alice")] == ["resp_b"]


async def test_delete_removes_only_the_owners_own_record(subject: Subject) -> None:
    await subject.store.put(record("resp_1"))
    assert not await subject.store.delete("resp_1", "mallory")
    assert await subject.store.get("resp_1", "alice") is not None
    assert await subject.store.delete("resp_1", "alice")
    assert await subject.store.get("resp_1", "alice") is None
    assert not await subject.store.delete("resp_1", "alice")
    assert not await subject.store.delete("resp_never", "alice")


async def test_records_expire_after_the_ttl_and_reads_renew_it(subject: Subject) -> None:
    await subject.store.put(record("resp_old"))
    await subject.store.put(record("resp_used"))
    if subject.clock is None:
        # Redis keeps the time: the keys carry the TTL, and a read sets it back to full.
        assert isinstance(subject.store, RedisStore)
        redis = subject.store.redis
        key = subject.store.prefix + "resp_used"
        assert 0 < await redis.pttl(key) <= TTL * 1000
        await redis.pexpire(key, 5000)
        assert await subject.store.get("resp_used", "alice") is not None
        assert await redis.pttl(key) > 5000
        await redis.delete(subject.store.prefix + "resp_old")  # what expiry does
    else:
        subject.clock.now += TTL * 0.75
        assert await subject.store.get("resp_used", "alice") is not None
        subject.clock.now += TTL * 0.5
        assert await subject.store.get("resp_used", "alice") is not None
    assert await subject.store.get("resp_old", "alice") is None
    assert await subject.store.chain("resp_old", "alice") == []
    assert not await subject.store.delete("resp_old", "alice")


# ------------------------------------------------------------------ backend specifics


async def test_memory_store_evicts_the_least_recently_used_past_its_entry_bound() -> None:
    store = MemoryStore(max_entries=2)
    await store.put(record("resp_1"))
    await store.put(record("resp_2"))
    assert await store.get("resp_1", "alice") is not None  # resp_2 is now the oldest use
    await store.put(record("resp_3"))
    assert len(store) == 2
    assert await store.get("resp_2", "alice") is None
    assert await store.get("resp_1", "alice") is not None


async def test_memory_store_stays_within_its_byte_bound() -> None:
    size = record("resp_0").size()
    store = MemoryStore(max_bytes=size * 3 + size // 2)
    for i in range(10):
        await store.put(record(f"resp_{i}"))
        assert store.bytes <= store.max_bytes
    assert len(store) == 3
    assert [await store.get(f"resp_{i}", "alice") is not None for i in (6, 7, 8, 9)] == [
        False,
        True,
        True,
        True,
    ]


async def test_sqlite_store_keeps_its_records_over_a_restart(tmp_path: Path) -> None:
    path = str(tmp_path / "keep.db")
    first = open_store(f"sqlite:///{path}")
    assert isinstance(first, SQLiteStore)
    await first.put(record("resp_a"))
    await first.put(record("resp_b", previous="resp_a"))
    await first.aclose()
    second = SQLiteStore(path)
    try:
        assert [r.id for r in await second.chain("resp_b", "alice")] == ["resp_a", "resp_b"]
    finally:
        await second.aclose()


async def test_sqlite_store_drops_the_least_recently_used_past_its_entry_bound(
    tmp_path: Path,
) -> None:
    clock = Clock()
    store = SQLiteStore(str(tmp_path / "bound.db"), max_entries=5, clock=clock)
    try:
        for i in range(70):  # past the periodic pruning
            clock.now += 1
            await store.put(record(f"resp_{i}"))
        kept = [i for i in range(70) if await store.get(f"resp_{i}", "alice") is not None]
        # pruned on the 65th put down to the 5 most recent, then 5 more put
        assert kept == list(range(60, 70))
    finally:
        await store.aclose()


def test_open_store_reads_the_configuration_values(tmp_path: Path) -> None:
    assert isinstance(open_store(None), MemoryStore)
    assert isinstance(open_store("memory"), MemoryStore)
    assert open_store("off") is None
    assert isinstance(open_store("redis://127.0.0.1:1/0"), RedisStore)
    mine = MemoryStore()
    assert open_store(mine) is mine
    with pytest.raises(ValueError, match="store must be"):
        open_store("postgres://x")


async def test_sqlite_store_bounds_each_owner_of_a_file_written_before_the_bound(
    tmp_path: Path,
) -> None:
    """A file from before the per-owner counts: its records are counted once opened."""
    path = str(tmp_path / "old.db")
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE proxai_responses (id TEXT PRIMARY KEY, owner TEXT NOT NULL,"
        " previous_id TEXT, expires_at REAL NOT NULL, data BLOB NOT NULL)"
    )
    for i in range(5):
        r = record(f"resp_{i}")
        db.execute(
            "INSERT INTO proxai_responses VALUES (?, ?, NULL, ?, ?)",
            (r.id, r.owner, Clock().now + 10 + i, msgspec.json.encode(r)),
        )
    db.commit()
    db.close()
    store = SQLiteStore(path, ttl=TTL, clock=Clock(), max_owner_entries=3)
    try:
        await store.put(record("resp_new"))
        kept = [i for i in range(5) if await store.get(f"resp_{i}", "alice") is not None]
        assert kept == [3, 4] and await store.get("resp_new", "alice") is not None
    finally:
        await store.aclose()
