"""Replace the top-level ``model`` of a JSON body without re-encoding the rest.

Pass-through promises the client's bytes unchanged apart from the model, so this
scans for the top-level key and splices a new value in; nested ``"model"`` keys (in
metadata, tool schemas...) are left alone.
"""

from __future__ import annotations

import msgspec

_enc = msgspec.json.Encoder()
_WS = b" \t\r\n"


def _skip_string(body: bytes, i: int) -> int:
    """``body[i]`` is an opening quote; returns the index after the closing quote."""
    i += 1
    n = len(body)
    while i < n:
        ch = body[i]
        if ch == 0x5C:  # backslash escapes the next byte
            i += 2
            continue
        if ch == 0x22:
            return i + 1
        i += 1
    raise ValueError("unterminated string")


def _skip_value(body: bytes, i: int) -> int:
    """Index just after the JSON value starting at ``i``."""
    n = len(body)
    if body[i] == 0x22:
        return _skip_string(body, i)
    if body[i] in b"[{":
        depth = 0
        while i < n:
            ch = body[i]
            if ch == 0x22:
                i = _skip_string(body, i)
                continue
            if ch in b"[{":
                depth += 1
            elif ch in b"]}":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        raise ValueError("unterminated container")
    while i < n and body[i] not in b",}]" and body[i] not in _WS:
        i += 1
    return i


def rewrite_model(body: bytes, model: str) -> bytes:
    """``body`` with its top-level ``model`` value replaced (added when absent).
    The body must already be known to be a JSON object."""
    i = body.index(b"{") + 1
    n = len(body)
    while i < n:
        while (i < n and body[i] in _WS) or (i < n and body[i] == 0x2C):
            i += 1
        if i >= n or body[i] == 0x7D:
            break
        key_end = _skip_string(body, i)
        key = body[i:key_end]
        i = key_end
        while body[i] in _WS:
            i += 1
        i += 1  # the colon
        while body[i] in _WS:
            i += 1
        value_end = _skip_value(body, i)
        if msgspec.json.decode(key) == "model":
            return body[:i] + _enc.encode(model) + body[value_end:]
        i = value_end
    # No model key: add one at the front.
    start = body.index(b"{") + 1
    rest = body[start:].lstrip()
    sep = b"" if rest.startswith(b"}") else b","
    return body[:start] + b'"model":' + _enc.encode(model) + sep + body[start:]
