"""The members of a JSON object found in its bytes, without decoding it, so that one
member can be replaced or added and every other byte of the body kept (a
pass-through promises the client's bytes unchanged apart from such edits)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec

_WS = b" \t\r\n"


# The bytes that open or close a string or a container: a value is skipped by jumping
# from one to the next (in C), not byte by byte.
_STRUCTURE = re.compile(rb'["\[\]{}]')


def _skip_string(body: bytes, i: int) -> int:
    """``body[i]`` is an opening quote; returns the index after the closing quote."""
    j = i + 1
    while True:
        j = body.find(b'"', j)
        if j < 0:
            raise ValueError("unterminated string")
        k = j - 1
        while body[k] == 0x5C:  # an odd run of backslashes escapes the quote
            k -= 1
        if (j - 1 - k) % 2 == 0:
            return j + 1
        j += 1


def _skip_value(body: bytes, i: int) -> int:
    """Index just after the JSON value starting at ``i``."""
    n = len(body)
    if body[i] == 0x22:
        return _skip_string(body, i)
    if body[i] in b"[{":
        depth = 0
        while True:
            found = _STRUCTURE.search(body, i)
            if found is None:
                raise ValueError("unterminated container")
            i = found.start()
            ch = body[i]
            if ch == 0x22:
                i = _skip_string(body, i)
                continue
            if ch in b"[{":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
    while i < n and body[i] not in b",}]" and body[i] not in _WS:
        i += 1
    return i


def members(body: bytes, start: int = -1) -> Iterator[tuple[bytes, int, int]]:
    """The members of the object whose ``{`` is at ``start`` (the body's first ``{``
    by default): each key's raw bytes (quotes included) and its value's span. The
    object must already be known to be valid JSON."""
    i = (body.index(b"{") if start < 0 else start) + 1
    n = len(body)
    while i < n:
        while i < n and (body[i] in _WS or body[i] == 0x2C):
            i += 1
        if i >= n or body[i] == 0x7D:
            return
        key_end = _skip_string(body, i)
        key = body[i:key_end]
        i = key_end
        while body[i] in _WS:
            i += 1
        i += 1  # the colon
        while body[i] in _WS:
            i += 1
        value_end = _skip_value(body, i)
        yield key, i, value_end
        i = value_end


def last_member(body: bytes, name: bytes, start: int = -1) -> tuple[int, int] | None:
    """The value span of the object's member ``name`` (its key quoted, plain ASCII; a
    key spelled with escapes is read too); of a repeated key, the last one, as the
    providers' JSON readers take it."""
    found = None
    for key, i, end in members(body, start):
        if key == name or (b"\\" in key and msgspec.json.decode(key) == name[1:-1].decode()):
            found = (i, end)
    return found


def with_member_first(body: bytes, member: bytes, start: int = -1) -> bytes:
    """``body`` with ``member`` (``"key":value``) added as the object's first member."""
    at = (body.index(b"{") if start < 0 else start) + 1
    rest = body[at:].lstrip()
    sep = b"" if rest.startswith(b"}") else b","
    return body[:at] + member + sep + body[at:]
