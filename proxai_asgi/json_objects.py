"""Tool call arguments kept encoded, for the bodies that carry them as a JSON object
(Anthropic's ``tool_use.input``, Gemini's ``functionCall.args``).

Canonical arguments are JSON text; such an upstream wants the object. An agent loop
resends every call each turn, so decoding the text to a dict only to encode that dict
into the body again is paid for every call of every turn. ``RAW_OBJECTS`` maps the
text to ``encode(decode(arguments))`` as a ``msgspec.Raw`` (the same bytes the object
gives when encoded), which both encoders put in the body as it is.

Keyed by content, bounded (short arguments only, cleared when full), and holding only
bytes of its own, never a view into a request body.
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
