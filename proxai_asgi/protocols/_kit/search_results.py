"""The opaque ``encrypted_content`` placeholder the proxy writes into an Anthropic
``web_search_result`` whose search did not run at Anthropic (another upstream's, or the
proxy's own search). A client replays it in later turns; Anthropic would refuse it as
its own encrypted content (400), so whatever sends a replay toward Anthropic recognises
it here and converts the search to something Anthropic accepts.

The response side owns the writing of the placeholder; this module owns its prefix
(the one thing both sides must agree on) and its recognition.
"""

from __future__ import annotations

# A prefix no Anthropic encrypted content starts with (theirs is base64 of a binary
# envelope, "Eq..."; a dot and a colon are outside base64).
PLACEHOLDER_PREFIX = "proxai.search:"
PLACEHOLDER_MARK = PLACEHOLDER_PREFIX.encode()


def is_placeholder(encrypted_content: object) -> bool:
    """``encrypted_content`` is one of the proxy's placeholders (not Anthropic's)."""
    return isinstance(encrypted_content, str) and encrypted_content.startswith(PLACEHOLDER_PREFIX)


def holds_placeholder(body: bytes) -> bool:
    """A request body carries a placeholder somewhere (a cheap byte search: a body that
    does must be translated, not relayed as it came)."""
    return PLACEHOLDER_MARK in body
