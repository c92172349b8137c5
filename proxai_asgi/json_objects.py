"""Tool call arguments kept encoded, for the upstream bodies that carry them as a JSON
object (Anthropic's ``tool_use.input``, Gemini's ``functionCall.args``).

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
