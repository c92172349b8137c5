"""What a budget engine keeps: the reservations (``Hold``) taken on budget counters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..ids import random_hex


@dataclass(frozen=True, slots=True)
class Draw:
    """One budget's part of a hold: its counter (budget key, window index, scope),
    the budget's limit, the amount held, when the window ends and when the hold stops
    counting (epoch seconds)."""

    budget: str
    window: int
    scope: str
    limit: float
    amount: float
    ends: float
    expires: float


class Hold:
    """A reservation taken when a request was admitted; ``shared``: taken in the
    shared engine (Redis), not this process's own view of it. ``later``: holds of
    sub-exchanges (a compaction's summary) released with this one."""

    __slots__ = ("draws", "id", "later", "shared")

    def __init__(self, draws: list[Draw]) -> None:
        self.id = random_hex(12)
        self.draws = draws
        self.shared = False
        self.later: list[Hold] = []


class BudgetEngine(Protocol):
    async def take(self, hold: Hold, now: float) -> list[int]:
        """Hold every draw of ``hold`` when none of their counters is spent (atomic);
        else the indexes of the spent ones, holding nothing."""

    async def settle(self, hold: Hold, used: Sequence[float], now: float) -> None:
        """Release ``hold``'s draws and add ``used`` (one per draw) in their place."""

    async def aclose(self) -> None: ...
