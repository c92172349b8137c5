"""Tool declarations, which an agent loop resends unchanged with every request, kept
encoded.

Decoding every tool's JSON schema into dicts and encoding it again toward the upstream
cost ~3.7 µs of a 14 KB request and held ~0.28x its size in dicts (issue 16 §3); real
tool sets are larger. So a client decoder looks a tool declaration up by its bytes
(``ToolLookup``) and reuses the canonical tools it made from them the first time, whose
``parameters`` hold the schema encoded once (``compact``): exactly
``encode(decode(schema))``, the bytes an encoder writes for the dict, which the
encoders now write as they are. ``facts`` tells an encoder what it would have read in
the dict. Every look-up is bounded, keyed by content, and holds only bytes of its own
(never a view into a request body).
"""

from __future__ import annotations

import threading
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import msgspec

from . import canonical as c

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()
_RAW = msgspec.Raw
_V = TypeVar("_V")
_copy = msgspec.structs.replace  # (a third of ``copy.copy``'s time)

# Bounds of each look-up: cleared when one more entry would pass either.
MAX_ENTRIES = 512
MAX_BYTES = 2 << 20  # of keys; the values are about as large
MAX_KEY_BYTES = 256 << 10  # larger declarations are converted every time


def compact(schema: dict[str, Any]) -> msgspec.Raw:
    """``schema`` encoded, as every encoder writes it."""
    return _RAW(_encoder.encode(schema))


class SchemaFacts(NamedTuple):
    """What an encoder reads of an encoded schema."""

    # As Anthropic takes it ("type": "object" added when it has no "type"); None when
    # its "type" is another, which Anthropic refuses.
    anthropic: msgspec.Raw | None
    empty: bool  # ``{}``, which the Responses encoder replaces with an empty object schema
    text_length: int  # ``len(str(schema or ""))``, which ``tokens`` counts


def _facts_of(schema: dict[str, Any]) -> SchemaFacts:
    if "type" not in schema:
        anthropic: msgspec.Raw | None = compact({"type": "object", **schema})
    elif schema["type"] == "object":
        anthropic = compact(schema)
    else:
        anthropic = None
    # (an empty schema counted as no schema, as ``tokens`` always has)
    return SchemaFacts(anthropic=anthropic, empty=not schema, text_length=len(str(schema or "")))


class _Bounded(Generic[_V]):
    """A content-keyed look-up, cleared when one more entry would pass its bounds."""

    __slots__ = ("_bytes", "_entries")

    def __init__(self) -> None:
        self._entries: dict[bytes, _V] = {}
        self._bytes = 0
        _LOOKUPS.append(self)

    def _remember(self, key: bytes, value: _V) -> None:
        if len(key) > MAX_KEY_BYTES:
            return
        if len(self._entries) >= MAX_ENTRIES or self._bytes + len(key) > MAX_BYTES:
            self.clear()
        self._entries[key] = value
        self._bytes += len(key)

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


class _Clearable(Protocol):
    def clear(self) -> None: ...

    def __len__(self) -> int: ...


_LOOKUPS: list[_Clearable] = []  # every one, for ``forget``


class _FactsLookup(_Bounded[SchemaFacts]):
    __slots__ = ()

    def get(self, schema: msgspec.Raw) -> SchemaFacts:
        key = bytes(schema)
        found = self._entries.get(key)
        if found is None:
            found = _facts_of(_decoder.decode(key))
            self._remember(key, found)
        return found


_FACTS = _FactsLookup()
facts = _FACTS.get  # the facts of an encoded schema, computed once per content


# How a schema whose "type" is "object", written first, starts (the usual one): as
# Anthropic takes it already, told without hashing the whole schema for ``facts``.
_OBJECT_FIRST = b'{"type":"object"'


def anthropic_form(schema: msgspec.Raw) -> msgspec.Raw | None:
    """``facts(schema).anthropic``, cheaply for the usual schema."""
    if memoryview(schema)[: len(_OBJECT_FIRST)] == _OBJECT_FIRST:
        return schema
    return facts(schema).anthropic


def encoded(tool: c.Tool) -> c.Tool:
    """A copy of ``tool``, its schema held encoded."""
    p = tool.parameters
    return _copy(tool, parameters=compact(p) if type(p) is dict else p)


class NotAnObject(ValueError):
    """A schema that is neither an object nor null: the decoder's general path names it."""


