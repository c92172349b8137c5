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

from ..record import UsageRecord
from . import schema
from .batch import BatchLedger, Connection, Row

DEFAULT_CONNECT_TIMEOUT = 5


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


class PostgresBackend:
    def __init__(self, url: str, connect_timeout: int = DEFAULT_CONNECT_TIMEOUT) -> None:
        import psycopg  # noqa: F401  (here: a missing extra is said at start-up)

        self.url = url
        self.name = _without_password(url)
        self.connect_timeout = connect_timeout
        self._writer = Connection(self._connect)
        self._reader = Connection(self._connect)

    def _connect(self) -> Any:
        import psycopg

        db = psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
        try:
            with db.transaction():
                # Instances starting together: one creates the table, the others wait.
                db.execute("SELECT pg_advisory_xact_lock(727472)")
                db.execute(schema.create_table(1))
                db.execute(schema.CREATE_META)
                for statement in schema.INDEXES:
                    db.execute(statement)
        except BaseException:
            db.close()
            raise
        return db

    def write(self, rows: list[Row]) -> None:
        def work(db: Any) -> None:
            with db.transaction(), db.cursor() as cur:
                cur.executemany(schema.insert("%s"), rows)

        self._writer.run(work)

    def read(self, since: str | None, owner: str | None) -> list[UsageRecord]:
        query, values = schema.select("%s", since, owner)

        def work(db: Any) -> list[Any]:
            return list(db.execute(query, values).fetchall())

        return [schema.record(tuple(r)) for r in self._reader.run(work)]

    def owner_secret(self, fresh: str) -> str:
        def work(db: Any) -> str:
            with db.transaction():
                db.execute(
                    f"INSERT INTO {schema.META} (name, value) VALUES ('owner_secret', %s)"
                    " ON CONFLICT (name) DO NOTHING",
                    (fresh,),
                )
                row = db.execute(f"SELECT value FROM {schema.META} WHERE name = 'owner_secret'")
                return str(row.fetchone()[0])

        return self._reader.run(work)

    def close(self) -> None:
        self._writer.close()
        self._reader.close()


class PostgresLedger(BatchLedger):
    """``BatchLedger`` options (batch, bounds, retries) and ``connect_timeout``."""

    def __init__(
        self, url: str, *, connect_timeout: int = DEFAULT_CONNECT_TIMEOUT, **options: Any
    ) -> None:
        super().__init__(PostgresBackend(url, connect_timeout), **options)
