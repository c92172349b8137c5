"""The price table (stub: issue 29 fills it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .record import UsageRecord


class PriceTable:
    version = "none"

    @classmethod
    def default(cls) -> PriceTable:
        return cls()

    def cost(self, rec: UsageRecord) -> tuple[float | None, str | None]:
        """The record's cost in USD and the table's version; None for a model with
        no price."""
        return None, None


def load_prices(spec: str | PriceTable | None) -> PriceTable:
    """The default table, a table object, or a TOML file of overrides."""
    if isinstance(spec, PriceTable):
        return spec
    return PriceTable.default()
