"""Tool declarations, which an agent loop resends unchanged with every request, kept
encoded.

Decoding every tool's JSON schema into dicts and encoding it again toward the upstream
cost ~3.7 µs of a 14 KB request and held ~0.28x its size in dicts (issue 16 §3); real
tool sets are larger. So a client decoder looks a tool declaration up by its bytes
(``ToolLookup``) and reuses the canonical tools it made from them the first time, whose
``parameters`` hold the schema encoded once (``compact``): exactly
``encode(decode(schema))``, the bytes an encoder writes for the dict, which the
encoders now write as they are. ``facts`` tells an encoder what it would have read in
the dict. Every look-up is a ``bounded_cache.BoundedCache`` (bounded by bytes, keyed by
exact content, thread-safe), and holds only bytes of its own (never a view into a
request body).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import msgspec

from ... import canonical as c
from ...bounded_cache import BoundedCache

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()
_RAW = msgspec.Raw
_V = TypeVar("_V")
_copy = msgspec.structs.replace  # (a third of ``copy.copy``'s time)

# Bounds of each look-up (``bounded_cache``: keys and values counted).
MAX_ENTRIES = 1024
MAX_BYTES = 4 << 20
MAX_ITEM_BYTES = 1 << 20  # larger declarations are converted every time


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


class _Clearable(Protocol):
    def clear(self) -> None: ...

    def __len__(self) -> int: ...


_LOOKUPS: list[_Clearable] = []  # every one, for ``forget``


def _cache(size: Callable[[Any, Any], int]) -> BoundedCache[Any, Any]:
    """A look-up's table (``bounded_cache``), within the bounds every look-up has."""
    return BoundedCache(
        max_bytes=MAX_BYTES, max_entries=MAX_ENTRIES, max_item_bytes=MAX_ITEM_BYTES, size=size
    )


def tools_size(tools: Iterable[c.Tool]) -> int:
    """About how many bytes tools hold (their strings, schemas and objects)."""
    size = 0
    for t in tools:
        p = t.parameters
        size += _TOOL_OVERHEAD + len(t.name) + len(t.description or "")
        size += len(p) if type(p) is _RAW else 0 if p is None else len(str(p))
    return size


_TOOL_OVERHEAD = 200  # a Tool Struct and its strings' headers


class _Table:
    """A look-up over one ``BoundedCache``, emptied by ``forget``."""

    __slots__ = ("_cache",)

    def __init__(self, size: Callable[[Any, Any], int]) -> None:
        self._cache = _cache(size)
        _LOOKUPS.append(self)

    def clear(self) -> None:
        self._cache.clear()

    def __len__(self) -> int:
        return len(self._cache)

    @property
    def nbytes(self) -> int:
        return self._cache.nbytes


def _facts_size(key: bytes, value: SchemaFacts) -> int:
    return len(key) + len(value.anthropic or b"")


class _FactsLookup(_Table):
    __slots__ = ()

    def get(self, schema: msgspec.Raw) -> SchemaFacts:
        key = bytes(schema)
        found: SchemaFacts | None = self._cache.get(key)
        if found is None:
            found = _facts_of(_decoder.decode(key))
            self._cache.put(key, found)
        return found


_FACTS = _FactsLookup(_facts_size)
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


def _raw_sizes(key: bytes, value: msgspec.Raw | None) -> int:
    return len(key) + len(value or b"")


