"""STUB (replaced by the affinity branch)."""

from __future__ import annotations

import hashlib

from ..codec import Codec

RawHeaders = list[tuple[bytes, bytes]]


def session_of(
    client: Codec, headers: RawHeaders, body: bytes, credential: bytes | None
) -> str | None:
    for k, v in headers:
        if k in (b"x-session-affinity",):
            return hashlib.blake2b((credential or b"") + b"\0" + v, digest_size=16).hexdigest()
    return None
