"""STUB (replaced by the state branch): routing state in memory."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol


class RoutingState(Protocol):
    async def cooled(self, names: Sequence[str]) -> dict[str, float]: ...
    async def cool(self, name: str, seconds: float) -> None: ...
    async def recovered(self, name: str) -> None: ...
    async def claim_probe(self, name: str, seconds: float) -> bool: ...
    async def bound(self, session: str) -> str | None: ...
    async def bind(self, session: str, target: str, ttl: float) -> None: ...
    async def aclose(self) -> None: ...


class MemoryRoutingState:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._until: dict[str, float] = {}
        self._bind: dict[str, tuple[str, float, float]] = {}

    async def cooled(self, names: Sequence[str]) -> dict[str, float]:
        now = self.clock()
        return {n: self._until[n] - now for n in names if self._until.get(n, 0) > now}

    async def cool(self, name: str, seconds: float) -> None:
        self._until[name] = max(self._until.get(name, 0), self.clock() + seconds)

    async def recovered(self, name: str) -> None:
        self._until.pop(name, None)

    async def claim_probe(self, name: str, seconds: float) -> bool:
        return True

    async def bound(self, session: str) -> str | None:
        hit = self._bind.get(session)
        if hit is None or hit[1] < self.clock():
            return None
        self._bind[session] = (hit[0], self.clock() + hit[2], hit[2])
        return hit[0]

    async def bind(self, session: str, target: str, ttl: float) -> None:
        self._bind[session] = (target, self.clock() + ttl, ttl)

    async def aclose(self) -> None:
        return None


def open_routing_state(store: object) -> RoutingState:
    return MemoryRoutingState()