class SchemaLookup(_Table):
    """Schema bytes as a client sent them -> the schema as ``compact`` holds it (for a
    decoder that reads the rest of a declaration itself)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(_raw_sizes)

    def get(self, raw: msgspec.Raw) -> msgspec.Raw | None:
        """``raw`` compact (None for ``null``); ``NotAnObject`` for any other value."""
        key = bytes(raw)
        made: msgspec.Raw | None = self._cache.get(key, _ABSENT)
        if made is not _ABSENT:
            return made
        schema = _decoder.decode(key)
        if schema is not None and type(schema) is not dict:
            raise NotAnObject
        made = None if schema is None else compact(schema)
        self._cache.put(key, made)
        return made


class Lookup(_Table, Generic[_V]):
    """Declaration bytes -> what a decoder made of them, shared by every request that
    sends those bytes (so never changed once put); ``size(key, value)``: about how many
    bytes an entry holds."""

    __slots__ = ()

    def get(self, key: bytes) -> _V | None:
        found: _V | None = self._cache.get(key)
        return found

    def put(self, key: bytes, value: _V) -> bool:
        """Remember ``value`` for ``key`` (which must be bytes of its own); False when
        the entry is too large to keep."""
        return self._cache.put(key, value)


def _declarations_size(key: bytes, tools: tuple[c.Tool, ...]) -> int:
    return len(key) + tools_size(tools)


class ToolLookup(_Table):
    """Declaration bytes -> the canonical tools a decoder made of them (with their
    schemas encoded). Each hit gives copies, as a request may change its own tools (a
    custom tool's ``format`` dict is shared: nothing changes it).

    ``on_second_sighting``: a set is kept only when its bytes come a second time. The
    copies with schemas encoded cost half again the decode of the tools; a first
    request (a process's, or a set a client never sent here before) then pays only a
    note of its bytes, and a set sent once is never encoded for nothing."""

    __slots__ = ("_seen",)

    def __init__(self, *, on_second_sighting: bool = False) -> None:
        super().__init__(_declarations_size)
        # keys seen once, when kept on the second sighting: bounded as the entries
        self._seen: BoundedCache[bytes, None] | None = (
            _cache(_key_size) if on_second_sighting else None
        )

    def get(self, key: bytes) -> list[c.Tool] | None:
        made: tuple[c.Tool, ...] | None = self._cache.get(key)
        if made is None:
            return None
        return [_copy(t) for t in made]

    def put(self, key: bytes, tools: list[c.Tool]) -> None:
        """Remember the tools made of ``key`` (which must be bytes of its own)."""
        if self._seen is None or self._seen.seen_before(key):
            self._cache.put(key, tuple([encoded(t) for t in tools]))

    def clear(self) -> None:
        super().clear()
        if self._seen is not None:
            self._seen.clear()


def _key_size(key: bytes, value: object) -> int:
    return len(key)


_ABSENT: Any = object()


class _SetKey:
    """A tool set as a key: hashed by its size and end names (cheap), equal only to
    the same tools field for field (``==`` on the Structs), so two sets never share an
    entry. Sets alike in size and end names share a hash; what comparing them costs is
    bounded by the bytes the look-up holds."""

    __slots__ = ("_hash", "tools")

    def __init__(self, tools: list[c.Tool]) -> None:
        self.tools = tools
        self._hash = hash((len(tools), tools[0].name, tools[-1].name))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return type(other) is _SetKey and self.tools == other.tools


def _names_size(key: tuple[int, str, str], value: None) -> int:
    return len(key[1]) + len(key[2])


def _note_size(key: _SetKey, value: object) -> int:
    return tools_size(key.tools)


def _entry_size(key: _SetKey, value: tuple[object, int]) -> int:
    return tools_size(key.tools) + value[1]


class SetLookup(Generic[_V]):
    """A whole tool set -> what an encoder made of it (its upstream form, written once),
    for an encoder, which receives canonical tools rather than bytes.

    Keyed by content (``_SetKey``): each entry holds a copy of the tools it was made
    of, found only by tools equal to them field for field (a key of every field's bytes
    cost twice as much). Only ``keepable`` sets are kept; their schemas are
    ``Raw.copy()``s, the request's own when they own their bytes (as the decoders'
    look-ups hold them), so an entry never holds a view into a body.

    A set is made into an entry once the same tools are seen again (``second_sight``):
    the first time only its size and end names are noted, the next a copy of the tools,
    so that a conversation's first request (and ``--cold``) pays one small insert, and a
    set that changes with every request (a date in a description) is never made into an
    entry. Entries and notes are ``BoundedCache``s; a set too large to keep is noted as
    such and not made again."""

    __slots__ = ("_entries", "_lock", "_names", "_noted")

    def __init__(self) -> None:
        self._entries: BoundedCache[_SetKey, tuple[_V, int]] = _cache(_entry_size)
        # Held by the slow paths (noting, making an entry), which look at the notes and
        # then change them: two threads translating at once must not interleave there.
        self._lock = threading.Lock()
        # sizes and end names seen once; tools seen twice -> (their copy, whether kept)
        self._names: BoundedCache[tuple[int, str, str], None] = _cache(_names_size)
        self._noted: BoundedCache[_SetKey, tuple[list[c.Tool], bool]] = _cache(_note_size)
        _LOOKUPS.append(self)

    def get(self, tools: list[c.Tool]) -> _V | None:
        found = self._entries.get(_SetKey(tools))
        return None if found is None else found[0]

    def second_sight(self, tools: list[c.Tool]) -> bool:
        """Whether these tools (``keepable``) were seen before, and may be kept; if they
        were not, their size and names, or if those were, the tools are noted for next
        time."""
        with self._lock:
            names = (len(tools), tools[0].name, tools[-1].name)
            if names not in self._names:
                self._names.put(names, None)
                return False
            noted = self._noted.get(_SetKey(tools))
            if noted is not None:
                return noted[1]
            kept = _kept(tools)
            self._noted.put(_SetKey(kept), (kept, True))
            return False

    def put(self, tools: list[c.Tool], value: _V, size: int) -> None:
        """Remember ``value`` for ``tools`` (seen twice: ``second_sight``); ``size``:
        about how many bytes ``value`` holds."""
        with self._lock:
            noted = self._noted.pop(_SetKey(tools))
            kept = _kept(tools) if noted is None else noted[0]
            if not self._entries.put(_SetKey(kept), (value, size)):
                self._noted.put(_SetKey(kept), (kept, False))  # (not made again while noted)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._names.clear()
            self._noted.clear()

    def __len__(self) -> int:
        """How many entries it holds (the notes are not entries)."""
        return len(self._entries)


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
