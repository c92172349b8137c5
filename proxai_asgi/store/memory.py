"""The embedded default: an in-process store bounded by entries and bytes, least
recently used out first, each record expiring ``ttl`` seconds after its last use."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from .base import DEFAULT_TTL, MAX_CHAIN, StoredResponse

DEFAULT_MAX_ENTRIES = 10_000
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


class MemoryStore:
    def __init__(
        self,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1 or max_bytes < 1 or ttl <= 0:
            raise ValueError("max_entries, max_bytes and ttl must be positive")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl = ttl
        self.clock = clock
        # id -> (record, its size, when it expires); oldest use first.
        self._records: OrderedDict[str, tuple[StoredResponse, int, float]] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._records)

    async def put(self, record: StoredResponse) -> None:
        self._drop(record.id)
        size = record.size()
        if size > self.max_bytes:
            return  # larger than the whole store: kept nowhere, like an evicted one
        self._records[record.id] = (record, size, self.clock() + self.ttl)
        self.bytes += size
        while len(self._records) > self.max_entries or self.bytes > self.max_bytes:
            self._drop(next(iter(self._records)))

    def _live(self, response_id: str, owner: str) -> StoredResponse | None:
        entry = self._records.get(response_id)
        if entry is None:
            return None
        record, size, expires = entry
        now = self.clock()
        if expires <= now:
            self._drop(response_id)
            return None
        if record.owner != owner:
            return None
        self._records[response_id] = (record, size, now + self.ttl)
        self._records.move_to_end(response_id)
        return record

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        return self._live(response_id, owner)

    async def chain(self, response_id: str, owner: str) -> list[StoredResponse]:
        out: list[StoredResponse] = []
        next_id: str | None = response_id
        while next_id is not None and len(out) < MAX_CHAIN:
            record = self._live(next_id, owner)
            if record is None:
                break
            out.append(record)
            next_id = record.previous_id
        out.reverse()
        return out

    async def delete(self, response_id: str, owner: str) -> bool:
        if self._live(response_id, owner) is None:
            return False
        self._drop(response_id)
        return True

    def _drop(self, response_id: str) -> None:
        entry = self._records.pop(response_id, None)
        if entry is not None:
            self.bytes -= entry[1]

    async def aclose(self) -> None:
        self._records.clear()
        self.bytes = 0
