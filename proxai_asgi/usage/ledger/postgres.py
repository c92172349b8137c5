"""The usage ledger in PostgreSQL (``postgresql://user@host/db``), for fleets: every
instance writes to one table (``pip install 'proxai-asgi[postgres]'``: psycopg 3).

The writer thread holds one connection, reads another; each is opened again after
any failure (``connect_timeout`` seconds at most to open). A batch is one
transaction of idempotent inserts, sent in one pipeline (psycopg's ``executemany``).
The table goes in the connection's first schema (``?options=-csearch_path%3Dname``
in the URL picks another).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from . import schema
from .batch import BatchLedger, Row
from .sql import SQLBackend

DEFAULT_CONNECT_TIMEOUT = 5


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


class PostgresBackend(SQLBackend):
    mark = "%s"

    def __init__(self, url: str, connect_timeout: int = DEFAULT_CONNECT_TIMEOUT) -> None:
        import psycopg  # noqa: F401  (here: a missing extra is said at start-up)

        super().__init__(_without_password(url))
        self.url = url
        self.connect_timeout = connect_timeout

    def _connect(self) -> Any:
        import psycopg

        db = psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
        try:
            with db.transaction():
                # Instances starting together: one creates the tables, the others wait.
                db.execute("SELECT pg_advisory_xact_lock(727472)")
                for statement in schema.tables(1):
                    db.execute(statement)
        except BaseException:
            db.close()
            raise
        return db

    def write(self, rows: list[Row]) -> None:
        def work(db: Any) -> None:
            with db.transaction(), db.cursor() as cur:
                cur.executemany(schema.insert(self.mark), rows)

        self._writer.run(work)


class PostgresLedger(BatchLedger):
    """``BatchLedger`` options (batch, bounds, retries) and ``connect_timeout``."""

    def __init__(
        self, url: str, *, connect_timeout: int = DEFAULT_CONNECT_TIMEOUT, **options: Any
    ) -> None:
        super().__init__(PostgresBackend(url, connect_timeout), **options)
