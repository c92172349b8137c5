"""The usage ledger in a SQLite file (``sqlite:///path``): the embedded default.

stdlib ``sqlite3`` in WAL mode: the writer thread holds one connection, reads another,
so a reader (``proxai-asgi usage`` included, from another process) never waits on a
write. A write that finds the file locked (another process's transaction) waits at
most ``busy_timeout`` seconds, then fails and is retried like any other failure.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from . import schema
from .batch import BatchLedger, Row
from .sql import SQLBackend

DEFAULT_BUSY_TIMEOUT = 1.0


class SQLiteBackend(SQLBackend):
    mark = "?"

    def __init__(self, path: str, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
        super().__init__(f"sqlite:///{path}")
        self.path = path
        self.busy_timeout = busy_timeout

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(
            self.path, timeout=self.busy_timeout, check_same_thread=False, isolation_level=None
        )
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            for statement in schema.tables(0):
                db.execute(statement)
        except BaseException:
            db.close()
            raise
        return db

    def write(self, rows: list[Row]) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")  # (locked: fails here, nothing to roll back)
            try:
                db.executemany(schema.insert(self.mark), rows)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

        self._writer.run(work)


class SQLiteLedger(BatchLedger):
    """``BatchLedger`` options (batch, bounds, retries) and ``busy_timeout``."""

    def __init__(self, path: str, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT, **options: Any):
        super().__init__(SQLiteBackend(path, busy_timeout), **options)
