"""The batch writer on a database that fails on cue: what "acknowledged" promises
(``proxai_asgi/usage/ledger/batch.py``), retries, the byte bound, the last attempt."""

from __future__ import annotations

import logging
import threading
import time

import anyio
import pytest

from proxai_asgi.store.base import StoreUnavailable
from proxai_asgi.usage.ledger.batch import BatchLedger, Row
from proxai_asgi.usage.record import UsageRecord

from .conftest import make

pytestmark = pytest.mark.anyio


class FlakyBackend:
    """A table in a dict that fails while ``down`` is set (and may fail after
    committing, as a connection lost before the commit's answer does)."""

    name = "flaky://"

    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}
        self.inserts = 0
        self.down = threading.Event()
        self.commit_then_fail = False
        self.batches: list[int] = []

    def write(self, rows: list[Row]) -> None:
        if self.down.is_set():
            raise OSError("connection refused")
        self.batches.append(len(rows))
        for row in rows:
            self.inserts += 1
            self.rows.setdefault(row[0], row)
        if self.commit_then_fail:
            self.commit_then_fail = False
            raise OSError("connection lost after commit")

    def read(self, since: str | None, owner: str | None) -> list[UsageRecord]:
        raise NotImplementedError

    def owner_secret(self, fresh: str) -> str:
        raise OSError("down")

    def close(self) -> None:
        pass


def ledger_on(backend: FlakyBackend, **options: float) -> BatchLedger:
    return BatchLedger(
        backend,
        **{"interval": 0.005, "retry_initial": 0.005, "retry_max": 0.02, **options},  # type: ignore[arg-type]
    )


async def test_an_acknowledged_record_is_written_once_the_database_is_back() -> None:
    backend = FlakyBackend()
    ledger = ledger_on(backend)
    backend.down.set()
    for n in range(20):
        ledger.submit(make(n))
    await ledger.flush()  # returns after a failed attempt: the records stay queued
    assert ledger.failures >= 1 and ledger.accepted == 20 and ledger.written == 0
    backend.down.clear()
    await ledger.flush()
    assert sorted(backend.rows) == [f"req_{n:06d}" for n in range(20)]
    assert ledger.written == 20 and ledger.unwritten == 0 and ledger.dropped == 0
    await ledger.aclose()


async def test_a_batch_committed_but_unanswered_is_written_again_without_a_duplicate() -> None:
    backend = FlakyBackend()
    backend.commit_then_fail = True
    ledger = ledger_on(backend)
    for n in range(5):
        ledger.submit(make(n))
    await ledger.flush()
    await ledger.flush()
    assert backend.inserts == 10 and len(backend.rows) == 5 and ledger.written == 5
    await ledger.aclose()


async def test_submit_never_waits_for_a_database_that_hangs() -> None:
    backend = FlakyBackend()
    release = threading.Event()
    backend.write = lambda rows: release.wait(5)  # type: ignore[method-assign,assignment,return-value]
    ledger = ledger_on(backend)
    ledger.submit(make(0))
    await anyio.sleep(0.02)  # the writer is stuck in its write
    start = time.perf_counter()
    for n in range(1, 1001):
        ledger.submit(make(n))
    assert time.perf_counter() - start < 0.5
    release.set()
    await ledger.aclose()


async def test_past_the_byte_bound_records_are_dropped_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = FlakyBackend()
    size = len(__import__("msgspec").json.encode(make(0)))
    ledger = ledger_on(backend, max_pending_bytes=size * 10 + size // 2)
    backend.down.set()
    with caplog.at_level(logging.WARNING, logger="proxai_asgi"):
        for n in range(25):
            ledger.submit(make(n))
        assert (ledger.accepted, ledger.dropped) == (10, 15)
        backend.down.clear()
        await ledger.flush()
    assert sorted(backend.rows) == [f"req_{n:06d}" for n in range(10)]  # the acknowledged
    text = caplog.text
    assert "records are dropped" in text and "15 records were dropped" in text
    await ledger.aclose()


async def test_aclose_writes_what_is_queued() -> None:
    backend = FlakyBackend()
    ledger = ledger_on(backend, interval=10.0)  # no write would start on its own soon
    for n in range(3):
        ledger.submit(make(n))
    await ledger.aclose()
    assert len(backend.rows) == 3
    ledger.submit(make(9))  # after close: refused, counted
    assert ledger.dropped == 1 and ledger.accepted == 3


async def test_aclose_on_a_database_still_down_says_how_many_records_it_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = FlakyBackend()
    backend.down.set()
    ledger = ledger_on(backend, close_timeout=0.1)
    for n in range(7):
        ledger.submit(make(n))
    start = time.perf_counter()
    with caplog.at_level(logging.ERROR, logger="proxai_asgi"):
        await ledger.aclose()
    assert time.perf_counter() - start < 1.5
    assert "7 acknowledged records could not be written" in caplog.text
    assert ledger.unwritten == 7


async def test_a_write_that_keeps_failing_backs_off() -> None:
    backend = FlakyBackend()
    backend.down.set()
    ledger = ledger_on(backend, retry_initial=0.01, retry_max=0.04)
    ledger.submit(make(0))
    await anyio.sleep(0.3)
    # 0.01 + 0.02 + 0.04 + 0.04 ...: a handful of tries, not a busy loop
    assert 3 <= ledger.failures <= 12
    backend.down.clear()
    await ledger.aclose()
    assert len(backend.rows) == 1


async def test_an_unanswered_owner_key_read_holds_a_request_a_bounded_time() -> None:
    backend = FlakyBackend()
    release = threading.Event()
    backend.owner_secret = lambda fresh: (release.wait(5), fresh)[1]  # type: ignore[method-assign]
    ledger = ledger_on(backend, retry_max=60)
    assert ledger.secret_timeout == 1.0
    ledger.secret_timeout = 0.1
    start = time.perf_counter()
    with pytest.raises(StoreUnavailable):
        await ledger.owner_secret()
    assert time.perf_counter() - start < 0.6
    start = time.perf_counter()
    with pytest.raises(StoreUnavailable):  # not asked again before retry_max
        await ledger.owner_secret()
    assert time.perf_counter() - start < 0.1
    release.set()
    await ledger.aclose()
