"""What the middleware does for each exchange's account, in one place: the budget
checked before any upstream is called, then, once the answer is sent, its ledger
record, its metrics and its budget's settlement.

Nothing here runs per streamed event, and nothing at all when none of ledger,
metrics, budgets or the cost header is configured (``active``). The exchange builds
its record (``serving.exchange``); this layer never sees an exchange.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ids import random_hex
from .prices import PriceTable

if TYPE_CHECKING:
    from ..metrics import Metrics
    from ..routing import Route
    from ..routing.plan import Attempts
    from .budgets import Budgets
    from .holds import Hold
    from .ledger import Ledger
    from .record import UsageRecord


def new_request_id() -> str:
    """Ours, never the client's: a client-chosen id could collide with another
    tenant's record, which the ledger's idempotency would then drop."""
    return "req_" + random_hex(12)


class Accounting:
    __slots__ = ("active", "budgets", "cost_header", "ledger", "metrics", "prices")

    def __init__(
        self,
        *,
        ledger: Ledger | None = None,
        metrics: Metrics | None = None,
        prices: PriceTable | None = None,
        budgets: Budgets | None = None,
        cost_header: bool = False,
    ) -> None:
        self.ledger = ledger
        self.metrics = metrics
        self.prices = prices if prices is not None else PriceTable.default()
        self.budgets = budgets
        if budgets is not None and budgets.prices is None:
            budgets.prices = self.prices  # (a money budget's reservation is priced)
        self.cost_header = cost_header
        self.active = bool(ledger or metrics or budgets or cost_header)

    @property
    def needs_owner(self) -> bool:
        return self.ledger is not None or self.budgets is not None

    async def admit(
        self, owner: str, route: Route, body: bytes, model: str | None = None
    ) -> Hold | None:
        """Before any upstream is called: a hold on the budgets the request draws on,
        or a 429 ``ProxyError`` when one is spent (``model``: the one asked upstream)."""
        if self.budgets is None:
            return None
        return await self.budgets.admit(owner, route, body, model)

    def record(self, rec: UsageRecord, dropped: list[str], routing: Attempts | None) -> None:
        """After the answer: its priced record to the ledger (queued, written off the
        request path) and to the metrics. Never waits (``serving.exchange._settle``
        settles a budget's hold after it)."""
        if self.ledger is not None:
            self.ledger.submit(rec)
        if self.metrics is not None:
            self.metrics.exchange(rec, dropped, routing)

    async def aclose(self) -> None:
        """The ledger flushed and closed, the budgets' engine closed, a worker's metrics
        files released."""
        if self.ledger is not None:
            await self.ledger.aclose()
        if self.budgets is not None:
            await self.budgets.aclose()
        if self.metrics is not None:
            self.metrics.close()
