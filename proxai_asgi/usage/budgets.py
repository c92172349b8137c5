"""Budgets: a token or money (USD) limit per fixed window, per owner or per route,
checked before any upstream is called.

Windows are fixed and aligned to the epoch (window ``k`` is ``[k*W, (k+1)*W)``), so
every instance with an NTP-synchronised clock computes the same window ("30d" is
thirty days counted from the epoch, not a calendar month). A request is refused when a
budget it draws on is spent (used + held >= limit): a 429 in the client's protocol
with ``retry-after`` the seconds to the next window (of the latest one, when several
are spent). Each budget counts ``per`` owner (each owner its own counter), route (the
route's model glob; every owner together) or all (one counter), over the routes named
in ``routes`` (none: every route).

An admitted request holds a reservation on every budget it draws on (``estimate``):
its input at a token per 4 bytes of the body, plus its own output cap (the body's
``max_tokens``, ``max_completion_tokens``, ``max_output_tokens`` or
``generationConfig.maxOutputTokens``; else the upstream's ``default_max_tokens``); for
a money budget that estimate priced by the price table (0 when the model has no
price). Concurrent requests near a limit therefore cannot all pass. ``settle``
replaces the hold, atomically, by what the exchange used, in the window it was admitted
in: tokens are input + output + cache reads + cache writes (reasoning is part of
output); money is ``rec.cost_usd``. An unpriced model (cost None) adds nothing to a
money budget: a money budget limits priced models only (give the others a price, or a
token budget), which is logged once per model. A failed exchange uses nothing. A hold
never settled (its instance died) stops counting after the budget's ``hold_ttl``.

Engines (``budget_memory``, ``budget_redis``): this process's memory, or Redis for
several instances (``store="redis://..."``; keys expire with their window).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import msgspec

from ..errors import ProxyError
from .budget_memory import MemoryBudgets
from .holds import BudgetEngine, Draw, Hold
from .record import UsageRecord

if TYPE_CHECKING:
    from ..routing import Route
    from .prices import PriceTable

__all__ = ["Budget", "Budgets", "Hold", "open_budgets"]

logger = logging.getLogger("proxai_asgi")

Per = Literal["owner", "route", "all"]
DEFAULT_HOLD_TTL = 900.0  # seconds: longer than any answer takes to stream
BYTES_PER_TOKEN = 4  # the input estimate: about four characters of JSON per token
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_WINDOW = r"(\d+)([smhdw])"  # (compiled on first use, by ``re``'s own cache)
_NAME = r"[A-Za-z0-9_.-]{1,64}"


def check_distinct(budgets: Sequence[Budget]) -> None:
    """Every budget a ``Budget``, no two counting under one key."""
    seen: dict[str, int] = {}
    for i, b in enumerate(budgets):
        if not isinstance(b, Budget):
            raise TypeError(f"budgets[{i}]: expected a Budget, got {type(b).__name__}")
        if b.key in seen:
            raise ValueError(
                f"budgets[{i}] counts what budgets[{seen[b.key]}] counts: give each a name"
            )
        seen[b.key] = i


def window_seconds(window: str | float) -> float:
    """``"1d"``, ``"12h"``, ``"30m"``, ``"90s"``, ``"1w"`` or a number of seconds."""
    if isinstance(window, str):
        found = re.fullmatch(_WINDOW, window.strip())
        if found is None:
            raise ValueError(
                f"window: {window!r} is not a number of seconds or a count of s, m, h, d or w"
            )
        seconds: float = int(found.group(1)) * _UNITS[found.group(2)]
    elif isinstance(window, (int, float)) and not isinstance(window, bool):
        seconds = float(window)
    else:
        raise ValueError(f"window: expected a duration, got {type(window).__name__}")
    if not seconds > 0 or math.isinf(seconds):
        raise ValueError(f"window: must be more than 0 seconds, got {window!r}")
    return seconds


@dataclass(frozen=True, kw_only=True)
class Budget:
    """A limit of ``tokens`` or of ``usd`` (exactly one) per ``window``, counted
    ``per`` owner, route or all, over ``routes`` (route model globs as configured; empty:
    every route). ``name`` keys its counters in the shared store (default: made of its
    unit, ``per``, window and routes, so changing the limit keeps the count); holds of
    requests never settled stop counting after ``hold_ttl`` seconds."""

    tokens: int | None = None
    usd: float | None = None
    window: str | float = "1d"
    per: Per = "owner"
    routes: Sequence[str] = ()
    name: str | None = None
    hold_ttl: float = DEFAULT_HOLD_TTL
    seconds: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (self.tokens is None) == (self.usd is None):
            raise ValueError("a budget has exactly one of tokens= or usd=")
        limit = self.tokens if self.tokens is not None else self.usd
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0:
            raise ValueError(f"a budget's limit must be a number more than 0, got {limit!r}")
        if self.tokens is not None and not isinstance(self.tokens, int):
            raise ValueError("tokens: a whole number of tokens")
        if self.per not in ("owner", "route", "all"):
            raise ValueError(f"per: 'owner', 'route' or 'all', not {self.per!r}")
        if isinstance(self.routes, str) or not all(isinstance(r, str) for r in self.routes):
            raise ValueError("routes: a list of route model globs")
        if not self.hold_ttl > 0:
            raise ValueError("hold_ttl: must be more than 0 seconds")
        object.__setattr__(self, "routes", tuple(self.routes))
        object.__setattr__(self, "seconds", window_seconds(self.window))
        if self.name is not None and not re.fullmatch(_NAME, self.name):
            raise ValueError("name: 1 to 64 letters, digits, '_', '.' or '-'")

    @property
    def limit(self) -> float:
        return float(self.tokens if self.tokens is not None else self.usd)  # type: ignore[arg-type]

    @property
    def key(self) -> str:
        """What its counters are named by (``name``, or one made of its definition)."""
        if self.name is not None:
            return self.name
        unit = "tokens" if self.tokens is not None else "usd"
        key = f"{unit}-{self.per}-{self.seconds:g}s"
        if self.routes:
            import hashlib  # (not at import: a budget is rare, and hashlib loads OpenSSL)

            key += "-" + hashlib.sha256("\n".join(self.routes).encode()).hexdigest()[:12]
        return key

    def applies(self, route: Route) -> bool:
        return not self.routes or route.model in self.routes

    def scope(self, owner: str, route: Route) -> str:
        return owner if self.per == "owner" else route.model if self.per == "route" else ""


class _Caps(msgspec.Struct):
    maxOutputTokens: int | None = None  # (Gemini's)


class _Body(msgspec.Struct):
    """The output caps a request body may name (whichever protocol it is)."""

    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    max_output_tokens: int | None = None
    generationConfig: _Caps | None = None  # (Gemini's)


_body_decoder = msgspec.json.Decoder(_Body)


def estimate(body: bytes, default_output: int) -> tuple[int, int]:
    """The reservation's input and output tokens (see the module docstring)."""
    try:
        caps = _body_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        caps = _Body()  # (the codec answers a bad body; a budget only estimates)
    gen = caps.generationConfig
    out = (
        caps.max_tokens
        or caps.max_completion_tokens
        or caps.max_output_tokens
        or (gen.maxOutputTokens if gen is not None else None)
        or default_output
    )
    return -(-len(body) // BYTES_PER_TOKEN), max(out, 0)


def used_by(budget: Budget, rec: UsageRecord) -> float:
    """What an exchange used of ``budget``: its tokens, or its cost (None: 0)."""
    if budget.tokens is not None:
        return float(
            rec.input_tokens
            + rec.output_tokens
            + rec.cache_read_tokens
            + rec.cache_write_5m_tokens
            + rec.cache_write_1h_tokens
        )
    return rec.cost_usd or 0.0


class Budgets:
    """The budgets of one middleware, on ``engine`` (default: this process's memory;
    ``open_budgets`` picks Redis for a Redis store). ``clock`` (epoch seconds) places
    requests in windows and ages holds."""

    def __init__(
        self,
        budgets: Sequence[Budget],
        engine: BudgetEngine | None = None,
        *,
        clock: Callable[[], float] = time.time,
        prices: PriceTable | None = None,
    ) -> None:
        check_distinct(budgets)
        self.budgets = tuple(budgets)
        self._by_key = {b.key: b for b in budgets}
        self.engine: BudgetEngine = engine if engine is not None else MemoryBudgets()
        self.clock = clock
        self.prices = prices  # set by ``Accounting`` to the middleware's table
        self._unpriced: set[str] = set()

    async def admit(
        self, owner: str, route: Route, body: bytes, model: str | None = None
    ) -> Hold | None:
        """A hold on the budgets the request draws on (None: it draws on none); a 429
        ``ProxyError`` when one is spent. ``model``: the one asked of the upstream
        (what a money budget's reservation is priced at)."""
        applied = [b for b in self.budgets if b.applies(route)]
        if not applied:
            return None
        now = self.clock()
        tokens = estimate(body, route.upstream.default_max_tokens)
        hold = Hold([self._draw(b, owner, route, now, tokens, model) for b in applied])
        refused = await self.engine.take(hold, now)
        if refused:
            raise _spent([applied[i] for i in refused], [hold.draws[i] for i in refused], now)
        return hold

    async def settle(self, hold: Hold, rec: UsageRecord | None) -> None:
        """Replace ``hold`` by what ``rec`` used (in the window it was admitted in);
        the holds of its sub-exchanges, whose use ``rec`` does not count, are released."""
        budgets = [self._by_key[d.budget] for d in hold.draws]
        unpriced = rec is not None and rec.cost_usd is None and 200 <= rec.status < 300
        if unpriced and rec is not None and any(b.usd is not None for b in budgets):
            self._note_unpriced(rec.served_model or rec.requested_model or "")
        used = [used_by(b, rec) if rec is not None else 0.0 for b in budgets]
        await self.engine.settle(hold, used, self.clock())
        for sub in hold.later:
            await self.settle(sub, None)

    def _draw(
        self,
        b: Budget,
        owner: str,
        route: Route,
        now: float,
        tokens: tuple[int, int],
        model: str | None,
    ) -> Draw:
        window = int(now // b.seconds)
        amount = float(sum(tokens)) if b.tokens is not None else self._priced(tokens, model)
        ends = (window + 1) * b.seconds
        return Draw(b.key, window, b.scope(owner, route), b.limit, amount, ends, now + b.hold_ttl)

    def _priced(self, tokens: tuple[int, int], model: str | None) -> float:
        if self.prices is None:
            return 0.0
        rec = UsageRecord(
            request_id="",
            time="",
            owner="",
            route=None,
            upstream=None,
            key_id=None,
            client_protocol="",
            upstream_protocol=None,
            requested_model=model,
            served_model=model,
            status=200,
        )
        rec.input_tokens, rec.output_tokens = tokens
        cost, _version = self.prices.cost(rec)
        return cost or 0.0

    def _note_unpriced(self, model: str) -> None:
        if model in self._unpriced or len(self._unpriced) >= 256:
            return
        self._unpriced.add(model)
        logger.warning(
            "budgets: model %r has no price; its exchanges add nothing to money budgets",
            model[:200],
        )

    async def aclose(self) -> None:
        await self.engine.aclose()


def _spent(budgets: list[Budget], draws: list[Draw], now: float) -> ProxyError:
    """The 429 for spent budgets: ``retry-after`` when the last of them renews."""
    wait = max(1, math.ceil(max(d.ends for d in draws) - now))
    b = budgets[0]
    limit = f"{b.tokens} tokens" if b.tokens is not None else f"{b.usd:g} USD"
    whose = {"owner": "this client's", "route": "this model's", "all": "the proxy's"}[b.per]
    return ProxyError(
        429,
        f"{whose} budget of {limit} per {_duration(b.seconds)} is spent; "
        f"please try again in {wait}s, when its window renews",
        kind="rate_limit",
        code="insufficient_quota",  # a spent quota: clients stop retrying
        headers=[(b"retry-after", str(wait).encode())],
    )


def _duration(seconds: float) -> str:
    for unit in "wdhm":
        if seconds >= _UNITS[unit] and seconds % _UNITS[unit] == 0:
            return f"{seconds // _UNITS[unit]:g}{unit}"
    return f"{seconds:g}s"


def open_budgets(
    budgets: Sequence[Budget] | Budgets, store: object, *, clock: Callable[[], float] = time.time
) -> Budgets | None:
    """The middleware's budgets: ``budgets`` given as a ``Budgets`` object as they are;
    else on the engine ``store`` implies, like the routing state: Redis for a Redis
    URL or an opened ``RedisStore`` (sharing its client), memory otherwise."""
    if isinstance(budgets, Budgets):
        return budgets
    if not budgets:
        return None
    from .budget_redis import shared_engine

    return Budgets(budgets, shared_engine(store), clock=clock)
