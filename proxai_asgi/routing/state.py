"""Where the routing state lives, chosen by the same ``store=`` value as the stored
Responses: one engine for every piece of shared state."""

from __future__ import annotations

from ..store import ResponseStore
from ..store.redis import RedisStore
from .health import MemoryRoutingState, RoutingState
from .shared_redis import DEFAULT_PREFIX, DEFAULT_TIMEOUT, RedisRoutingState


def open_routing_state(
    store: str | ResponseStore | None,
    *,
    prefix: str = DEFAULT_PREFIX,
    timeout: float = DEFAULT_TIMEOUT,
) -> RoutingState:
    """The routing state for ``store``:

    - ``None``, ``"memory"``, ``"off"``, ``"sqlite:///path"``, or a store object other
      than Redis: this process's memory. (A SQLite file shares stored responses
      across workers, not routing state: each worker keeps its own cooldowns and
      bindings.)
    - ``"redis://..."`` (``rediss://``, ``unix://``): Redis, on a client of its own.
    - an opened ``RedisStore`` (what ``open_store`` made of a Redis URL): Redis, on
      the store's own client, so both share one connection pool (closing the routing
      state leaves the client to the store).
    """
    if store is None:
        return MemoryRoutingState()
    if isinstance(store, str):
        if store in ("memory", "off") or store.startswith("sqlite:///"):
            return MemoryRoutingState()
        if not store.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                "store must be 'memory', 'off', 'sqlite:///path' or 'redis://host:port/db', "
                f"got {store!r}"
            )
        return RedisRoutingState(store, prefix=prefix, timeout=timeout)
    if isinstance(store, RedisStore):
        return RedisRoutingState(store.url, client=store.redis, prefix=prefix, timeout=timeout)
    return MemoryRoutingState()
