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


def pack_anthropic(
    *, signature: str | None = None, redacted: str | None = None, text: str | None = None
) -> str:
    """An Anthropic thinking signature (with the thinking text it signs) or redacted
    payload, for Responses encrypted_content. The text rides along because Anthropic
    accepts the signature only with that exact text, and a client may replay the
    reasoning item without its content."""
    if redacted is not None:
        return pack({"p": "anthropic", "redacted": redacted})
    payload: dict[str, Any] = {"p": "anthropic", "signature": signature or ""}
    if text is not None:
        payload["t"] = text
    return pack(payload)


def carried_text(payload: dict[str, Any], text: str) -> str:
    """The thinking text a packed Anthropic signature was issued for; ``text`` (what the
    client replayed) for carriers packed before the text rode along."""
    signed = payload.get("t")
    return signed if isinstance(signed, str) else text


def pack_openai(*, encrypted_content: str | None, item_id: str | None) -> str:
    """A Responses encrypted_content (and item id), for an Anthropic signature."""
    return pack({"p": "openai", "encrypted_content": encrypted_content, "id": item_id})
