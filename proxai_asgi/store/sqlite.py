"""A SQLite file, so a single instance keeps its conversations over a restart.

stdlib ``sqlite3`` on one connection, each call run in a worker thread
(``anyio.to_thread``) so the event loop never waits on the disk. A record's expiry
moves forward whenever it is read, so ordering by expiry is least-recently-used
order: the bound on entries drops from that end.
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
_PRUNE_EVERY = 64  # puts between two checks of the entry bound

_SCHEMA = """
CREATE TABLE IF NOT EXISTS proxai_responses (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    previous_id TEXT,
    expires_at REAL NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS proxai_responses_expiry ON proxai_responses (expires_at);
"""

# Values the store keeps about itself (the owner-hash key).
_META = "CREATE TABLE IF NOT EXISTS proxai_meta (name TEXT PRIMARY KEY, value BLOB NOT NULL)"

# The record and its ancestors, one query; the newest first (depth 0).
_CHAIN = """
WITH RECURSIVE walk(id, previous_id, data, depth) AS (
    SELECT id, previous_id, data, 0 FROM proxai_responses
        WHERE id = ? AND owner = ? AND expires_at > ?
    UNION ALL
    SELECT r.id, r.previous_id, r.data, walk.depth + 1
        FROM proxai_responses r JOIN walk ON r.id = walk.previous_id
        WHERE r.owner = ? AND r.expires_at > ? AND walk.depth < ?
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
    ) -> None:
        self.path = path
        self.max_entries = max_entries
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._puts = 0

    # ------------------------------------------------------------------ plumbing

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            self._db = db
        return self._db

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                return work(self._connect())

        try:
            return await anyio.to_thread.run_sync(locked)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"sqlite store {self.path}: {exc}") from None

    def _touch(self, db: sqlite3.Connection, ids: list[str]) -> None:
        expires = self.clock() + self.ttl
        for at in range(0, len(ids), 500):  # one statement per 500 ids (SQLite's limits)
            batch = ids[at : at + 500]
            marks = ",".join("?" * len(batch))
            db.execute(
                f"UPDATE proxai_responses SET expires_at = ? WHERE id IN ({marks})",
                (expires, *batch),
            )

    # ------------------------------------------------------------------ the store

    async def put(self, record: StoredResponse) -> None:
        data = encode(record)
        self._puts += 1
        prune = self._puts % _PRUNE_EVERY == 1

        def work(db: sqlite3.Connection) -> None:
            now = self.clock()
            db.execute(
                "INSERT OR REPLACE INTO proxai_responses VALUES (?, ?, ?, ?, ?)",
                (record.id, record.owner, record.previous_id, now + self.ttl, data),
            )
            if prune:
                db.execute("DELETE FROM proxai_responses WHERE expires_at <= ?", (now,))
                db.execute(
                    "DELETE FROM proxai_responses WHERE id IN (SELECT id FROM proxai_responses"
                    " ORDER BY expires_at DESC LIMIT -1 OFFSET ?)",
                    (self.max_entries,),
                )

        await self._run(work)

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
                if self._db is not None:
                    self._db.close()
                    self._db = None

        await anyio.to_thread.run_sync(work)
