"""Where stored Responses answers live: in memory (the default), a SQLite file, or
Redis shared by several instances. ``open_store`` turns a configuration value into
one."""

from __future__ import annotations

from .base import ResponseStore, StoredResponse, StoreUnavailable
from .memory import MemoryStore

__all__ = ["MemoryStore", "ResponseStore", "StoreUnavailable", "StoredResponse", "open_store"]


def open_store(spec: str | ResponseStore | None) -> ResponseStore | None:
    """``None``/``"memory"``: the embedded store; ``"sqlite:///path"``: a SQLite file;
    ``"redis://host:port/db"`` (or ``rediss://``): Redis; ``"off"``: no store; a
    store object is used as it is."""
    if spec is None or spec == "memory":
        return MemoryStore()
    if not isinstance(spec, str):
        return spec
    if spec == "off":
        return None
    if spec.startswith("sqlite:///"):
        from .sqlite import SQLiteStore

        return SQLiteStore(spec[len("sqlite:///") :] or ":memory:")
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from .redis import RedisStore

        return RedisStore(spec)
    raise ValueError(
        f"store must be 'memory', 'off', 'sqlite:///path' or 'redis://host:port/db', got {spec!r}"
    )