class SchemaLookup(_Bounded["msgspec.Raw | None"]):
    """Schema bytes as a client sent them -> the schema as ``compact`` holds it (for a
    decoder that reads the rest of a declaration itself)."""

    __slots__ = ()

    def get(self, raw: msgspec.Raw) -> msgspec.Raw | None:
        """``raw`` compact (None for ``null``); ``NotAnObject`` for any other value."""
        key = bytes(raw)
        try:
            return self._entries[key]
        except KeyError:
            pass
        schema = _decoder.decode(key)
        if schema is not None and type(schema) is not dict:
            raise NotAnObject
        made = None if schema is None else compact(schema)
        self._remember(key, made)
        return made


class Lookup(_Bounded[_V]):
    """Declaration bytes -> what a decoder made of them, shared by every request that
    sends those bytes (so never changed once put)."""

    __slots__ = ()

    def get(self, key: bytes) -> _V | None:
        return self._entries.get(key)

    def put(self, key: bytes, value: _V) -> None:
        """Remember ``value`` for ``key`` (which must be bytes of its own)."""
        self._remember(key, value)


class ToolLookup(_Bounded[tuple[c.Tool, ...]]):
    """Declaration bytes -> the canonical tools a decoder made of them (with their
    schemas encoded). Each hit gives copies, as a request may change its own tools (a
    custom tool's ``format`` dict is shared: nothing changes it).

    ``on_second_sighting``: a set is kept only when its bytes come a second time. The
    copies with schemas encoded cost half again the decode of the tools; a first
    request (a process's, or a set a client never sent here before) then pays only a
    note of its bytes, and a set sent once is never encoded for nothing."""

    __slots__ = ("_seen",)

    def __init__(self, *, on_second_sighting: bool = False) -> None:
        super().__init__()
        # keys seen once, when kept on the second sighting: bounded as the entries
        self._seen: _Seen | None = _Seen() if on_second_sighting else None

    def get(self, key: bytes) -> list[c.Tool] | None:
        made = self._entries.get(key)
        if made is None:
            return None
        return [_copy(t) for t in made]

    def put(self, key: bytes, tools: list[c.Tool]) -> None:
        """Remember the tools made of ``key`` (which must be bytes of its own)."""
        if self._seen is None or self._seen.seen_again(key):
            self._remember(key, tuple(encoded(t) for t in tools))

    def clear(self) -> None:
        super().clear()
        if self._seen is not None:
            self._seen.clear()


class _Seen(_Bounded[None]):
    """Keys seen once (their bytes only, bounded as every look-up)."""

    __slots__ = ()

    def seen_again(self, key: bytes) -> bool:
        """Whether ``key`` was noted before (and is no longer); notes it when not."""
        if self._entries.pop(key, _ABSENT) is not _ABSENT:  # (one step: threads may race)
            self._bytes -= len(key)
            return True
        self._remember(key, None)
        return False


_ABSENT = object()


_SetKey = tuple[int, str, str]
_SET_BUCKET = 4  # sets kept under one key (alike in size, first and last name)


