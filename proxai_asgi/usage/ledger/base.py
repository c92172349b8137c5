"""The ledger contract, the in-memory ledger tests read, and ``open_ledger``."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Protocol, runtime_checkable

from ..record import UsageRecord
from . import schema


@runtime_checkable
class Ledger(Protocol):
    def submit(self, record: UsageRecord) -> None:
        """Take a record: never blocks, never raises (written off the request path)."""

    async def flush(self) -> None:
        """Every record submitted so far written (or kept for the next try)."""

    async def records(
        self, since: str | date | datetime | None = None, owner: str | None = None
    ) -> list[UsageRecord]:
        """The records written, oldest first: those at or after ``since`` (an ISO
        8601 date or time, a naive one UTC) and of ``owner`` when given."""

    async def aclose(self) -> None: ...


class MemoryLedger:
    """Records kept in a dict: for tests and for reading a process's own traffic
    (unbounded: not for serving)."""

    def __init__(self) -> None:
        self._records: dict[str, UsageRecord] = {}

    def submit(self, record: UsageRecord) -> None:
        self._records.setdefault(record.request_id, record)  # idempotent per request id

    async def flush(self) -> None:
        return None

    async def records(
        self, since: str | date | datetime | None = None, owner: str | None = None
    ) -> list[UsageRecord]:
        start = schema.since_text(since)
        return sorted(
            (
                r
                for r in self._records.values()
                if (start is None or r.time >= start) and (owner is None or r.owner == owner)
            ),
            key=lambda r: (r.time, r.request_id),
        )

    async def aclose(self) -> None:
        return None


def open_ledger(spec: str | Ledger | None, **options: Any) -> Ledger | None:
    """``None``: no ledger; ``"memory"``; ``"sqlite:///path"`` (a relative path;
    ``sqlite:////abs/path`` an absolute one); ``"postgresql://user@host/db"``; a ledger
    object as it is. ``options`` go to the SQL ledgers (``BatchLedger``'s)."""
    if spec is None:
        return None
    if not isinstance(spec, str):
        return spec
    if spec in ("memory", "memory://"):
        return MemoryLedger()
    if spec.startswith("sqlite:///") and len(spec) > len("sqlite:///"):
        from .sqlite import SQLiteLedger

        return SQLiteLedger(spec.removeprefix("sqlite:///"), **options)
    if spec.startswith(("postgresql://", "postgres://")):
        try:
            from .postgres import PostgresLedger

            return PostgresLedger(spec, **options)
        except ImportError:
            raise ValueError(
                "a PostgreSQL ledger needs psycopg: pip install 'proxai-asgi[postgres]'"
            ) from None
    raise ValueError(f"ledger {spec!r}: expected memory, sqlite:///path or postgresql://...")
