"""Gemini thought signatures in the hub, and other providers' tokens for Gemini clients.

A Gemini ``thoughtSignature`` is a canonical ``Reasoning.thought_signature``. A
signature Gemini put on a *non-thought* part (a ``functionCall``, or a text part) is a
``Reasoning`` with empty text placed right before that part; the Gemini encoders put it
back on the part that follows it.

A Gemini client sees any other provider's tokens packed (``reasoning_carry``), with the
thought's text, in the ``thoughtSignature`` of the part after the thought (the function
call, usually), where Gemini CLI keeps signatures, and gives them back there. A
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

# The token a Gemini client has a field for. Any other rides in it, packed.
OWN_TOKENS = ("thought_signature",)

_PACKED = reasoning_carry.PREFIX.encode()
# Every value we pack starts with these base64 characters (the prefix's first six
# bytes), in both alphabets: Gemini's own signatures are told apart without decoding.
PACKED_HEAD = base64.b64encode(_PACKED[:6]).decode("ascii")
_URLSAFE = bytes.maketrans(b"-_", b"+/")


def _to_client(packed: str) -> str:
    return base64.b64encode(packed.encode()).decode("ascii")


def _from_client(signature: str) -> str | None:
    """The packed value inside a signature we gave a Gemini client (the SDKs may give
    it back in the URL-safe alphabet, or unpadded); None for Gemini's own."""
    if not signature.startswith(PACKED_HEAD):
        return None
    raw = signature.encode("ascii", "replace").translate(_URLSAFE)
    try:
        decoded = base64.b64decode(raw + b"=" * (-len(raw) % 4))
    except (binascii.Error, ValueError):
        return None
    if not decoded.startswith(_PACKED):
        return None
    return decoded.decode("utf-8", "replace")


def reasoning_in(text: str, signature: str | None) -> c.Reasoning:
    """A thought (or a bare signature) from a Gemini body: Gemini's own signature as
    its own token; a carrier we packed for a Gemini client earlier, restored."""
    if not signature:
        return c.Reasoning(text=text, summary=True)
    packed = _from_client(signature)
    if packed is None:
        return c.Reasoning(text=text, summary=True, thought_signature=signature)
    carried = reasoning_carry.restore(packed, text, True)
    return carried if carried is not None else c.Reasoning(text=text, summary=True)


def seal(r: c.Reasoning, signature: str) -> None:
    """The signature that ends a thought, taken onto the thought's part."""
    carried = reasoning_in(r.text, signature)
    r.text, r.summary = carried.text, carried.summary
    for name in reasoning_carry.TOKENS:
        setattr(r, name, getattr(carried, name))


def client_signature(r: c.Reasoning) -> str | None:
    """The ``thoughtSignature`` a Gemini client sees for a reasoning part: Gemini's own,
    or the part's tokens packed so the client can replay them, or None."""
    if reasoning_carry.foreign(r, OWN_TOKENS):
        # The thought's text rides along: Gemini CLI keeps signatures but drops thought
        # parts from its history, and some tokens are only valid with their text.
        return _to_client(reasoning_carry.pack_tokens(r, r.text))
    return r.thought_signature


def merge_carrier(out: list[c.Part], r: c.Reasoning) -> bool:
    """Another provider's token on a non-thought part belongs to the thought right
    before it (when the client kept that thought): one reasoning part, not two."""
    last = out[-1] if out else None
    if r.thought_signature is not None or type(last) is not c.Reasoning:
        return False
    if reasoning_carry.holds_token(last):
        return False
    for name in reasoning_carry.TOKENS:
        setattr(last, name, getattr(r, name))
    last.text = "" if r.redacted is not None else last.text or r.text
    return True
