"""Budgets per owner and per route (stub: issue 29 fills it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..routing import Route
    from .record import UsageRecord


class Budget:
    """A token or money limit per window, per owner or per route."""


class Hold:
    """A reservation taken when a request was admitted."""


class Budgets:
    async def settle(self, hold: Hold, rec: UsageRecord) -> None:
        return None

    async def admit(self, owner: str, route: Route, body: bytes) -> Hold | None:
        """A hold on the budgets ``ex`` draws on; a 429 ``ProxyError`` when one is spent."""
        return None


def open_budgets(budgets: Sequence[Budget], store: object) -> Budgets | None:
    return Budgets() if budgets else None
