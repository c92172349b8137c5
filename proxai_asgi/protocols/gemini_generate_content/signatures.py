"""Gemini thought signatures in the hub, and other providers' tokens for Gemini clients.

In the canonical model a Gemini ``thoughtSignature`` is a ``Reasoning.signature``
packed as ``{"p": "gemini", "s": <signature>}`` (``reasoning_carry``): an Anthropic
client replays it as a thinking signature, a Responses client as encrypted_content,
and the Anthropic and OpenAI encoders never send a packed value to their provider.

A signature Gemini put on a *non-thought* part (a ``functionCall``, or a text part) is
a ``Reasoning`` with empty text placed right before that part; the Gemini encoders put
it back on the part that follows it. Gemini clients see other providers' tokens (an
Anthropic signature or redacted payload, a Responses encrypted_content) packed, with
the thought's text, in the ``thoughtSignature`` of the part after the thought (the
function call, usually), where Gemini CLI keeps signatures, and give them back there. A
``thoughtSignature`` is base64 bytes to the SDKs (google-genai rejects anything else),
so a packed token is base64-encoded once more on its way to a Gemini client.

``SKIP_VALIDATOR`` is the value Google documents for function calls that did not come
from Gemini (history from another model): Gemini 3 rejects a function-call turn whose
first call has no signature, and accepts this one without validating it.
"""

from __future__ import annotations

import base64
import binascii

from ... import canonical as c
from ... import reasoning_carry

SKIP_VALIDATOR = "skip_thought_signature_validator"


def pack(signature: str) -> str:
    return reasoning_carry.pack({"p": "gemini", "s": signature})


_PACKED = reasoning_carry.PREFIX.encode()
_URLSAFE = bytes.maketrans(b"-_", b"+/")


def _to_client(packed: str) -> str:
    return base64.b64encode(packed.encode()).decode("ascii")


def _from_client(signature: str) -> dict[str, object] | None:
    """The payload of a token we packed for a Gemini client (the SDKs may give it back
    in the URL-safe alphabet, or unpadded); None for Gemini's own signatures."""
    raw = signature.encode("ascii", "replace").translate(_URLSAFE)
    try:
        decoded = base64.b64decode(raw + b"=" * (-len(raw) % 4))
    except (binascii.Error, ValueError):
        return None
    if not decoded.startswith(_PACKED):
        return None
    return reasoning_carry.unpack(decoded.decode("utf-8", "replace"))


def gemini_signature(r: c.Reasoning) -> str | None:
    """The Gemini signature a reasoning part carries, if it carries one."""
    payload = reasoning_carry.unpack(r.signature)
    if payload is not None and payload.get("p") == "gemini":
        s = payload.get("s")
        return s if isinstance(s, str) and s else None
    return None


def reasoning_in(text: str, signature: str | None) -> c.Reasoning:
    """A thought (or a bare signature) from a Gemini body: Gemini's own signature
    packed; a token we packed for a Gemini client earlier, unpacked to its provider's
    field."""
    if not signature:
        return c.Reasoning(text=text, summary=True)
    payload = _from_client(signature)
    if payload is None:
        return c.Reasoning(text=text, summary=True, signature=pack(signature))
    p = payload.get("p")
    carried_text = payload.get("t")
    if not text and isinstance(carried_text, str):
        text = carried_text  # the client dropped the thought part; its text came along
    if p == "anthropic":
        redacted = payload.get("redacted")
        if isinstance(redacted, str):
            return c.Reasoning(redacted=redacted)
        sig = payload.get("signature")
        return c.Reasoning(text=text, signature=sig if isinstance(sig, str) and sig else None)
    if p == "openai":
        enc, item = payload.get("encrypted_content"), payload.get("id")
        return c.Reasoning(
            text=text,
            summary=True,
            encrypted_content=enc if isinstance(enc, str) else None,
            item_id=item if isinstance(item, str) else None,
        )
    return c.Reasoning(text=text, summary=True)


def client_signature(r: c.Reasoning) -> str | None:
    """The ``thoughtSignature`` a Gemini client sees for a reasoning part: Gemini's own,
    or another provider's token packed so the client can replay it, or None."""
    own = gemini_signature(r)
    if own is not None:
        return own
    # The thought's text rides along: Gemini CLI keeps signatures but drops thought
    # parts from its history, and an Anthropic signature is only valid with its text.
    if r.redacted is not None:
        return _to_client(reasoning_carry.pack({"p": "anthropic", "redacted": r.redacted}))
    if r.signature:
        return _to_client(
            reasoning_carry.pack({"p": "anthropic", "signature": r.signature, "t": r.text})
        )
    if r.encrypted_content:
        payload = {"p": "openai", "encrypted_content": r.encrypted_content, "id": r.item_id}
        return _to_client(reasoning_carry.pack(payload))
    return None


def merge_carrier(out: list[c.Part], r: c.Reasoning) -> bool:
    """Another provider's token on a non-thought part belongs to the thought right
    before it (when the client kept that thought): one reasoning part, not two."""
    last = out[-1] if out else None
    if gemini_signature(r) is not None or type(last) is not c.Reasoning:
        return False
    if last.signature or last.encrypted_content or last.redacted is not None:
        return False
    last.signature, last.encrypted_content = r.signature, r.encrypted_content
    last.item_id, last.redacted = r.item_id, r.redacted
    last.text = last.text or r.text
    if r.redacted is not None:
        last.text = ""
    return True


def is_bare_gemini(r: c.Reasoning) -> bool:
    """A Gemini signature that belonged to the next (non-thought) part."""
    return not r.text and r.redacted is None and gemini_signature(r) is not None