class SetLookup(Generic[_V]):
    """A whole tool set -> what an encoder made of it (its upstream form, written once),
    for an encoder, which receives canonical tools rather than bytes.

    Keyed by content: the set's size and first and last names find a few entries, each
    holding a copy of the tools it was made of, used only when they equal the request's
    field for field (``==`` on the Structs: a key of every field cost twice as much).
    Only ``keepable`` sets are kept; their schemas are ``Raw.copy()``s, the request's
    own when they own their bytes (as the decoders' look-ups hold them), so an entry
    never holds a view into a body.

    A set is made into an entry once the same tools are seen again (``second_sight``):
    the first time only its key is noted, the next a copy of the tools, so that a
    conversation's first request (and ``--cold``) pays one set insert, and a set that
    changes with every request (a date in a description) is never made into an entry.
    Bounded as the other look-ups (the notes too), by the size the caller gives; a set
    too large to keep is noted as such and not made again."""

    __slots__ = ("_bytes", "_count", "_entries", "_lock", "_noted", "_noted_bytes")

    def __init__(self) -> None:
        self._entries: dict[_SetKey, list[tuple[list[c.Tool], _V]]] = {}
        # Held by the slow paths (noting, making an entry): two threads translating at
        # once must not pop each other's notes. ``get`` reads whole (tools, value) pairs.
        self._lock = threading.Lock()
        # the tools last seen under a key seen before (a few), and whether each may be kept
        self._noted: dict[_SetKey, list[tuple[list[c.Tool], bool]]] = {}
        self._bytes = self._count = self._noted_bytes = 0
        _LOOKUPS.append(self)

    def get(self, tools: list[c.Tool]) -> _V | None:
        for kept, value in self._entries.get((len(tools), tools[0].name, tools[-1].name), ()):
            if kept == tools:
                return value
        return None

    def second_sight(self, tools: list[c.Tool]) -> bool:
        """Whether these tools (``keepable``) were seen before, and may be kept; if they
        were not, their key, or if it was, they are noted for next time."""
        with self._lock:
            return self._second_sight(tools)

    def _second_sight(self, tools: list[c.Tool]) -> bool:
        key = (len(tools), tools[0].name, tools[-1].name)
        bucket = self._noted.get(key)
        if bucket is None:  # (the key, first)
            if len(self._noted) >= MAX_ENTRIES:
                self._noted.clear()
                self._noted_bytes = 0
            self._noted[key] = []
            return False
        for noted, may in bucket:
            if noted == tools:
                return may
        size = _note_size(tools)
        if size > MAX_KEY_BYTES:
            return False
        if self._noted_bytes + size > MAX_BYTES:
            self._noted.clear()
            self._noted_bytes = 0
            bucket = self._noted[key] = []
        elif len(bucket) >= _SET_BUCKET:
            self._noted_bytes -= _note_size(bucket.pop(0)[0])
        bucket.append((_kept(tools), True))
        self._noted_bytes += size
        return False

    def put(self, tools: list[c.Tool], value: _V, size: int) -> None:
        """Remember ``value`` for ``tools`` (seen twice: ``second_sight``); ``size``:
        about how many bytes the entry holds."""
        with self._lock:
            self._put(tools, value, size)

    def _put(self, tools: list[c.Tool], value: _V, size: int) -> None:
        key = (len(tools), tools[0].name, tools[-1].name)
        notes = self._noted.setdefault(key, [])
        at = next((i for i, (noted, _) in enumerate(notes) if noted == tools), None)
        if at is None:
            kept = _kept(tools)
        else:
            kept = notes.pop(at)[0]
            self._noted_bytes -= _note_size(kept)
        if size > MAX_KEY_BYTES:
            notes.append((kept, False))  # (not made again while noted)
            self._noted_bytes += _note_size(kept)
            return
        if not notes:
            del self._noted[key]
        if self._count >= MAX_ENTRIES or self._bytes + size > MAX_BYTES:
            self._entries.clear()
            self._bytes = self._count = 0
        bucket = self._entries.setdefault(key, [])
        if len(bucket) >= _SET_BUCKET:
            del bucket[0]
            self._count -= 1
        bucket.append((kept, value))
        self._bytes += size
        self._count += 1

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._noted.clear()
            self._bytes = self._count = self._noted_bytes = 0

    def __len__(self) -> int:
        """How many entries it holds (the notes are not entries)."""
        return self._count


def _note_size(tools: list[c.Tool]) -> int:
    """About how many bytes a noted copy of ``tools`` holds (schemas and descriptions)."""
    size = 0
    for t in tools:
        size += len(t.parameters or b"") + len(t.description or "")
    return size


def _kept(tools: list[c.Tool]) -> list[c.Tool]:
    """Copies of ``tools`` (encoded schemas) holding nothing of a request's body."""
    return [_copy(t, parameters=t.parameters.copy()) for t in tools]  # type: ignore[union-attr]


def keepable(tools: list[c.Tool]) -> bool:
    """Whether ``SetLookup`` keeps ``tools``: function tools, each schema encoded, none
    marked ``cache_control`` (nor with a ``format``, which only custom tools have)."""
    for t in tools:
        if not (
            t.kind == "function"
            and type(t.parameters) is _RAW
            and t.cache_control is None
            and t.format is None
        ):
            return False
    return True


def forget() -> None:
    """Empty every look-up (a first request's cost, for ``bench/long_conversations.py``)."""
    for lookup in _LOOKUPS:
        lookup.clear()


def entries() -> int:
    """How many entries the look-ups hold in all."""
    return sum(len(lookup) for lookup in _LOOKUPS)
