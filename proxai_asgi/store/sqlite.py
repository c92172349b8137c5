"""A SQLite file, so a single instance keeps its conversations over a restart.

stdlib ``sqlite3``, each call run in a worker thread (``anyio.to_thread``) so the
event loop never waits on the disk, on a small pool of connections (at most
``max_connections``) in WAL mode: readers never wait on each other or on a writer.
A lock held by a writer (ours, or another process's) is waited for at most
``busy_timeout`` seconds, then the call fails (``StoreUnavailable``: a 503); a read
only refreshes the expiry of what it read when it can do so at once.

A record's expiry moves forward whenever it is read, so ordering by expiry is
least-recently-used order: the bounds on entries (the whole store's, checked every
few puts, and each owner's, checked on each of its puts) drop from that end.
Records are only ever inserted (a held id is refused, never replaced), and a chain
steps only to a strictly smaller rowid (an older record), so it cannot loop.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from .base import DEFAULT_TTL, MAX_CHAIN, StoredResponse, StoreUnavailable, decode, encode
from .memory import DEFAULT_MAX_ENTRIES

T = TypeVar("T")

DEFAULT_SQLITE_MAX_ENTRIES = 10 * DEFAULT_MAX_ENTRIES
# Per owner: a quarter of the store, so one tenant cannot evict the others.
DEFAULT_SQLITE_MAX_OWNER_ENTRIES = DEFAULT_SQLITE_MAX_ENTRIES // 4
DEFAULT_BUSY_TIMEOUT = 2.0  # seconds: a store locked longer is down, not slow
DEFAULT_MAX_CONNECTIONS = 8
_PRUNE_EVERY = 64  # puts between two checks of the whole store's entry bound

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS proxai_responses (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        previous_id TEXT,
        expires_at REAL NOT NULL,
        data BLOB NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS proxai_responses_expiry ON proxai_responses (expires_at)",
    "CREATE INDEX IF NOT EXISTS proxai_responses_owner ON proxai_responses (owner, expires_at)",
)
# Each owner's record count, kept by triggers, so a put checks its owner's bound in
# one look-up (counting the owner's rows on every put grew with the bound).
_OWNERS = (
    """CREATE TABLE proxai_owners (owner TEXT PRIMARY KEY, n INTEGER NOT NULL)
        WITHOUT ROWID""",
    """CREATE TRIGGER proxai_owners_in AFTER INSERT ON proxai_responses BEGIN
        INSERT INTO proxai_owners VALUES (new.owner, 1)
            ON CONFLICT (owner) DO UPDATE SET n = n + 1;
    END""",
    """CREATE TRIGGER proxai_owners_out AFTER DELETE ON proxai_responses BEGIN
        UPDATE proxai_owners SET n = n - 1 WHERE owner = old.owner;
        DELETE FROM proxai_owners WHERE owner = old.owner AND n <= 0;
    END""",
    # (a file written before the counts existed: its records counted once)
    "INSERT INTO proxai_owners SELECT owner, count(*) FROM proxai_responses GROUP BY owner",
)

# Values the store keeps about itself (the owner-hash key).
_META = "CREATE TABLE IF NOT EXISTS proxai_meta (name TEXT PRIMARY KEY, value BLOB NOT NULL)"


def _create_schema(db: sqlite3.Connection) -> None:
    """The tables, in one write transaction (two processes may start at once)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA:
            db.execute(statement)
        known = "SELECT 1 FROM sqlite_master WHERE name = 'proxai_owners'"
        if db.execute(known).fetchone() is None:
            for statement in _OWNERS:
                db.execute(statement)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


# The record and its ancestors, one query; the newest first (depth 0). Each step goes
# to a strictly smaller rowid: the walk ends, whatever the ids say.
_CHAIN = """
WITH RECURSIVE walk(n, id, previous_id, data, depth) AS (
    SELECT rowid, id, previous_id, data, 0 FROM proxai_responses
        WHERE id = ? AND owner = ? AND expires_at > ?
    UNION ALL
    SELECT r.rowid, r.id, r.previous_id, r.data, walk.depth + 1
        FROM proxai_responses r JOIN walk ON r.id = walk.previous_id
        WHERE r.owner = ? AND r.expires_at > ? AND r.rowid < walk.n
            AND walk.depth < ?
)
SELECT id, data FROM walk ORDER BY depth
"""


