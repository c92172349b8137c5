"""A generation request tried on its route's targets until one answers.

The targets come from ``routing.plan``: the route's own upstream (each key of its
pool), then its fallbacks. Each attempt is held back until the answer's first
content (``attempts.py``), so a failure before it — an error status, a refused or
reset connection, an in-band error event, a stream that ends empty — is never seen
by the client: the failure's class (``routing.failures``) decides what comes next.

- request: the provider refused the request itself; answered as it answered.
- context: the prompt is too long for this target; a fallback may take it.
- key: the key is refused (revoked, no quota): cooled down long, the next key at once.
- target: overloaded, rate-limited, broken: retried on the same key with jittered
  backoff that honours ``retry-after`` within the route's budget, then cooled down,
  then the next target.

An attempt without content after ``first_content_timeout`` is not abandoned: the next
target is started beside it (a hedge) and the first to answer wins, the other is
cancelled. When every target has failed, the client gets the first target's
(the route's own upstream's) last answer: its original error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from ..client_values import loggable
from ..errors import ProxyError, ResponseAborted
from ..routing import Route
from ..routing.affinity import session_of
from ..routing.failures import Failure, backoff
from ..routing.health import RoutingState
from ..routing.plan import Attempts, RoutePlan, Target
from ..transport.upstream import client_credential
from .exchange import Exchange

if TYPE_CHECKING:
    from ..metrics import Metrics

logger = logging.getLogger("proxai_asgi")

# A conversation stays bound to the key and target that served it this long after
# its last request (renewed on use): about a provider's prompt-cache lifetime.
BINDING_TTL = 3600.0

Respond = Callable[[], Awaitable[None]]


@dataclass(slots=True)
class Failed:
    """An attempt that failed before its answer's first content, and how the client
    is answered if it stays the last word."""

    target: Target
    failure: Failure
    respond: Respond
    # The target never answered in time: asked again it would only make the client
    # wait as long once more, so the next target is asked instead.
    silent: bool = False


def plan_of(route: Route) -> RoutePlan:
    plan: RoutePlan | None = route.__dict__.get("_plan")
    if plan is None:
        plan = RoutePlan(route)
        route.__dict__["_plan"] = plan  # a frozen config object: made once, never changed
    return plan


Attempt = Callable[["Race", Target], Awaitable[Failed | None]]


class Race:
    """The targets of one request, tried in turn (and side by side once one is slow
    to answer) until one commits to the answer."""

    def __init__(
        self,
        ex: Exchange,
        targets: list[Target],
        attempt: Attempt,
        state: RoutingState | None,
        session: str | None,
    ) -> None:
        self.ex = ex
        self._targets = targets
        self._next = 0
        self._attempt = attempt
        self.state = state
        self.session = session
        self.bound: str | None = None  # the member ``session`` was bound to, if any
        self.winner: Target | None = None
        self.failed: list[Failed] = []
        self.answered = False  # a request-class failure was answered
        self.record = Attempts()
        self._chains: list[anyio.CancelScope] = []
        self._scope_of: dict[str, anyio.CancelScope] = {}  # target member -> its chain
        self._tg: anyio.abc.TaskGroup | None = None
        self._raised: BaseException | None = None
        self._spent = 0.0  # seconds waited in backoff, against the retry budget
        self._firing: asyncio.Task[None] | None = None  # a hedge being started
        self.metrics: Metrics | None = None  # set by ``serve`` (None: metrics off)

    # ---------------------------------------------------------------- driving

    async def run(self) -> None:
        # The first chain runs in this task (a task costs ~30 µs to start); a
        # one-target plan has nothing to hedge and needs no task group either.
        if len(self._targets) == 1:
            await self._chain()
        else:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await self._chain()
        if self._raised is not None:
            raise self._raised
        if self.winner is None and not self.answered:
            await self._answer_failure()

    def claim(self, target: Target) -> bool:
        """``target`` is about to send the client its answer: True for the first
        attempt to ask, which cancels the others (no await between check and set)."""
        if self.winner is not None or self.answered:
            return False
        self.winner = target
        self.record.served_by = target
        own = self._scope_of.get(target.member)
        for scope in self._chains:
            if scope is not own:  # the winner's own chain goes on to serve the answer
                scope.cancel()
        return True

    async def _chain(self) -> None:
        with anyio.CancelScope() as scope:
            self._chains.append(scope)
            try:
                while self.winner is None and not self.answered:
                    target = self._take()
                    if target is None:
                        return
                    await self._try(target, scope)
            except (ProxyError, ResponseAborted) as exc:
                self._raised = exc
            except Exception as exc:  # a bug: the exchange logs it and answers 500
                self._raised = exc
            finally:
                if self._raised is not None and self._tg is not None:
                    self._tg.cancel_scope.cancel()

    def continuers(self, broken: Target, stalled: bool = False) -> list[Target]:
        """Who may finish ``broken``'s cut answer: itself first (a cut connection is
        rarely the model's fault), then the others; a target that stalled before the
        cut is asked last."""
        others = [t for t in self._targets if t is not broken]
        return [*others, broken] if stalled else [broken, *others]

    def _take(self) -> Target | None:
        if self._next >= len(self._targets):
            return None
        target = self._targets[self._next]
        self._next += 1
        return target

    async def _try(self, target: Target, scope: anyio.CancelScope) -> None:
        """One target: attempted, retried while its failures are worth retrying."""
        up = target.upstream
        tries = 0
        metrics = self.metrics
        while True:
            self.record.count += 1
            hedge = self._hedge_after(up.first_content_timeout)
            self._scope_of[target.member] = scope
            began = time.perf_counter() if metrics is not None else 0.0
            try:
                failed = await self._attempt(self, target)
            except BaseException as exc:
                if metrics is not None:
                    cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
                    ended = "cancelled" if cancelled else "aborted"
                    metrics.attempt(self._route(), target, ended, time.perf_counter() - began)
                raise
            finally:
                if hedge is not None:
                    hedge()
            if failed is None:
                won = self.winner is target
                if metrics is not None:
                    ended = "" if won else "cancelled"
                    metrics.attempt(self._route(), target, ended, time.perf_counter() - began)
                if won:
                    await self._served(target)
                return
            failure = failed.failure
            if metrics is not None:
                metrics.attempt(self._route(), target, failure.cls, time.perf_counter() - began)
            self.failed.append(failed)
            self.record.note(target, failure)
            logger.info(
                "proxai_asgi attempt failed: target=%s fallback=%d class=%s status=%s reason=%s",
                loggable(up.label),
                target.fallback_index,
                failure.cls,
                failure.status,
                loggable(failure.reason),
            )
            if failure.cls == "request":
                # The provider refused the request itself: answered as it answered.
                if self.winner is None and not self.answered:
                    self.answered = True
                    await failed.respond()
                return
            if failure.cls == "context":
                return  # the next target may have a larger context
            if failure.cls == "key":
                wait = max(up.key_cooldown, failure.retry_after or 0)
                await self._cool(target, target.member, wait, "key")
                return
            wait = backoff(tries + 1, failure.retry_after, random.random)
            retry_after = failure.retry_after
            if (
                not failed.silent
                and tries < up.max_retries
                and (retry_after is None or retry_after <= up.max_retry_after)
                and self._spent + wait <= up.retry_budget
            ):
                tries += 1
                self._spent += wait
                if metrics is not None:
                    metrics.retried(self._route(), target, failure.cls)
                await anyio.sleep(wait)
                continue
            # Out of retries: a rate limit is this key's, anything else the provider's.
            limited = failure.status == 429
            name = target.keyed if limited else target.provider
            wait = max(up.target_cooldown, retry_after or 0)
            await self._cool(target, name, wait, "rate_limit" if limited else "target")
            return

    def _hedge_after(self, delay: float) -> Callable[[], None] | None:
        """Start the next target beside this attempt if it has no content in ``delay``;
        returns what calls that off (None: no target is left to start)."""
        if self._next >= len(self._targets) or self._tg is None:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another backend (trio): a task that sleeps
            scope = anyio.CancelScope()

            async def sleeper() -> None:
                with scope:
                    await anyio.sleep(delay)
                    self._hedge(delay)

            self._tg.start_soon(sleeper)
            return scope.cancel
        # On asyncio a timer (~3 µs) rather than a task that sleeps (~60 µs to start
        # and cancel): every attempt of a route with a fallback sets one. anyio starts
        # tasks only from a task: the timer, when it fires, makes one to do that.
        handle = loop.call_later(delay, self._fire, loop, delay)
        return handle.cancel

    def _fire(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        async def fire() -> None:
            self._hedge(delay)

        self._firing = loop.create_task(fire())  # held: the loop keeps tasks weakly

    def _hedge(self, delay: float) -> None:
        if self.winner is None and not self.answered and self._next < len(self._targets):
            logger.info("proxai_asgi: no content after %gs, trying the next target", delay)
            assert self._tg is not None
            with contextlib.suppress(RuntimeError):  # the race ended meanwhile
                self._tg.start_soon(self._chain)

    # ----------------------------------------------------------------- state

    def _route(self) -> str:
        """The route's model glob, the metrics' label (configuration, never the client's)."""
        matched = self.ex.matched
        return matched.model if matched is not None else "none"

    async def _cool(self, target: Target, name: str, seconds: float, scope: str) -> None:
        """``name`` avoided for ``seconds``; ``scope`` says which (for the metrics)."""
        if self.state is not None and seconds > 0:
            await self.state.cool(name, seconds)
            if self.metrics is not None:
                self.metrics.cooled(target, scope)

    async def _served(self, target: Target) -> None:
        state = self.state
        if state is None:
            return
        # An outage (5xx, overload) was learned for the model on the provider, a 429
        # for it on the key, a refused key for the member: an answer proves all well
        # again (a target that failed and then answered on a retry too).
        await state.recovered(target.member)
        await state.recovered(target.provider)
        await state.recovered(target.keyed)
        # A binding to this member was renewed when it was looked up: writing it again
        # would cost a Redis round trip on every turn of a conversation.
        if self.session is not None and self.metrics is not None:
            bound = self.bound
            outcome = "new" if bound is None else "hit" if bound == target.member else "moved"
            self.metrics.affinity(self._route(), outcome)
        if self.session is not None and self.bound != target.member:
            await state.bind(self.session, target.member, BINDING_TTL)

    async def _answer_failure(self) -> None:
        """Every target failed: the route's own upstream's last answer (the original
        error) is what the client gets."""
        if not self.failed:
            raise ProxyError(502, "no upstream could be reached", kind="bad_gateway")
        own = [f for f in self.failed if f.target.fallback_index == 0]
        await (own or self.failed)[-1].respond()


# After a cooldown lapses one request at a time (on any instance) probes the target;
# the others keep avoiding it for this long, or until the probe succeeded.
PROBE_WINDOW = 10.0


async def _cooled(state: RoutingState, names: list[str]) -> dict[str, float]:
    """The names to avoid now and for how long; a lapsed one is probed by this request
    if it wins the claim."""
    cooled = await state.cooled(names)
    for name, left in list(cooled.items()):
        if left <= 0:
            if await state.claim_probe(name, PROBE_WINDOW):
                del cooled[name]
            else:
                cooled[name] = PROBE_WINDOW
    return cooled


async def serve(ex: Exchange, route: Route, body: bytes, attempt: Attempt) -> None:
    """Try ``route``'s targets with ``attempt`` until one answers."""
    plan = plan_of(route)
    model = ex.model or ""
    if plan.single:
        targets = plan.targets(model)
        race = Race(ex, targets, attempt, None, None)
    else:
        state = ex.mw.routing
        headers = ex.client_headers()
        session = session_of(ex.client, headers, body, client_credential(headers))
        cooled = await _cooled(state, plan.names(model))
        bound = await state.bound(session) if session is not None else None
        race = Race(ex, plan.targets(model, cooled, bound, session), attempt, state, session)
        race.bound = bound
    ex.routing = race.record
    race.metrics = ex.mw.accounting.metrics
    started = time.perf_counter()
    try:
        await race.run()
    finally:
        if race.record.count > 1:
            logger.info(
                "proxai_asgi routed: attempts=%d served_by=%s failures=%s in %.1f ms",
                race.record.count,
                loggable(race.winner.upstream.label) if race.winner else "-",
                ",".join(race.record.failures) or "-",
                (time.perf_counter() - started) * 1000,
            )
