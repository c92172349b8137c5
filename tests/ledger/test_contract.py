"""One contract, three ledgers: memory, a SQLite file, a real PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from proxai_asgi.usage.ledger.batch import BatchLedger
from proxai_asgi.usage.ledger.summary import summarize

from .conftest import ENGINES, SQL_ENGINES, ledger_url, make, quick

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ENGINES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return ledger_url(request.param, request, tmp_path)


@pytest.fixture(params=SQL_ENGINES)
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return ledger_url(request.param, request, tmp_path)


async def test_every_field_round_trips(url: str) -> None:
    ledger = quick(url)
    full = make(1)
    sparse = make(
        2,
        route=None,
        upstream=None,
        key_id=None,
        upstream_protocol=None,
        requested_model=None,
        served_model=None,
        status=502,
        stream=False,
        attempts=0,
        fallback_index=None,
        ttft_ms=None,
        cost_usd=None,
        price_version=None,
    )
    ledger.submit(full)
    ledger.submit(sparse)
    await ledger.flush()
    assert await ledger.records() == [full, sparse]
    await ledger.aclose()


async def test_a_request_id_is_written_once(url: str) -> None:
    ledger = quick(url)
    first = make(1)
    ledger.submit(first)
    ledger.submit(make(1, status=500))  # the same id in the same batch
    await ledger.flush()
    ledger.submit(make(1, owner="someone else"))  # and in a later one
    await ledger.flush()
    assert await ledger.records() == [first]
    await ledger.aclose()


async def test_records_are_written_in_batches(sql_url: str) -> None:
    ledger = quick(sql_url, max_batch=7)
    assert isinstance(ledger, BatchLedger)
    sizes: list[int] = []
    write = ledger.backend.write
    ledger.backend.write = lambda rows: (sizes.append(len(rows)), write(rows))[1]  # type: ignore[method-assign]
    records = [make(n) for n in range(50)]
    for record in records:
        ledger.submit(record)
    await ledger.flush()
    assert sorted(await ledger.records(), key=lambda r: r.request_id) == records
    assert sum(sizes) == 50 and max(sizes) == 7 and len(sizes) < 50
    await ledger.aclose()


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_many_tasks_submit_at_once(url: str) -> None:
    ledger = quick(url)
    expected = {f"req_{t}_{i}" for t in range(8) for i in range(100)}

    async def client(t: int) -> None:
        for i in range(100):
            ledger.submit(make(i, request_id=f"req_{t}_{i}"))
            await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        for t in range(8):
            tg.start_soon(client, t)
    await ledger.flush()
    ids = [r.request_id for r in await ledger.records()]
    assert len(ids) == 800 and set(ids) == expected
    await ledger.aclose()


async def test_since_and_owner_select_records(url: str) -> None:
    ledger = quick(url)
    a1 = make(1, time="2026-11-01T23:59:59.999+00:00", owner="a")
    b1 = make(2, time="2026-11-02T00:00:00.000+00:00", owner="b")
    a2 = make(3, time="2026-11-02T10:00:00.000+00:00", owner="a")
    for record in (a2, b1, a1):
        ledger.submit(record)
    await ledger.flush()
    assert await ledger.records() == [a1, b1, a2]  # oldest first
    assert await ledger.records(since="2026-11-02") == [b1, a2]
    assert await ledger.records(since="2026-11-02T11:00:00+01:00") == [a2]  # 10:00 UTC
    assert await ledger.records(owner="a") == [a1, a2]
    assert await ledger.records(since="2026-11-02", owner="a") == [a2]
    with pytest.raises(ValueError, match="ISO 8601"):
        await ledger.records(since="yesterday")
    await ledger.aclose()


async def test_summary_of_a_ledger_sums_by_owner_model_and_day(url: str) -> None:
    ledger = quick(url)
    for n, (owner, day, cost) in enumerate(
        [("a", 1, 0.5), ("a", 1, 0.25), ("a", 2, None), ("b", 1, 1.0), ("b", 1, None)]
    ):
        time = f"2026-11-0{day}T12:00:00.000+00:00"
        ledger.submit(make(n, owner=owner, time=time, cost_usd=cost))
    await ledger.flush()
    groups = summarize(await ledger.records())
    got = [
        (g.key["owner"], g.key["day"], g.requests, g.input_tokens, g.cost_usd, g.unpriced)
        for g in groups
    ]
    assert got == [
        ("a", "2026-11-01", 2, 11 + 0 + 11 + 1, 0.75, 0),
        ("a", "2026-11-02", 1, 11 + 2, None, 1),  # every record unpriced: no cost
        ("b", "2026-11-01", 2, 11 + 3 + 11 + 4, 1.0, 1),  # a mix: the priced sum, +1 unpriced
    ]
    await ledger.aclose()


async def test_a_reopened_ledger_reads_what_was_written_and_keeps_its_owner_key(
    sql_url: str,
) -> None:
    ledger = quick(sql_url)
    assert isinstance(ledger, BatchLedger)
    ledger.submit(make(1))
    key = await ledger.owner_secret()
    await ledger.aclose()  # writes what is queued (no flush)
    again = quick(sql_url)
    assert isinstance(again, BatchLedger)
    assert await again.records() == [make(1)]
    assert await again.owner_secret() == key and len(key) == 32
    await again.aclose()


async def test_a_record_no_engine_could_store_is_stored_cleaned_not_stuck(url: str) -> None:
    """Text with NUL or a lone surrogate (a client's model string) and a count past
    64 bits: written cleaned, and the records behind it are not held back."""
    ledger = quick(url)
    odd = make(1, requested_model="a\x00b\ud800c", output_tokens=2**70)
    ledger.submit(odd)
    ledger.submit(make(2))
    await ledger.flush()
    first, second = await ledger.records()
    if url != "memory":
        assert first.requested_model == "a\ufffdb?c" and first.output_tokens == 2**63 - 1
    assert second == make(2)
    await ledger.aclose()