class SQLiteStore:
    def __init__(
        self,
        path: str,
        *,
        max_entries: int = DEFAULT_SQLITE_MAX_ENTRIES,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
        max_owner_entries: int = DEFAULT_SQLITE_MAX_OWNER_ENTRIES,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        if min(max_entries, max_owner_entries, max_connections) < 1 or busy_timeout < 0:
            raise ValueError("the store's bounds must be positive, busy_timeout not negative")
        self.path = path
        self.max_entries = max_entries
        self.max_owner_entries = max_owner_entries
        self.ttl = ttl
        self.clock = clock
        self.busy_timeout = busy_timeout
        # An in-memory database is one connection's own: never pooled.
        self.max_connections = 1 if path == ":memory:" else max_connections
        self._lock = threading.Lock()  # guards the pool, never held during a query
        self._free: list[sqlite3.Connection] = []
        self._open: list[sqlite3.Connection] = []
        self._ready = False  # the schema is in place
        self._limiter: anyio.CapacityLimiter | None = None
        self._puts = 0

    # ------------------------------------------------------------------ plumbing

    def _connect(self) -> sqlite3.Connection:
        """A connection of the pool's, opened when none is free (the limiter keeps
        the count within ``max_connections``)."""
        with self._lock:
            if self._free:
                return self._free.pop()
        db = sqlite3.connect(
            self.path, timeout=self.busy_timeout, check_same_thread=False, isolation_level=None
        )
        try:
            if not self._ready:
                db.execute("PRAGMA journal_mode=WAL")
                _create_schema(db)
                self._ready = True
            db.execute("PRAGMA synchronous=NORMAL")
        except BaseException:
            db.close()
            raise
        with self._lock:
            self._open.append(db)
        return db

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        def pooled() -> T:
            db = self._connect()
            try:
                return work(db)
            finally:
                with self._lock:
                    self._free.append(db)

        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.max_connections)
        try:
            return await anyio.to_thread.run_sync(pooled, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"sqlite store {self.path}: {exc}") from None

    def _touch(self, db: sqlite3.Connection, ids: list[str]) -> None:
        """Refresh the expiry of what was read, only if no lock is in the way: a read
        never waits for a writer."""
        expires = self.clock() + self.ttl
        db.execute("PRAGMA busy_timeout = 0")
        try:
            for at in range(0, len(ids), 500):  # one statement per 500 ids (SQLite's limits)
                batch = ids[at : at + 500]
                marks = ",".join("?" * len(batch))
                db.execute(
                    f"UPDATE proxai_responses SET expires_at = ? WHERE id IN ({marks})",
                    (expires, *batch),
                )
        except sqlite3.OperationalError:
            pass  # locked: the records keep their expiry until a later read
        finally:
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")

    # ------------------------------------------------------------------ the store

    async def put(self, record: StoredResponse) -> bool:
        data = encode(record)
        self._puts += 1
        prune = self._puts % _PRUNE_EVERY == 1

        def work(db: sqlite3.Connection) -> bool:
            now = self.clock()
            try:
                db.execute(
                    "INSERT INTO proxai_responses VALUES (?, ?, ?, ?, ?)",
                    (record.id, record.owner, record.previous_id, now + self.ttl, data),
                )
            except sqlite3.IntegrityError:
                return False  # the id is held: never replaced
            # This owner's own least recently used, past its bound (owner's index).
            count = db.execute(
                "SELECT n FROM proxai_owners WHERE owner = ?", (record.owner,)
            ).fetchone()
            if count is not None and count[0] > self.max_owner_entries:
                db.execute(
                    "DELETE FROM proxai_responses WHERE rowid IN (SELECT rowid FROM"
                    " proxai_responses WHERE owner = ? ORDER BY expires_at LIMIT ?)",
                    (record.owner, count[0] - self.max_owner_entries),
                )
            if prune:
                db.execute("DELETE FROM proxai_responses WHERE expires_at <= ?", (now,))
                db.execute(
                    "DELETE FROM proxai_responses WHERE id IN (SELECT id FROM proxai_responses"
                    " ORDER BY expires_at DESC LIMIT -1 OFFSET ?)",
                    (self.max_entries,),
                )
            return True

        return await self._run(work)

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        def work(db: sqlite3.Connection) -> Any:
            row = db.execute(
                "SELECT data FROM proxai_responses WHERE id = ? AND owner = ? AND expires_at > ?",
                (response_id, owner, self.clock()),
            ).fetchone()
            if row is not None:
                self._touch(db, [response_id])
            return row

        row = await self._run(work)
        return decode(row[0]) if row is not None else None

    async def chain(self, response_id: str, owner: str) -> list[StoredResponse]:
        def work(db: sqlite3.Connection) -> list[Any]:
            now = self.clock()
            rows = db.execute(
                _CHAIN, (response_id, owner, now, owner, now, MAX_CHAIN - 1)
            ).fetchall()
            self._touch(db, [row[0] for row in rows])
            return rows

        rows = await self._run(work)
        return [decode(row[1]) for row in reversed(rows)]

    async def delete(self, response_id: str, owner: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            cur = db.execute(
                "DELETE FROM proxai_responses WHERE id = ? AND owner = ? AND expires_at > ?",
                (response_id, owner, self.clock()),
            )
            return cur.rowcount > 0

        return await self._run(work)

    async def owner_secret(self) -> bytes:
        """The owner-hash key kept in the file itself: created at random by the first
        instance to open it, read by every later one (and restart), so the owners of
        its records stay the same without a configured secret."""
        fresh = os.urandom(32)

        def work(db: sqlite3.Connection) -> bytes:
            db.execute(_META)
            db.execute(
                "INSERT OR IGNORE INTO proxai_meta (name, value) VALUES ('owner_secret', ?)",
                (fresh,),
            )
            row = db.execute("SELECT value FROM proxai_meta WHERE name = 'owner_secret'").fetchone()
            return bytes(row[0])

        return await self._run(work)

    async def aclose(self) -> None:
        def work() -> None:
            with self._lock:
                connections, self._open, self._free = self._open, [], []
            for db in connections:
                db.close()

        await anyio.to_thread.run_sync(work)
