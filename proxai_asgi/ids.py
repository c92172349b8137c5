"""Deterministic identifiers: every client codec derives its ids from the upstream id
with these helpers, in streamed and non-streamed answers alike, so both agree."""

from __future__ import annotations

import re
import secrets

# Prefixes the three APIs put on response ids; stripped before re-prefixing.
_KNOWN = ("chatcmpl-", "chatcmpl_", "resp_", "msg_")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def base_id(upstream_id: str) -> str:
    for p in _KNOWN:
        if upstream_id.startswith(p):
            return upstream_id[len(p) :]
    return upstream_id or secrets.token_hex(12)


def derive(prefix: str, upstream_id: str) -> str:
    """``derive("resp_", "msg_01X") == "resp_01X"``; an id that already has the
    prefix is kept as it is."""
    if upstream_id.startswith(prefix):
        return upstream_id
    return prefix + base_id(upstream_id)


def item_id(prefix: str, upstream_id: str, n: int) -> str:
    """The n-th minted item id of a response: ``msg_<base>_<n>``, ``rs_<base>_<n>``."""
    return f"{prefix}{base_id(upstream_id)}_{n}"


def safe_tool_id(call_id: str, fallback: str) -> str:
    """Anthropic tool ids must match ``^[a-zA-Z0-9_-]+$``."""
    cleaned = _UNSAFE.sub("_", call_id)
    return cleaned or fallback
