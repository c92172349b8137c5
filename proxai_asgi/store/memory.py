"""The embedded default: an in-process store bounded by entries and bytes, least
recently used out first, each record expiring ``ttl`` seconds after its last use.

Each owner is bounded too (``max_owner_entries``, ``max_owner_bytes``): an owner past
its own bound loses its own least recently used records, never another owner's.
Records are only ever inserted (an id already held is refused, never replaced), and
each carries the order it was inserted in: a chain steps only to strictly older
records, so it cannot loop however the ids point.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from .base import DEFAULT_TTL, MAX_CHAIN, StoredResponse

DEFAULT_MAX_ENTRIES = 10_000
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
# Per owner: a quarter of the store, so one tenant cannot evict the others.
DEFAULT_MAX_OWNER_ENTRIES = DEFAULT_MAX_ENTRIES // 4
DEFAULT_MAX_OWNER_BYTES = DEFAULT_MAX_BYTES // 4


class _Entry:
    __slots__ = ("expires", "record", "seq", "size")

    def __init__(self, record: StoredResponse, size: int, expires: float, seq: int) -> None:
        self.record = record
        self.size = size
        self.expires = expires
        self.seq = seq  # insertion order: a chain only steps to smaller ones


class _Owner:
    """One owner's records, least recently used first, and their bytes."""

    __slots__ = ("bytes", "ids")

    def __init__(self) -> None:
        self.ids: OrderedDict[str, None] = OrderedDict()
        self.bytes = 0


class MemoryStore:
    def __init__(
        self,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.monotonic,
        max_owner_entries: int = DEFAULT_MAX_OWNER_ENTRIES,
        max_owner_bytes: int = DEFAULT_MAX_OWNER_BYTES,
    ) -> None:
        if min(max_entries, max_bytes, max_owner_entries, max_owner_bytes) < 1 or ttl <= 0:
            raise ValueError("the store's bounds and ttl must be positive")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_owner_entries = max_owner_entries
        self.max_owner_bytes = max_owner_bytes
        self.ttl = ttl
        self.clock = clock
        # id -> entry; oldest use first.
        self._records: OrderedDict[str, _Entry] = OrderedDict()
        self._owners: dict[str, _Owner] = {}
        self._seq = 0
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._records)

    async def put(self, record: StoredResponse) -> bool:
        if record.id in self._records:
            return False  # never replaced: the id is another answer's
        size = record.size()
        if size > min(self.max_bytes, self.max_owner_bytes):
            return True  # larger than any bound: kept nowhere, like an evicted one
        self._seq += 1
        self._records[record.id] = _Entry(record, size, self.clock() + self.ttl, self._seq)
        owner = self._owners.get(record.owner)
        if owner is None:
            owner = self._owners[record.owner] = _Owner()
        owner.ids[record.id] = None
        owner.bytes += size
        self.bytes += size
        while len(owner.ids) > self.max_owner_entries or owner.bytes > self.max_owner_bytes:
            self._drop(next(iter(owner.ids)))
        while len(self._records) > self.max_entries or self.bytes > self.max_bytes:
            self._drop(next(iter(self._records)))
        return True

    def _live(self, response_id: str, owner: str) -> _Entry | None:
        entry = self._records.get(response_id)
        if entry is None:
            return None
        now = self.clock()
        if entry.expires <= now:
            self._drop(response_id)
            return None
        if entry.record.owner != owner:
            return None
        entry.expires = now + self.ttl
        self._records.move_to_end(response_id)
        self._owners[owner].ids.move_to_end(response_id)
        return entry

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        entry = self._live(response_id, owner)
        return entry.record if entry is not None else None

    async def chain(self, response_id: str, owner: str) -> list[StoredResponse]:
        out: list[StoredResponse] = []
        next_id: str | None = response_id
        below = self._seq + 1
        while next_id is not None and len(out) < MAX_CHAIN:
            entry = self._live(next_id, owner)
            if entry is None or entry.seq >= below:
                break
            below = entry.seq
            out.append(entry.record)
            next_id = entry.record.previous_id
        out.reverse()
        return out

    async def delete(self, response_id: str, owner: str) -> bool:
        if self._live(response_id, owner) is None:
            return False
        self._drop(response_id)
        return True

    def _drop(self, response_id: str) -> None:
        entry = self._records.pop(response_id, None)
        if entry is None:
            return
        self.bytes -= entry.size
        owner = self._owners[entry.record.owner]
        del owner.ids[response_id]
        owner.bytes -= entry.size
        if not owner.ids:
            del self._owners[entry.record.owner]

    async def aclose(self) -> None:
        self._records.clear()
        self._owners.clear()
        self.bytes = 0
