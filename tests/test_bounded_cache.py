"""``bounded_cache.BoundedCache``, the one type of every table kept between requests:
bounded by bytes and count, keyed by exact content, least recently used out first,
thread-safe; and every table of the process is one and stays within its bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi import ids, sse
from proxai_asgi.bounded_cache import ENTRY_OVERHEAD, BoundedCache, clear_all
from proxai_asgi.protocols._kit import json_objects, tool_schemas
from proxai_asgi.transport.http1 import Http1Pool
from tests.helpers.races import race


def _recount(cache: BoundedCache[Any, Any]) -> int:
    """The bytes its entries hold, counted again from what it holds."""
    return sum(cache.size_of(k, v) for k, v in cache.items())


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 3000), max_size=60),
    max_bytes=st.integers(500, 20_000),
    max_entries=st.integers(2, 20),
)
def test_bytes_and_count_stay_within_bounds(
    sizes: list[int], max_bytes: int, max_entries: int
) -> None:
    cache: BoundedCache[bytes, bytes] = BoundedCache(max_bytes=max_bytes, max_entries=max_entries)
    for i, size in enumerate(sizes):
        key = b"%d:" % i + b"k" * size
        kept = cache.put(key, key.upper())
        assert kept == (cache.size_of(key, key.upper()) <= max_bytes // 2)
        assert cache.nbytes == _recount(cache) <= max_bytes
        assert len(cache) <= max_entries
        if kept:
            assert cache.get(key) == key.upper()  # (the newest is always there)
    cache.clear()
    assert len(cache) == cache.nbytes == 0


class _Colliding:
    """A key whose hash is the same for every content: only ``==`` tells them apart."""

    def __init__(self, content: bytes) -> None:
        self.content = content

    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Colliding) and self.content == other.content


def test_contents_that_share_a_hash_never_share_an_entry() -> None:
    cache: BoundedCache[Any, bytes] = BoundedCache(
        max_bytes=1 << 20, max_entries=100, size=lambda k, v: len(k.content) + len(v)
    )
    for n in range(20):
        cache.put(_Colliding(b"tools of tenant %d" % n), b"made for %d" % n)
    for n in range(20):
        assert cache.get(_Colliding(b"tools of tenant %d" % n)) == b"made for %d" % n
    assert cache.get(_Colliding(b"tools of tenant 99")) is None


def test_the_least_recently_used_go_first() -> None:
    """Entries used since the young generation filled stay; the others go."""
    cache: BoundedCache[str, str] = BoundedCache(max_bytes=1 << 20, max_entries=8)
    for n in range(4):  # the young generation, full
        cache.put(f"k{n}", f"v{n}")
    assert cache.get("k0") == "v0"  # (still young: found, nothing moves)
    for n in range(4, 8):  # k0..k3 turn old; k4..k7 young
        cache.put(f"k{n}", f"v{n}")
    assert cache.get("k1") == "v1"  # used: back into the young generation
    for n in range(8, 11):
        cache.put(f"k{n}", f"v{n}")
    # the old generation (k0, k2, k3: unused since it was young) has gone
    assert [k for k, _ in cache.items()] == ["k4", "k5", "k6", "k7", "k1", "k8", "k9", "k10"]
    for n in (0, 2, 3):
        assert f"k{n}" not in cache
    assert cache.recent("k10") == "v10" and cache.recent("k4") is None  # (young only)
    assert cache.get("k4") == "v4"


def test_an_entry_over_its_bound_is_not_kept() -> None:
    cache: BoundedCache[bytes, None] = BoundedCache(
        max_bytes=10_000, max_entries=10, max_item_bytes=200
    )
    assert not cache.put(b"x" * 300, None)
    assert not cache.seen_before(b"x" * 300) and not cache.seen_before(b"x" * 300)
    assert len(cache) == 0
    assert not cache.seen_before(b"short") and cache.seen_before(b"short")
    assert not cache.seen_before(b"short")  # (the note was taken back)


def test_threads_only_ever_find_the_value_made_of_their_key() -> None:
    """Threads switching every few bytecodes put, look up, note and take entries whose
    value is a function of the key: each finds that value or nothing, and the byte count
    stays the sum of what is held."""
    cache: BoundedCache[str, str] = BoundedCache(max_bytes=40_000, max_entries=64)
    failures: list[str] = []

    def work(seed: int) -> None:
        for i in range(3000):
            key = f"{(seed * 7 + i) % 97}:" + "p" * ((i * 13) % 400)
            op = i % 5
            if op == 0:
                cache.put(key, key[::-1])
            elif op == 1:
                cache.seen_before("note " + key)
            elif op == 2:
                cache.pop(key)
            found = cache.get(key) if op != 3 else cache.recent(key)
            if found is not None and found != key[::-1]:
                failures.append(f"{key[:8]} -> {found[:8]}")

    race(work, 4)
    assert not failures, failures[:5]
    assert cache.nbytes == _recount(cache) <= 40_000


# ----------------------------------------------------- every table of the process


def _tools(n: int, pad: int) -> list[c.Tool]:
    return [
        c.Tool(
            name=f"first{n}",
            description="d" * pad,
            parameters=msgspec.Raw(b'{"type":"object","n":%d}' % n),
        ),
        c.Tool(name=f"last{n}", parameters=msgspec.Raw(b"{}")),
    ]


def _fill_set_lookup(lookup: tool_schemas.SetLookup[Any], n: int, pad: int) -> None:
    tools = _tools(n, pad)
    for _ in range(3):
        if lookup.get(tools) is None and lookup.second_sight(tools):
            lookup.put(tools, msgspec.Raw(b"x" * pad), pad)


_schemas = tool_schemas.SchemaLookup()
_tool_lookup = tool_schemas.ToolLookup(on_second_sighting=True)
_set_lookup: tool_schemas.SetLookup[Any] = tool_schemas.SetLookup()
_pool = Http1Pool()

# (name, the caches it fills, one fill with distinct content n of about ``pad`` bytes)
TABLES: list[tuple[str, Callable[[], list[BoundedCache[Any, Any]]], Callable[[int, int], Any]]] = [
    (
        "schema facts",
        lambda: [tool_schemas._FACTS._cache],
        lambda n, pad: tool_schemas.facts(msgspec.Raw(b'{"n":%d,"p":"%s"}' % (n, b"p" * pad))),
    ),
    (
        "schemas",
        lambda: [_schemas._cache],
        lambda n, pad: _schemas.get(msgspec.Raw(b'{"n":%d,"p":"%s"}' % (n, b"p" * pad))),
    ),
    (
        "tool declarations",
        lambda: [_tool_lookup._cache, _tool_lookup._seen],  # type: ignore[list-item]
        lambda n, pad: [
            _tool_lookup.put(b"[%d,%s]" % (n, b"1" * pad), _tools(n, pad)) for _ in range(2)
        ],
    ),
    (
        "tool sets and their notes",
        lambda: [_set_lookup._entries, _set_lookup._names, _set_lookup._noted],
        lambda n, pad: _fill_set_lookup(_set_lookup, n, pad),
    ),
    (
        "call ids",
        lambda: [ids.SAFE_IDS],
        lambda n, pad: ids.safe_tool_id(f"call:{n}:" + "i" * (pad % 1000), "x"),
    ),
    (
        "call arguments",
        lambda: [json_objects.RAW_OBJECTS, json_objects.ARGUMENTS, json_objects._SEEN],
        lambda n, pad: (
            json_objects.remember(f'{{"n":{n},"p":"{"a" * (pad % 400)}"}}', {"n": n}),
            json_objects.arguments(b'{"n":%d,"p":"%s"}' % (n, b"a" * (pad % 400))),
            json_objects.kept(f"{n}:" + "s" * (pad % 400), {}, 512),
        ),
    ),
    (
        "event names",
        lambda: [sse._NAMES],
        lambda n, pad: sse.SSEDecoder().decode(  # (frames of a saturated stream)
            b"event: e%d%s\ndata: {}\n\n" % (n, b"e" * (pad % 900)) * 2
        ),
    ),
    (
        "upstream URLs",
        lambda: [_pool._targets],
        lambda n, pad: _pool._target(f"http://h/v1beta/models/m{n}{'u' * pad}:generateContent"),
    ),
]


@pytest.mark.parametrize(("name", "caches", "fill"), TABLES, ids=[t[0] for t in TABLES])
def test_every_table_stays_within_its_bytes(
    name: str,
    caches: Callable[[], list[BoundedCache[Any, Any]]],
    fill: Callable[[int, int], Any],
) -> None:
    """Filled with large distinct contents, far more than fit, each table holds no
    more than its bound (by its count and by counting again what it holds)."""
    clear_all()
    peaks = [0] * len(caches())
    for n in range(400):
        fill(n, 500 + (n * 977) % 9000)
        for k, cache in enumerate(caches()):
            assert cache.nbytes == _recount(cache) <= cache.max_bytes, (name, k)
            assert len(cache) <= cache.max_entries
            peaks[k] = max(peaks[k], cache.nbytes)
    assert max(peaks) > 0  # (filled, not all refused)
    assert ENTRY_OVERHEAD > 0
