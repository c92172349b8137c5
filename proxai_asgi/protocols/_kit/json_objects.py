"""Tool call arguments kept encoded, for the bodies that carry them as a JSON object
(Anthropic's ``tool_use.input``, Gemini's ``functionCall.args``).

Canonical arguments are JSON text; such an upstream wants the object. An agent loop
resends every call each turn, so decoding the text to a dict only to encode that dict
into the body again is paid for every call of every turn. ``RAW_OBJECTS`` maps the
text to ``encode(decode(arguments))`` as a ``msgspec.Raw`` (the same bytes the object
gives when encoded), which both encoders put in the body as it is.

Each table is a ``bounded_cache.BoundedCache`` (keyed by the exact text or bytes,
bounded by bytes and count, thread-safe; short arguments only), holding only bytes of
its own, never a view into a request body. A hot path looks in its young generation
(``recent``); on a miss, ``arguments`` and the codecs' slow paths look in the whole
table before converting.

A conversation this process has not seen would pay for filling the tables on every call
(a key copied, looked up, put: ~0.4 µs a call over the conversion itself). So a codec
asks ``kept`` about a request's first call: when the tables hold it, or it was seen
before (the conversation's second request), the request uses them; otherwise only that
first key is noted, and the request converts its calls as it did before the tables.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

import msgspec

from ...bounded_cache import BoundedCache

RAW_OBJECTS_MAX, RAW_OBJECTS_MAX_BYTES = 4096, 4 << 20
RAW_OBJECT_MAX_CHARS = 512
RAW_OBJECTS: BoundedCache[str, msgspec.Raw] = BoundedCache(
    max_bytes=RAW_OBJECTS_MAX_BYTES, max_entries=RAW_OBJECTS_MAX
)

_encode = msgspec.json.Encoder().encode


def remember(arguments: str, value: dict[str, Any]) -> msgspec.Raw:
    """``value`` (the object ``arguments`` decodes to; ``{}`` for ``""``) encoded, and
    remembered for ``arguments`` when they are short."""
    raw = msgspec.Raw(_encode(value))
    if len(arguments) <= RAW_OBJECT_MAX_CHARS:
        RAW_OBJECTS.put(arguments, raw)
    return raw


# The other way: a call's object as a client wrote it (kept raw by the decoder) as
# canonical arguments, the text ``encode(decode(raw))``. Keyed by a copy of the bytes
# (never a view into the body); bounded as above.
ARGUMENTS_MAX, ARGUMENTS_MAX_BYTES = 4096, 4 << 20
ARGUMENT_MAX_BYTES = 512
ARGUMENTS: BoundedCache[bytes, str] = BoundedCache(
    max_bytes=ARGUMENTS_MAX_BYTES, max_entries=ARGUMENTS_MAX
)

_decode = msgspec.json.Decoder().decode


def arguments(raw: bytes) -> str:
    """``raw`` (the JSON text of an object) as canonical arguments, remembered when
    short."""
    text = ARGUMENTS.get(raw)
    if text is None:
        text = _encode(_decode(raw)).decode()
        if len(raw) <= ARGUMENT_MAX_BYTES:
            ARGUMENTS.put(raw, text)
    return text


# First calls seen once (``kept``): bounded as the tables.
SEEN_MAX, SEEN_MAX_BYTES = 4096, 2 << 20
_SEEN: BoundedCache[str | bytes, None] = BoundedCache(
    max_bytes=SEEN_MAX_BYTES, max_entries=SEEN_MAX
)


def kept(key: str | bytes, table: Container[Any], max_size: int) -> bool:
    """Whether a request whose first call has ``key`` (the key of its ``table``, whose
    entries are at most ``max_size`` long) uses the table: it holds the key, the key was
    seen before (and is no longer noted), or it is too long to keep; else it is noted."""
    if key in table or len(key) > max_size:
        return True
    return _SEEN.seen_before(key)


def forget() -> None:
    """Empty every table (a first request's cost, for ``bench/long_conversations.py``)."""
    RAW_OBJECTS.clear()
    ARGUMENTS.clear()
    _SEEN.clear()
