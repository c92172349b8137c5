"""Accounting for every exchange: the usage ledger, the price table, budgets."""

from __future__ import annotations

from .accounting import Accounting
from .ledger import Ledger, MemoryLedger, open_ledger
from .prices import PriceTable
from .record import UsageRecord

__all__ = ["Accounting", "Ledger", "MemoryLedger", "PriceTable", "UsageRecord", "open_ledger"]
