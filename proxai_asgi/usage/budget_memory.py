"""Budget counters in this process's memory (one instance, or one worker).

One counter per budget, window and scope (owner or route), in a ``BoundedCache``
bounded by bytes (``max_bytes``, default 16 MiB: some 60,000 counters): a past
window's counters are never used again, so they are the first out, and a table full
of live owners forgets the least recently active one (whose next request then starts
from zero: a byte bound cannot keep every owner a stream of new credentials makes).
An entry's size is its key's: the holds of a counter are those of requests in flight.

Every operation runs without an await between its check and its change, so it is
atomic on the event loop. (The Redis engine keeps one of these as its view for an
outage: ``floor`` raises a counter to what Redis last said.)
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

from ..bounded_cache import BoundedCache
from .holds import Draw, Hold

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
_COUNTER_BYTES = 250  # a counter object and its small dict, beyond its key's strings

_Key = tuple[str, int, str]


class _Counter:
    __slots__ = ("held", "holds", "next_expiry", "used")

    def __init__(self) -> None:
        self.used = 0.0
        self.held = 0.0
        self.holds: dict[str, tuple[float, float]] = {}  # hold id -> (amount, expires)
        self.next_expiry = math.inf

    def expire(self, now: float) -> None:
        """Holds past their expiry stop counting."""
        if self.next_expiry > now:
            return
        for hold_id, (amount, expires) in list(self.holds.items()):
            if expires <= now:
                del self.holds[hold_id]
                self.held -= amount
        self._recount()

    def hold(self, hold_id: str, amount: float, expires: float) -> None:
        self.holds[hold_id] = (amount, expires)
        self.held += amount
        self.next_expiry = min(self.next_expiry, expires)

    def release(self, hold_id: str) -> None:
        found = self.holds.pop(hold_id, None)
        if found is not None:
            self.held -= found[0]
            self._recount()

    def _recount(self) -> None:
        if not self.holds:
            self.held = 0.0  # (no float drift survives an idle moment)
            self.next_expiry = math.inf
        else:
            self.next_expiry = min(e for _, e in self.holds.values())


def _size(key: _Key, value: _Counter) -> int:
    return sys.getsizeof(key[0]) + sys.getsizeof(key[2]) + _COUNTER_BYTES


class MemoryBudgets:
    """``BudgetEngine`` in this process's memory."""

    def __init__(self, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.counters: BoundedCache[_Key, _Counter] = BoundedCache(
            max_bytes=max_bytes, max_entries=max(max_bytes // _COUNTER_BYTES, 2), size=_size
        )

    def counter(self, d: Draw) -> _Counter:
        key = (d.budget, d.window, d.scope)
        found = self.counters.get(key)
        if found is None:
            found = _Counter()
            self.counters.put(key, found)
        return found

    def state(self, d: Draw, now: float) -> tuple[float, float]:
        """The counter's used and held amounts (for tests and the Redis engine)."""
        c = self.counter(d)
        c.expire(now)
        return c.used, c.held

    def take_now(self, hold: Hold, now: float) -> list[int]:
        counters = [self.counter(d) for d in hold.draws]
        refused = []
        for i, (c, d) in enumerate(zip(counters, hold.draws, strict=True)):
            c.expire(now)
            if c.used + c.held >= d.limit:
                refused.append(i)
        if not refused:
            for c, d in zip(counters, hold.draws, strict=True):
                c.hold(hold.id, d.amount, d.expires)
        return refused

    def settle_now(self, hold: Hold, used: Sequence[float], now: float) -> None:
        for d, amount in zip(hold.draws, used, strict=True):
            if now >= d.ends:
                continue  # its window is over: nothing counts there any more
            c = self.counter(d)
            c.release(hold.id)
            c.used += amount

    def floor(self, d: Draw, total: float) -> None:
        """The counter counts at least ``total`` (what the shared engine said)."""
        c = self.counter(d)
        c.used = max(c.used, total)

    async def take(self, hold: Hold, now: float) -> list[int]:
        return self.take_now(hold, now)

    async def settle(self, hold: Hold, used: Sequence[float], now: float) -> None:
        self.settle_now(hold, used, now)

    async def aclose(self) -> None:
        return None
