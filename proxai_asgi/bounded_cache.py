"""The one cache type for every table kept between requests (issue 26 §6).

A process serves many tenants, so a table that outlives a request is shared by them all.
Each is therefore:

- keyed by the exact content it stands for (the bytes or string itself, or an object
  whose ``==`` compares the whole content): a hash only picks a dict slot, so two
  contents never share an entry, and an entry found is always the one made of these
  bytes;
- bounded by bytes as well as count: every entry's key and value are counted (plus a
  fixed overhead), an entry larger than ``max_item_bytes`` is not kept at all, and the
  whole never holds more than ``max_bytes``;
- least recently used first out, by generations: entries are put into a young
  generation; when it is full it becomes the old one and the previous old one is
  dropped. A hit in the old generation moves the entry back into the young one, so what
  is dropped was used less recently than anything kept. A hit in the young generation
  costs one C-level dict look-up (``recent``), which the hot paths need: an agent loop
  looks up every earlier call of its conversation on every turn;
- thread-safe: every change (put, promotion, eviction) runs under a lock; a look-up
  reads one dict entry, always the value made of that key's content, whichever
  generation it finds it in.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar, cast, overload

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")
_D = TypeVar("_D")
_KC = TypeVar("_KC", contravariant=True)
_VC = TypeVar("_VC", covariant=True)


class Lookup(Protocol[_KC, _VC]):
    """``dict.get``'s signature."""

    @overload
    def __call__(self, key: _KC, /) -> _VC | None: ...

    @overload
    def __call__(self, key: _KC, default: _D, /) -> _VC | _D: ...


# What a dict entry, its key's and its value's object headers cost beyond their contents.
ENTRY_OVERHEAD = 100

_ABSENT: Any = object()

_CACHES: weakref.WeakSet[BoundedCache[Any, Any]] = weakref.WeakSet()


def _getter(table: dict[_K, _V]) -> Lookup[_K, _V]:
    return cast("Lookup[_K, _V]", table.get)  # (its overloads, spelt as ``Lookup``'s)


def content_size(obj: object) -> int:
    """Bytes held by a str, bytes or ``msgspec.Raw`` (its buffer), else 0."""
    if type(obj) is str or type(obj) is bytes:
        return sys.getsizeof(obj)
    try:
        return len(obj)  # type: ignore[arg-type]  # (a Raw's own getsizeof is not its size)
    except TypeError:
        return 0


def _sizes(key: object, value: object) -> int:
    return content_size(key) + content_size(value)


