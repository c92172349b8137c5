"""The usage ledger in a SQLite file (``sqlite:///path``): the embedded default.

stdlib ``sqlite3`` in WAL mode: the writer thread holds one connection, reads another,
so a reader (``proxai-asgi usage`` included, from another process) never waits on a
write. A write that finds the file locked (another process's transaction) waits at
most ``busy_timeout`` seconds, then fails and is retried like any other failure.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..record import UsageRecord
from . import schema
from .batch import BatchLedger, Connection, Row

DEFAULT_BUSY_TIMEOUT = 1.0


class SQLiteBackend:
    def __init__(self, path: str, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
        self.path = path
        self.name = f"sqlite:///{path}"
        self.busy_timeout = busy_timeout
        self._writer = Connection(self._connect)
        self._reader = Connection(self._connect)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(
            self.path, timeout=self.busy_timeout, check_same_thread=False, isolation_level=None
        )
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(schema.create_table(0))
            db.execute(schema.CREATE_META)
            for statement in schema.INDEXES:
                db.execute(statement)
        except BaseException:
            db.close()
            raise
        return db

    def write(self, rows: list[Row]) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(schema.insert("?"), rows)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

        self._writer.run(work)

    def read(self, since: str | None, owner: str | None) -> list[UsageRecord]:
        query, values = schema.select("?", since, owner)

        def work(db: sqlite3.Connection) -> list[Any]:
            return db.execute(query, values).fetchall()

        return [schema.record(tuple(r)) for r in self._reader.run(work)]

    def owner_secret(self, fresh: str) -> str:
        def work(db: sqlite3.Connection) -> str:
            db.execute(
                f"INSERT OR IGNORE INTO {schema.META} (name, value) VALUES ('owner_secret', ?)",
                (fresh,),
            )
            row = db.execute(f"SELECT value FROM {schema.META} WHERE name = 'owner_secret'")
            return str(row.fetchone()[0])

        return self._reader.run(work)

    def close(self) -> None:
        self._writer.close()
        self._reader.close()


class SQLiteLedger(BatchLedger):
    """``BatchLedger`` options (batch, bounds, retries) and ``busy_timeout``."""

    def __init__(self, path: str, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT, **options: Any):
        super().__init__(SQLiteBackend(path, busy_timeout), **options)
