"""Deterministic identifiers: every client codec derives its ids from the upstream id
with these helpers, in streamed and non-streamed answers alike, so both agree."""

from __future__ import annotations

import os
import re

from .bounded_cache import BoundedCache

# Prefixes the three APIs put on response ids; stripped before re-prefixing.
_KNOWN = ("chatcmpl-", "chatcmpl_", "resp_", "msg_")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
# What a response id a client names may be: one URL path segment with nothing to
# decode or escape, and no name of the store's own keys (``claim:``, Redis meta keys).
_RESPONSE_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")


def valid_response_id(response_id: str) -> bool:
    return _RESPONSE_ID.fullmatch(response_id) is not None


def base_id(upstream_id: str) -> str:
    for p in _KNOWN:
        if upstream_id.startswith(p):
            return upstream_id[len(p) :]
    return upstream_id or random_hex(12)


def random_hex(nbytes: int) -> str:
    """``secrets.token_hex`` (which is ``os.urandom``) without importing ``secrets``:
    it brings hmac, hashlib and random, ~3 ms of start-up."""
    return os.urandom(nbytes).hex()


def derive(prefix: str, upstream_id: str) -> str:
    """``derive("resp_", "msg_01X") == "resp_01X"``; an id that already has the
    prefix is kept as it is."""
    if upstream_id.startswith(prefix):
        return upstream_id
    return prefix + base_id(upstream_id)


def item_id(prefix: str, upstream_id: str, n: int) -> str:
    """The n-th minted item id of a response: ``msg_<base>_<n>``, ``rs_<base>_<n>``."""
    return f"{prefix}{base_id(upstream_id)}_{n}"


# Call ids as ``safe_tool_id`` cleans them, by their exact text: an agent loop resends
# every earlier call id (twice: the call and its result) on each turn, and a regex per
# id was a quarter of the Anthropic encoder's ``_messages_out``. Ids are the client's
# (any length): bounded by bytes, a long one is cleaned every time.
SAFE_IDS: BoundedCache[str, str] = BoundedCache(
    max_bytes=2 << 20, max_entries=16384, max_item_bytes=1024
)


def safe_tool_id(call_id: str, fallback: str) -> str:
    """Anthropic tool ids must match ``^[a-zA-Z0-9_-]+$``."""
    return SAFE_IDS.recent(call_id) or _cleaned(call_id) or fallback


def _cleaned(call_id: str) -> str:
    safe = SAFE_IDS.get(call_id)
    if safe is None:
        safe = _UNSAFE.sub("_", call_id)
        SAFE_IDS.put(call_id, safe)
    return safe


# OpenAI caps ``safety_identifier`` and ``user`` at 128 characters.
OPENAI_USER_ID_MAX = 128


def openai_user_id(user: str) -> str:
    """An end-user id as OpenAI accepts it. Ids up to 128 characters are sent as they
    are; a longer one (Claude Code's ``metadata.user_id`` joins a user hash, an account
    id and a session id) becomes ``"sha256:"`` plus the first 64 hex digits of its
    SHA-256: 71 characters, and stable, so one user always maps to the same id."""
    if len(user) <= OPENAI_USER_ID_MAX:
        return user
    import hashlib  # here, not at import (OpenSSL's ~1-3 ms); only long user ids

    return "sha256:" + hashlib.sha256(user.encode()).hexdigest()[:64]
