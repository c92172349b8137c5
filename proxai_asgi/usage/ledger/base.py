"""The ledger contract, and the in-memory ledger tests read."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..record import UsageRecord


@runtime_checkable
class Ledger(Protocol):
    def submit(self, record: UsageRecord) -> None:
        """Take a record: never blocks, never raises (written off the request path)."""

    async def flush(self) -> None:
        """Every record submitted so far written (or kept for the next try)."""

    async def records(self) -> list[UsageRecord]:
        """Every record written, oldest first."""

    async def aclose(self) -> None: ...


class MemoryLedger:
    """Records kept in a list: for tests and for reading a process's own traffic."""

    def __init__(self) -> None:
        self._records: dict[str, UsageRecord] = {}

    def submit(self, record: UsageRecord) -> None:
        self._records.setdefault(record.request_id, record)  # idempotent per request id

    async def flush(self) -> None:
        return None

    async def records(self) -> list[UsageRecord]:
        return list(self._records.values())

    async def aclose(self) -> None:
        return None


def open_ledger(spec: str | Ledger | None) -> Ledger | None:
    """``None``: no ledger; ``"memory"``; a ledger object as it is."""
    if spec is None:
        return None
    if not isinstance(spec, str):
        return spec
    if spec in ("memory", "memory://"):
        return MemoryLedger()
    raise ValueError(f"ledger {spec!r}: expected memory, sqlite:///path or postgresql://...")
