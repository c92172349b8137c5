"""Finishing an answer whose stream was cut after its content reached the client
(STUB until the continuation machinery lands)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ..errors import ProxyError

if TYPE_CHECKING:
    from .. import pipeline
    from ..routing.plan import Target
    from .failover import Race

Respond = Callable[[], Awaitable[None]]


class Kept:
    """A relayed stream's bytes, kept up to ``limit`` to continue it if it is cut."""

    __slots__ = ("_limit", "_size", "chunks", "whole")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._size = 0
        self.chunks: list[bytes] = []
        self.whole = True  # False once past the limit: it cannot be continued

    def add(self, chunk: bytes) -> None:
        if not self.whole:
            return
        self._size += len(chunk)
        if self._size > self._limit:
            self.whole = False
            self.chunks.clear()
            return
        self.chunks.append(chunk)


async def relayed(race: Race, target: Target, kept: Kept, error: ProxyError) -> bool:
    return False


async def translated(
    race: Race, target: Target, stream: pipeline.StreamTranslator, error: ProxyError
) -> bool:
    return False
