"""What routing remembers between requests: which targets and keys are cooled down,
which one may be probed again, and which target each session is bound to.

``RoutingState`` is the interface the attempt loop calls; ``MemoryRoutingState`` keeps
it for one process (``shared_redis.RedisRoutingState`` for several). Names (a target,
a key) and sessions are opaque strings the caller builds; sessions arrive hashed.

A name's life: ``cool`` puts it in a cooldown (only ever lengthened), during which
``cooled`` reports the seconds left. When the cooldown lapses the failure is still
remembered (as long again as the cooldown, a minute at least): ``cooled`` reports 0.0,
meaning "failing, not cooled": one caller at a time wins ``claim_probe`` and tries it,
the others keep avoiding it. A success (``recovered``) forgets it; a failed probe cools
it again, and ``cool`` returns how many cooldowns in a row it has had (to lengthen
them). After the remembered period it counts as healthy again without a probe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from ..bounded_cache import BoundedCache, content_size

# A lapsed cooldown is remembered (probe first) this long at least.
MIN_PROBATION = 60.0
DEFAULT_MAX_BYTES = 16 * 1024 * 1024  # bindings: ~50k sessions
DEFAULT_MAX_ENTRIES = 100_000
# Names come from the configuration (targets, keys): few, but bounded all the same.
HEALTH_MAX_BYTES = 1024 * 1024
HEALTH_MAX_ENTRIES = 10_000


class RoutingState(Protocol):
    async def cooled(self, names: Sequence[str]) -> dict[str, float]:
        """Of ``names``, those failing now -> the seconds their cooldown has left
        (0.0: lapsed but not recovered: probe it or avoid it). One round trip."""
        ...

    async def cool(self, name: str, seconds: float) -> int:
        """Cooled for at least ``seconds`` from now (a longer cooldown is kept).
        Returns its cooldowns in a row since it last recovered, this one included
        (failures during a cooldown do not count again)."""
        ...

    async def recovered(self, name: str) -> None:
        """A success: forget its cooldown and its failures. Cheap for a name not
        failing (no round trip for one this process has not seen failing)."""
        ...

    async def claim_probe(self, name: str, seconds: float) -> bool:
        """May this caller try ``name`` now? False while it is cooled down; once the
        cooldown lapsed, True for one caller per ``seconds`` (on every instance);
        True when it is not failing at all."""
        ...

    async def bound(self, session: str) -> str | None:
        """The target ``session`` is bound to (its time to live renewed), or None."""
        ...

    async def bind(self, session: str, target: str, ttl: float) -> None:
        """Bind ``session`` to ``target`` for ``ttl`` seconds, renewed on each use."""
        ...

    async def aclose(self) -> None: ...


def probation(seconds: float) -> float:
    """How long a failure is remembered once its cooldown of ``seconds`` lapsed."""
    return max(seconds, MIN_PROBATION)


class _Health:
    """A failing name. Mutated in place under the state's lock (its size is fixed)."""

    __slots__ = ("forget_at", "probe_until", "streak", "until")

    def __init__(self, until: float, streak: int, forget_at: float) -> None:
        self.until = until  # cooled down until then
        self.streak = streak  # cooldowns in a row
        self.forget_at = forget_at  # healthy again from then, probed or not
        self.probe_until = 0.0  # a probe claimed until then


class _Binding:
    __slots__ = ("expires", "target", "ttl")

    def __init__(self, target: str, ttl: float, expires: float) -> None:
        self.target = target
        self.ttl = ttl
        self.expires = expires


def _health_size(name: str, _: _Health) -> int:
    return content_size(name) + 64


def _binding_size(session: str, binding: _Binding) -> int:
    return content_size(session) + content_size(binding.target) + 64


class MemoryRoutingState:
    """The routing state of one process, bounded by bytes (``BoundedCache``), on
    ``clock`` (monotonic seconds). Thread-safe: every change runs under a lock."""

    def __init__(
        self,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self._lock = threading.RLock()  # (a change may drop a lapsed entry on its way)
        self._health: BoundedCache[str, _Health] = BoundedCache(
            max_bytes=HEALTH_MAX_BYTES, max_entries=HEALTH_MAX_ENTRIES, size=_health_size
        )
        self._bindings: BoundedCache[str, _Binding] = BoundedCache(
            max_bytes=max_bytes, max_entries=max_entries, size=_binding_size
        )

    def _failing(self, name: str, now: float) -> _Health | None:
        health = self._health.get(name)
        if health is not None and health.forget_at <= now:
            with self._lock:
                if self._health.recent(name) is health:  # (not renewed meanwhile)
                    self._health.pop(name)
            return None
        return health

    async def cooled(self, names: Sequence[str]) -> dict[str, float]:
        if not len(self._health):  # (the healthy path: nothing failing anywhere)
            return {}
        now = self.clock()
        found: dict[str, float] = {}
        for name in names:
            health = self._failing(name, now)
            if health is not None:
                found[name] = max(health.until - now, 0.0)
        return found

    async def cool(self, name: str, seconds: float) -> int:
        return self.learn(name, seconds, count=True)

    def learn(self, name: str, seconds: float, *, count: bool) -> int:
        """``cool``; with ``count=False`` a cooldown learned elsewhere (another
        instance's), which does not add to the failures in a row."""
        with self._lock:
            now = self.clock()
            until = now + max(seconds, 0.0)
            health = self._failing(name, now)
            if health is None:
                health = _Health(until, 1, until + probation(seconds))
                self._health.pop(name)
                self._health.put(name, health)
                return 1
            if count and health.until <= now:
                health.streak += 1
            health.until = max(health.until, until)
            health.forget_at = max(health.forget_at, health.until + probation(seconds))
            if count:
                health.probe_until = 0.0  # (a probe that failed is over)
            return health.streak

    def knows(self, name: str) -> bool:
        """Whether ``name`` has been failing (lately: entries are dropped lazily)."""
        return name in self._health

    async def recovered(self, name: str) -> None:
        if name in self._health:
            with self._lock:
                self._health.pop(name)

    async def claim_probe(self, name: str, seconds: float) -> bool:
        with self._lock:
            now = self.clock()
            health = self._failing(name, now)
            if health is None:
                return True
            if health.until > now or health.probe_until > now:
                return False
            health.probe_until = now + seconds
            return True

    async def bound(self, session: str) -> str | None:
        binding = self._bindings.get(session)
        if binding is None:
            return None
        now = self.clock()
        if binding.expires <= now:
            return None
        binding.expires = now + binding.ttl
        return binding.target

    async def bind(self, session: str, target: str, ttl: float) -> None:
        with self._lock:
            expires = self.clock() + ttl
            binding = self._bindings.get(session)
            if binding is not None and binding.target == target:
                binding.ttl, binding.expires = ttl, expires
                return
            self._bindings.pop(session)
            self._bindings.put(session, _Binding(target, ttl, expires))

    async def aclose(self) -> None:
        with self._lock:
            self._health.clear()
            self._bindings.clear()
