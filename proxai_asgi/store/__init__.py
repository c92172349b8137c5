"""Where stored Responses answers live: in memory (the default), a SQLite file, or
Redis shared by several instances. ``open_store`` turns a configuration value into
one."""

from __future__ import annotations

from typing import Any

from .base import DEFAULT_TTL, ResponseStore, StoredResponse, StoreUnavailable
from .memory import MemoryStore

__all__ = ["MemoryStore", "ResponseStore", "StoreUnavailable", "StoredResponse", "open_store"]


def open_store(
    spec: str | ResponseStore | None,
    *,
    ttl: float | None = None,
    max_entries: int | None = None,
    max_bytes: int | None = None,
    prefix: str | None = None,
) -> ResponseStore | None:
    """``None``/``"memory"``: the embedded store; ``"sqlite:///path"``: a SQLite file
    (``sqlite:////abs/path`` for an absolute one); ``"redis://host:port/db"`` (or
    ``rediss://``): Redis; ``"off"``: no store; a store object is used as it is.
    The options left None keep each backend's defaults (``max_bytes``: memory only,
    ``prefix``: Redis only)."""
    options: dict[str, Any] = {"ttl": ttl, "max_entries": max_entries}
    options = {k: v for k, v in options.items() if v is not None}
    if spec is None or spec == "memory":
        if max_bytes is not None:
            options["max_bytes"] = max_bytes
        return MemoryStore(**options)
    if not isinstance(spec, str):
        return spec
    if spec == "off":
        return None
    if spec.startswith("sqlite:///"):
        from .sqlite import SQLiteStore

        return SQLiteStore(spec[len("sqlite:///") :] or ":memory:", **options)
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from .redis import DEFAULT_PREFIX, RedisStore

        # Redis bounds by TTL (and its maxmemory policy), not by entries.
        return RedisStore(spec, ttl=ttl or DEFAULT_TTL, prefix=prefix or DEFAULT_PREFIX)
    raise ValueError(
        f"store must be 'memory', 'off', 'sqlite:///path' or 'redis://host:port/db', got {spec!r}"
    )
