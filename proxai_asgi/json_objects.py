"""Tool call arguments kept encoded, for the bodies that carry them as a JSON object
(Anthropic's ``tool_use.input``, Gemini's ``functionCall.args``).

Canonical arguments are JSON text; such an upstream wants the object. An agent loop
resends every call each turn, so decoding the text to a dict only to encode that dict
into the body again is paid for every call of every turn. ``RAW_OBJECTS`` maps the
text to ``encode(decode(arguments))`` as a ``msgspec.Raw`` (the same bytes the object
gives when encoded), which both encoders put in the body as it is.

Keyed by content, bounded (short arguments only, cleared when full), and holding only
bytes of its own, never a view into a request body.

A conversation this process has not seen would pay for filling the tables on every call
(a key copied, looked up, put: ~0.4 µs a call over the conversion itself). So a codec
asks ``kept`` about a request's first call: when the tables hold it, or it was seen
before (the conversation's second request), the request uses them; otherwise only that
first key is noted, and the request converts its calls as it did before the tables.
"""

from __future__ import annotations

from typing import Any

import msgspec

RAW_OBJECTS: dict[str, msgspec.Raw] = {}
RAW_OBJECTS_MAX = 2048
RAW_OBJECT_MAX_CHARS = 512

_encode = msgspec.json.Encoder().encode


def remember(arguments: str, value: dict[str, Any]) -> msgspec.Raw:
    """``value`` (the object ``arguments`` decodes to; ``{}`` for ``""``) encoded, and
    remembered for ``arguments`` when they are short."""
    raw = msgspec.Raw(_encode(value))
    if len(arguments) <= RAW_OBJECT_MAX_CHARS:
        if len(RAW_OBJECTS) >= RAW_OBJECTS_MAX:
            RAW_OBJECTS.clear()
        RAW_OBJECTS[arguments] = raw
    return raw


# The other way: a call's object as a client wrote it (kept raw by the decoder) as
# canonical arguments, the text ``encode(decode(raw))``. Keyed by a copy of the bytes
# (never a view into the body); bounded as above.
ARGUMENTS: dict[bytes, str] = {}
ARGUMENTS_MAX = 2048
ARGUMENT_MAX_BYTES = 512

_decode = msgspec.json.Decoder().decode


def arguments(raw: bytes) -> str:
    """``raw`` (the JSON text of an object) as canonical arguments, remembered when
    short."""
    text = _encode(_decode(raw)).decode()
    if len(raw) <= ARGUMENT_MAX_BYTES:
        if len(ARGUMENTS) >= ARGUMENTS_MAX:
            ARGUMENTS.clear()
        ARGUMENTS[raw] = text
    return text


# First calls seen once (``kept``): bounded as the tables.
_SEEN: set[str | bytes] = set()
SEEN_MAX = 2048


def kept(key: str | bytes, table: dict[Any, Any], max_size: int) -> bool:
    """Whether a request whose first call has ``key`` (the key of its ``table``, whose
    entries are at most ``max_size`` long) uses the table: it holds the key, the key was
    seen before (and is no longer noted), or it is too long to keep; else it is noted."""
    if key in table or len(key) > max_size:
        return True
    if key in _SEEN:
        _SEEN.discard(key)
        return True
    if len(_SEEN) >= SEEN_MAX:
        _SEEN.clear()
    _SEEN.add(key)
    return False


def forget() -> None:
    """Empty every table (a first request's cost, for ``bench/long_conversations.py``)."""
    RAW_OBJECTS.clear()
    ARGUMENTS.clear()
    _SEEN.clear()