class BoundedCache(Generic[_K, _V]):
    """A table of ``key -> value`` where the value is a function of the key's content.

    ``size(key, value)`` tells the bytes an entry holds (default: those of a str, bytes
    or Raw key and value); ``ENTRY_OVERHEAD`` is added to it."""

    __slots__ = (
        "__weakref__",
        "_lock",
        "_old",
        "_old_bytes",
        "_size",
        "_young",
        "_young_bytes",
        "max_bytes",
        "max_entries",
        "max_item_bytes",
        "recent",
    )

    def __init__(
        self,
        *,
        max_bytes: int,
        max_entries: int,
        max_item_bytes: int | None = None,
        size: Callable[[_K, _V], int] = _sizes,
    ) -> None:
        if max_entries < 2 or max_bytes < 2:
            raise ValueError("a BoundedCache holds two generations: bounds of 2 at least")
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        # (each generation holds half: an entry must fit in one)
        self.max_item_bytes = min(max_item_bytes or max_bytes, max_bytes // 2)
        self._size = size
        self._lock = threading.Lock()
        self._young: dict[_K, _V] = {}
        self._old: dict[_K, _V] = {}
        self._young_bytes = self._old_bytes = 0
        # The young generation's ``dict.get``, rebound when it changes: a hot path's hit
        # without a Python frame. A miss (``None``, or the default) is not an answer:
        # ``get`` looks in the old generation too.
        self.recent: Lookup[_K, _V] = _getter(self._young)
        _CACHES.add(self)

    def size_of(self, key: _K, value: _V) -> int:
        """The bytes an entry of ``key`` and ``value`` counts for."""
        return self._size(key, value) + ENTRY_OVERHEAD

    @overload
    def get(self, key: _K) -> _V | None: ...

    @overload
    def get(self, key: _K, default: _D) -> _V | _D: ...

    def get(self, key: _K, default: Any = None) -> Any:
        """The value kept for ``key`` (moved to the young generation), or ``default``."""
        value = self._young.get(key, _ABSENT)
        if value is not _ABSENT:
            return value
        if key not in self._old:
            return default
        with self._lock:
            value = self._old.pop(key, _ABSENT)
            if value is _ABSENT:  # (another thread moved or dropped it meanwhile)
                return self._young.get(key, default)
            size = self.size_of(key, value)
            self._old_bytes -= size
            self._admit(key, value, size)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._young or key in self._old

    def put(self, key: _K, value: _V) -> bool:
        """Keep ``value`` for ``key`` (which must hold bytes of its own, never a view
        into a request's body); False when the entry is too large to keep."""
        size = self.size_of(key, value)
        if size > self.max_item_bytes:
            return False
        with self._lock:
            if key in self._young:  # (the same content: the same value)
                return True
            self._drop_old(key)
            self._admit(key, value, size)
        return True

    @overload
    def pop(self, key: _K) -> _V | None: ...

    @overload
    def pop(self, key: _K, default: _D) -> _V | _D: ...

    def pop(self, key: _K, default: Any = None) -> Any:
        """Take the entry of ``key`` out: its value, or ``default``."""
        with self._lock:
            value = self._young.pop(key, _ABSENT)
            if value is not _ABSENT:
                self._young_bytes -= self.size_of(key, value)
                return value
            value = self._old.pop(key, _ABSENT)
            if value is not _ABSENT:
                self._old_bytes -= self.size_of(key, value)
                return value
        return default

    def seen_before(self, key: _K) -> bool:
        """Whether ``key`` was noted (and takes the note back), or notes it: for a
        table that keeps what comes a second time. A key too large to note is never
        seen (nor kept)."""
        size = self.size_of(key, None)  # type: ignore[arg-type]
        if size > self.max_item_bytes:
            return False
        with self._lock:
            if self._young.pop(key, _ABSENT) is not _ABSENT:
                self._young_bytes -= size
                return True
            if self._drop_old(key):
                return True
            self._admit(key, None, size)  # type: ignore[arg-type]
        return False

    def _drop_old(self, key: _K) -> bool:
        value = self._old.pop(key, _ABSENT)
        if value is _ABSENT:
            return False
        self._old_bytes -= self.size_of(key, value)
        return True

    def _admit(self, key: _K, value: _V, size: int) -> None:
        """Put into the young generation (under the lock), turning it old when full."""
        young = self._young
        if self._young_bytes + size > self.max_bytes // 2 or len(young) >= self.max_entries // 2:
            self._old, self._old_bytes = young, self._young_bytes
            young = self._young = {}
            self._young_bytes = 0
            self.recent = _getter(young)
        young[key] = value
        self._young_bytes += size

    def clear(self) -> None:
        with self._lock:
            self._young = {}
            self._old = {}
            self._young_bytes = self._old_bytes = 0
            self.recent = _getter(self._young)

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def items(self) -> list[tuple[_K, _V]]:
        """Its entries, least recently used first (a copy)."""
        with self._lock:
            return [*self._old.items(), *self._young.items()]

    @property
    def nbytes(self) -> int:
        """The bytes its entries count for (never more than ``max_bytes``)."""
        return self._young_bytes + self._old_bytes


def clear_all() -> None:
    """Empty every cache of the process (a first request's cost, for the benchmarks)."""
    for cache in list(_CACHES):
        cache.clear()
