"""Replace the top-level ``model`` of a JSON body without re-encoding the rest.

Pass-through promises the client's bytes unchanged apart from the model, so this
scans for the top-level key and splices a new value in; nested ``"model"`` keys (in
metadata, tool schemas...) are left alone.
"""

from __future__ import annotations

import msgspec

from ..protocols._kit.json_members import members, with_member_first

_enc = msgspec.json.Encoder()


def rewrite_model(body: bytes, model: str) -> bytes:
    """``body`` with its top-level ``model`` value replaced (added when absent).
    The body must already be known to be a JSON object."""
    for key, i, value_end in members(body):
        if msgspec.json.decode(key) == "model":
            return body[:i] + _enc.encode(model) + body[value_end:]
    return with_member_first(body, b'"model":' + _enc.encode(model))
