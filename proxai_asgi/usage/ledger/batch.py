"""The batch writer the SQL ledgers share: records queued by ``submit`` and written,
many to a transaction, by one thread of the ledger's own, off the request path.

A thread (not a task) because the middleware runs on any event loop (asyncio, uvloop,
trio) and a ledger outlives none of them: ``submit`` is a plain call that takes a
lock held only to append to a queue (never during I/O), so it neither blocks nor
raises, whatever the database does.

**Acknowledged** means: ``submit`` returned and counted the record in ``accepted``
(not in ``dropped``). An acknowledged record is in the table exactly once (the
insert is idempotent per ``request_id``, so a batch whose commit was in doubt is
simply written again) as soon as the database takes writes again, however long it
was down, while the process runs: a failed write keeps its batch, at the head of the
queue, and retries it with backoff (``retry_initial`` doubling to ``retry_max``
seconds). Only two things lose an acknowledged record: the process dying before it
was written, or the database still down when ``aclose``'s last attempt
(``close_timeout`` seconds of retries) ends; ``aclose`` then logs how many (an
error: ``unwritten``).

The queue is bounded by bytes (``max_pending_bytes``, the records' JSON size): a
record that does not fit while the database is down is not acknowledged: it is
dropped, counted in ``dropped``, and logged (once when dropping starts, once with
the count when a write succeeds again); the request that made it never waits.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from datetime import date, datetime
from itertools import islice
from typing import Any, Protocol

import anyio
import msgspec

from ...store.base import StoreUnavailable
from ..record import UsageRecord
from . import schema

logger = logging.getLogger("proxai_asgi")

Row = tuple[Any, ...]

DEFAULT_MAX_BATCH = 500  # records to a transaction
DEFAULT_INTERVAL = 0.1  # seconds a first record waits for others to share its write
DEFAULT_MAX_PENDING_BYTES = 16 * 1024 * 1024
DEFAULT_RETRY_INITIAL = 0.2
DEFAULT_RETRY_MAX = 10.0
DEFAULT_CLOSE_TIMEOUT = 5.0
SECRET_TIMEOUT = 1.0  # seconds the first request may wait for the owner-hash key

_size = msgspec.json.Encoder()


class LedgerUnavailable(Exception):
    """The ledger's database cannot be read; the message says why (no secrets)."""


class Backend(Protocol):
    """One SQL engine, called from threads (each method blocks)."""

    name: str  # for logs: the URL without its password

    def write(self, rows: list[Row]) -> None:
        """Insert the rows in one transaction (idempotent); raise on any failure."""

    def read(self, since: str | None, owner: str | None) -> list[UsageRecord]: ...

    def owner_secret(self, fresh: str) -> str:
        """The kept key, ``fresh`` stored first when there is none."""

    def close(self) -> None: ...


