"""Dropped-field names as label values, bounded.

A translation reports what it dropped by name: mostly the codecs' own field names
("top_k", "tools.web_search", "parts.videoMetadata"), but an unknown top-level key a
client sent is reported under the client's own spelling, and a client can make up any
number of those. A name is kept only when every part of it (split at dots and spaces)
is a name the codecs know — a field or wire name of one of their msgspec Structs, or a
tag of a tagged union — and at most ``MAX_NAMES`` distinct names are kept per process;
anything else is ``other``.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import threading

import msgspec

OTHER = "other"
MAX_NAMES = 256
MAX_LENGTH = 80
_PARTS = re.compile(r"[. ]")


def _vocabulary() -> frozenset[str]:
    """Every field name, wire name and tag of the codecs' and the canonical Structs."""
    from .. import canonical, protocols

    modules = [canonical]
    for info in pkgutil.walk_packages(protocols.__path__, protocols.__name__ + "."):
        modules.append(importlib.import_module(info.name))
    names: set[str] = set()
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, msgspec.Struct):
                for f in msgspec.structs.fields(value):
                    names.add(f.name)
                    names.add(f.encode_name)
                tag = value.__struct_config__.tag
                if isinstance(tag, str):
                    names.add(tag)
    return frozenset(names)


class FieldNames:
    """What ``bounded`` has admitted so far; the vocabulary is read on first use."""

    def __init__(self) -> None:
        self._known: frozenset[str] | None = None
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def bounded(self, name: str) -> str:
        if name in self._seen:
            return name
        if len(name) > MAX_LENGTH or len(self._seen) >= MAX_NAMES:
            return OTHER
        known = self._known
        if known is None:
            with self._lock:
                if self._known is None:
                    self._known = _vocabulary()
                known = self._known
        if not all(part in known for part in _PARTS.split(name) if part):
            return OTHER
        self._seen.add(name)
        return name
