"""What the SQL engines share: connections that reopen after a failure, and the
reads (records, the owner-hash key), the same SQL in both dialects."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..record import UsageRecord
from . import schema

T = TypeVar("T")


class Connection:
    """A connection opened when first needed and dropped on any failure (the next
    call opens a new one); one caller at a time."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._db: Any = None
        self._lock = threading.Lock()

    def run(self, work: Callable[[Any], T]) -> T:
        with self._lock:
            if self._db is None:
                self._db = self._connect()
            try:
                return work(self._db)
            except BaseException:
                self._drop()
                raise

    def _drop(self) -> None:
        db, self._db = self._db, None
        with contextlib.suppress(Exception):  # already broken: nothing more to release
            db.close()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._drop()


class SQLBackend:
    """A ``batch.Backend`` but for ``_connect`` and ``write``: the writer thread's
    connection, and one for reads (another thread's)."""

    mark = "?"  # the driver's placeholder

    def __init__(self, name: str) -> None:
        self.name = name
        self._writer = Connection(self._connect)
        self._reader = Connection(self._connect)

    def _connect(self) -> Any:
        raise NotImplementedError

    def read(self, since: str | None, owner: str | None) -> list[UsageRecord]:
        query, values = schema.select(self.mark, since, owner)
        rows = self._reader.run(lambda db: list(db.execute(query, values).fetchall()))
        return [schema.record(tuple(r)) for r in rows]

    def owner_secret(self, fresh: str) -> str:
        def work(db: Any) -> str:
            db.execute(schema.keep_secret(self.mark), (fresh,))
            return str(db.execute(schema.READ_SECRET).fetchone()[0])

        return self._reader.run(work)

    def close(self) -> None:
        self._writer.close()
        self._reader.close()
