"""Carry reasoning tokens through a client whose protocol has no field for them.

A provider accepts replayed reasoning only with the opaque token it issued for it. Each
kind of token has its own field on ``canonical.Reasoning`` (``TOKENS``). A client codec
shows the tokens its protocol has a field for as they are (its ``own``). If the part holds
any other token, the codec packs the part's tokens into that one field as a map keyed by
the canonical field names. When the client replays the part, the codec's decoder
``restore``\\ s the fields. An upstream encoder therefore reads only its own fields, and
no codec knows which protocol another token came from. Packed values carry a prefix, so
they are never mistaken for a provider's own token, nor sent to one as such.

The same envelope (``pack`` / ``unpack``) holds other payloads of ours too (compaction
summaries), each with its own keys.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from . import canonical as c

PREFIX = "proxai1."

# The canonical Reasoning fields that hold a provider's opaque token, and with them
# ``item_id``, which goes with ``encrypted_content`` (Responses checks the two together).
OPAQUE = ("signature", "redacted", "encrypted_content", "thought_signature")
TOKENS = (*OPAQUE, "item_id")
# Anthropic checks a thinking signature against the exact text it signed, and a client
# may replay the part without that text (or with a summary of it): the text rides along.
_TEXT_BOUND = "signature"
# Keys of carriers packed before the map used the canonical field names.
_LEGACY = {"id": "item_id", "s": "thought_signature"}

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


def is_packed(value: str | None) -> bool:
    return value is not None and value.startswith(PREFIX)


def holds_token(r: c.Reasoning) -> bool:
    return any(getattr(r, name) is not None for name in OPAQUE)


def foreign(r: c.Reasoning, own: tuple[str, ...]) -> bool:
    """Whether ``r`` holds a token the client's protocol has no field for."""
    return any(name not in own and getattr(r, name) is not None for name in OPAQUE)


def pack_tokens(r: c.Reasoning, text: str | None = None) -> str:
    """Every token ``r`` holds, packed; with ``text`` when a token is bound to it."""
    payload: dict[str, str] = {}
    for name in TOKENS:
        value = getattr(r, name)
        if value is not None:
            payload[name] = value
    if _TEXT_BOUND in payload and text is not None:
        payload["t"] = text
    return pack(payload)


def client_token(r: c.Reasoning, own: tuple[str, ...], field: str) -> str | None:
    """The value of the client's token field ``field`` for ``r``: its own token as the
    upstream issued it, or every token packed when one is foreign to the client."""
    if foreign(r, own):
        return pack_tokens(r, r.text)
    value: str | None = getattr(r, field)
    return value


def restore(
    value: str | None, text: str, summary: bool, item_id: str | None = None
) -> c.Reasoning | None:
    """The reasoning part a packed token was made from, given the ``text`` and
    ``summary`` flag the client replayed with it; None when ``value`` is not a carrier
    of reasoning tokens (a provider's own token, or another payload of ours)."""
    payload = unpack(value)
    if payload is None:
        return None
    found: dict[str, str] = {}
    for key, v in payload.items():
        name = _LEGACY.get(key, key)
        if name in TOKENS and isinstance(v, str):
            found[name] = v
    for name, v in list(found.items()):
        if v.startswith(PREFIX):  # older carriers could nest one inside another
            del found[name]
            inner = restore(v, "", False)
            for inner_name in TOKENS if inner is not None else ():
                inner_value = getattr(inner, inner_name)
                if inner_value is not None:
                    found.setdefault(inner_name, inner_value)
    if not found:
        return None
    if "redacted" in found:
        return c.Reasoning(redacted=found["redacted"])
    signed = payload.get("t")
    if _TEXT_BOUND in found and isinstance(signed, str):
        summary = summary and signed == text  # the signed text is the raw thinking
        text = signed
    if item_id is not None:
        found.setdefault("item_id", item_id)
    return c.Reasoning(text=text, summary=summary, **found)


def restored_tokens(value: str) -> dict[str, str]:
    """The tokens a packed value carries, by field; empty when it carries none. For a
    stream, where the text has already gone by."""
    r = restore(value, "", False)
    if r is None:
        return {}
    return {name: v for name in TOKENS if (v := getattr(r, name)) is not None}


def take(r: c.Reasoning, ev: c.BlockSignature) -> None:
    """Record on ``r`` the tokens a stream's signature event brings."""
    for name in ("signature", "encrypted_content", "item_id", "thought_signature"):
        value = getattr(ev, name)
        if value is not None:
            setattr(r, name, value)
