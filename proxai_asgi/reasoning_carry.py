"""Carry one protocol's opaque reasoning token inside the other's.

Anthropic needs ``signature`` (or redacted ``data``) to accept replayed thinking;
Responses needs ``encrypted_content`` to accept replayed reasoning items. When a
client of one protocol talks to an upstream of the other, the upstream's token is
packed into the client's field, and unpacked when the client replays it, so a
multi-turn conversation keeps its reasoning. Packed values carry a prefix so they are
never mistaken for (or sent to) a real provider as their own token.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

PREFIX = "proxai1."

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()


def pack(payload: dict[str, Any]) -> str:
    return PREFIX + base64.urlsafe_b64encode(_enc.encode(payload)).decode("ascii")


def unpack(value: str | None) -> dict[str, Any] | None:
    """The payload of a packed value; None for a provider's own token or garbage."""
    if not value or not value.startswith(PREFIX):
        return None
    try:
        obj = _dec.decode(base64.urlsafe_b64decode(value[len(PREFIX) :].encode("ascii")))
    except (ValueError, msgspec.DecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def pack_anthropic(*, signature: str | None = None, redacted: str | None = None) -> str:
    """An Anthropic thinking signature or redacted payload, for Responses encrypted_content."""
    if redacted is not None:
        return pack({"p": "anthropic", "redacted": redacted})
    return pack({"p": "anthropic", "signature": signature or ""})


def pack_openai(*, encrypted_content: str | None, item_id: str | None) -> str:
    """A Responses encrypted_content (and item id), for an Anthropic signature."""
    return pack({"p": "openai", "encrypted_content": encrypted_content, "id": item_id})
