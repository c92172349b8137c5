"""Usage ledgers: where each exchange's record goes (``open_ledger``)."""

from __future__ import annotations

from .base import Ledger, MemoryLedger, open_ledger

__all__ = ["Ledger", "MemoryLedger", "open_ledger"]