class BatchWriter:
    """The queue and its writer thread (see the module docstring)."""

    def __init__(
        self,
        backend: Backend,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        interval: float = DEFAULT_INTERVAL,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        retry_initial: float = DEFAULT_RETRY_INITIAL,
        retry_max: float = DEFAULT_RETRY_MAX,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
    ) -> None:
        if max_batch < 1 or max_pending_bytes < 1 or min(interval, retry_initial) < 0:
            raise ValueError("the ledger's batch and bounds must be positive")
        self.backend = backend
        self.max_batch = max_batch
        self.interval = interval
        self.max_pending_bytes = max_pending_bytes
        self.retry_initial = retry_initial
        self.retry_max = max(retry_max, retry_initial)
        self.close_timeout = close_timeout
        self.accepted = 0  # records acknowledged
        self.written = 0  # of those, written
        self.dropped = 0  # records refused: the queue was full, or the ledger closed
        self.failures = 0  # writes that failed (each retried)
        self._cond = threading.Condition()
        self._queue: deque[tuple[UsageRecord, int]] = deque()
        self._queued_bytes = 0
        self._flush_to = 0  # ``accepted`` a flush waits for: no batching wait until then
        self._flushes = 0  # flush calls: one cuts a backoff short
        self._closing: float | None = None  # aclose's deadline (monotonic)
        self._thread: threading.Thread | None = None
        self._down = False
        self._dropping = 0  # dropped since the last successful write
        self._secret_retry = 0.0

    @property
    def pending(self) -> int:
        return len(self._queue)

    # ------------------------------------------------------------- request path

    def submit(self, record: UsageRecord) -> None:
        try:
            size = len(_size.encode(record))
        except Exception:  # text JSON cannot hold (a lone surrogate): stored cleaned
            size = 4096
        with self._cond:
            if self._closing is not None or self._queued_bytes + size > self.max_pending_bytes:
                self._drop_one()
                return
            self._queue.append((record, size))
            self._queued_bytes += size
            self.accepted += 1
            if self._thread is None:
                # Started by the first record, in the process that serves (never in a
                # ``--workers`` parent that only built the app).
                self._thread = threading.Thread(target=self._run, name="proxai-ledger", daemon=True)
                try:
                    self._thread.start()
                except RuntimeError as exc:  # no thread to be had: the next record tries
                    self._thread = None
                    logger.error("usage ledger %s: writer not started: %s", self.backend.name, exc)
            if len(self._queue) in (1, self.max_batch):
                self._cond.notify_all()

    def _drop_one(self) -> None:
        self.dropped += 1
        self._dropping += 1
        if self._dropping == 1:
            why = "closed" if self._closing is not None else "down, its queue full"
            logger.warning(
                "usage ledger %s is %s (%d bytes): records are dropped until it is written",
                self.backend.name,
                why,
                self.max_pending_bytes,
            )

    # ------------------------------------------------------------- the writer

    def _run(self) -> None:
        delay = self.retry_initial
        while True:
            with self._cond:
                batch = self._next_batch()
                if batch is None:
                    return
            try:
                self.backend.write([schema.row(r) for r in batch])
            except Exception as exc:
                with self._cond:
                    self.failures += 1
                    if not self._down:
                        self._down = True
                        logger.warning(
                            "usage ledger %s unavailable (%s): %d records kept, retrying",
                            self.backend.name,
                            exc,
                            len(self._queue),
                        )
                    self._cond.notify_all()  # a flush waiting on this attempt returns
                    if not self._backoff(delay):
                        return
                delay = min(delay * 2, self.retry_max)
                continue
            delay = self.retry_initial
            with self._cond:
                self._written(len(batch))

    def _next_batch(self) -> list[UsageRecord] | None:
        """The records to write next (held by the lock); None once closed and empty."""
        while not self._queue:
            if self._closing is not None:
                return None
            self._cond.wait()
        if self._closing is None and len(self._queue) < self.max_batch:
            self._cond.wait_for(self._hurried, timeout=self.interval)
        return [r for r, _ in islice(self._queue, self.max_batch)]

    def _hurried(self) -> bool:
        return (
            self._closing is not None
            or len(self._queue) >= self.max_batch
            or self.written < self._flush_to
        )

    def _backoff(self, delay: float) -> bool:
        """Wait before the next try (held by the lock), cut short by a flush or by
        ``aclose``; False when ``aclose``'s time is up."""
        if self._closing is not None:
            left = self._closing - time.monotonic()
            if left <= 0:
                return False
            self._cond.wait(min(delay, left))
            return True
        flushes = self._flushes
        self._cond.wait_for(
            lambda: self._flushes != flushes or self._closing is not None, timeout=delay
        )
        return True

    def _written(self, n: int) -> None:
        for _ in range(n):
            _, size = self._queue.popleft()
            self._queued_bytes -= size
        self.written += n
        if self._down:
            self._down = False
            logger.warning("usage ledger %s written again", self.backend.name)
        if self._dropping and self._closing is None:
            logger.warning(
                "usage ledger %s: %d records were dropped while it was down",
                self.backend.name,
                self._dropping,
            )
            self._dropping = 0
        self._cond.notify_all()

    # ------------------------------------------------------------- the rest

    async def flush(self) -> None:
        """Until every record acknowledged so far is written, or the next write to
        end has failed (they stay queued for the next try; a backoff under way is
        cut short); at most ``close_timeout`` seconds."""
        with self._cond:
            if self._thread is None or self.written >= self.accepted:
                return
            target = self._flush_to = max(self._flush_to, self.accepted)
            self._flushes += 1
            failures = self.failures
            self._cond.notify_all()

        def wait() -> None:
            with self._cond:
                self._cond.wait_for(
                    lambda: self.written >= target or self.failures != failures,
                    timeout=self.close_timeout,
                )

        await anyio.to_thread.run_sync(wait, abandon_on_cancel=True)

    async def aclose(self) -> None:
        """A last attempt, of at most ``close_timeout`` seconds, to write what is
        queued; how many records it could not write is logged (an error)."""
        with self._cond:
            if self._closing is None:
                self._closing = time.monotonic() + self.close_timeout
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            await anyio.to_thread.run_sync(thread.join, self.close_timeout + 1)
        if thread is None or not thread.is_alive():  # a hung write keeps its connection
            await anyio.to_thread.run_sync(self.backend.close)
        if self._queue:
            logger.error(
                "usage ledger %s: %d acknowledged records could not be written",
                self.backend.name,
                len(self._queue),
            )

    @property
    def unwritten(self) -> int:
        """Acknowledged records not written (yet, or ever once closed)."""
        return self.accepted - self.written


class BatchLedger(BatchWriter):
    """A ``Ledger`` over a SQL ``Backend``: the batch writer, and the reads."""

    secret_timeout = SECRET_TIMEOUT

    async def records(
        self, since: str | date | datetime | None = None, owner: str | None = None
    ) -> list[UsageRecord]:
        """The records written (this process's queue flushed first), oldest first:
        those at or after ``since`` (an ISO 8601 date or time, a naive one UTC), of
        ``owner``. ``LedgerUnavailable`` while the database cannot be read."""
        start = schema.since_text(since)
        await self.flush()
        try:
            return await anyio.to_thread.run_sync(self.backend.read, start, owner)
        except Exception as exc:
            raise LedgerUnavailable(f"usage ledger {self.backend.name}: {exc}") from None

    async def owner_secret(self) -> bytes:
        """The owner-hash key kept in the ledger (``stored_responses.Owners`` uses it
        when the response store keeps none), so owners stay the same over restarts.
        ``StoreUnavailable`` while it cannot be read in ``secret_timeout`` seconds
        (asked again at most every ``retry_max`` seconds: requests meanwhile are not
        held up by it)."""
        if time.monotonic() < self._secret_retry:
            raise StoreUnavailable(f"usage ledger {self.backend.name}: unavailable")
        kept: str | None = None
        try:
            # A request waits for this read: a database that does not answer is down.
            with anyio.move_on_after(self.secret_timeout):
                kept = await anyio.to_thread.run_sync(
                    self.backend.owner_secret, os.urandom(32).hex(), abandon_on_cancel=True
                )
            if kept is None:
                raise TimeoutError(f"no answer in {self.secret_timeout} s")
            return bytes.fromhex(kept)
        except Exception as exc:
            self._secret_retry = time.monotonic() + self.retry_max
            raise StoreUnavailable(f"usage ledger {self.backend.name}: {exc}") from None
