"""The upstream key masked in what is relayed to a client: an upstream that quotes
our key back (an error echoing the credential) must not hand it on. Masked with as
many ``*``, so content-length and framing still hold."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..routing import Upstream

# Keys shorter than this are not real ones: masking them would mask ordinary text.
MIN_MASKED = 12


def maskable_key(up: Upstream | None) -> bytes | None:
    """The configured key of ``up`` to mask, if it has one long enough."""
    if up is None or not up.key or len(up.key) < MIN_MASKED:
        return None
    return up.key.encode()


def mask(data: bytes, secret: bytes) -> bytes:
    return data.replace(secret, b"*" * len(secret)) if secret in data else data


class KeyMask:
    """The upstream key masked in a relayed body, also when it is split across two
    chunks: a chunk's end that could begin the key (at most ``len(key) - 1`` bytes) is
    held back until the next chunk shows whether it does, and sent with the last one.
    On the hot path: one ``in`` and one ``find`` over the chunk's last bytes."""

    __slots__ = ("_held", "_key")

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._held = b""

    def feed(self, data: bytes, more: bool) -> bytes:
        if self._held:
            data = self._held + data
            self._held = b""
        data = mask(data, self._key)
        if more and data:
            cut = _key_start(data, self._key)
            if cut >= 0:
                self._held = data[cut:]
                data = data[:cut]
        return data


def _key_start(data: bytes, key: bytes) -> int:
    """Where a suffix of ``data`` that begins ``key`` starts (-1: none)."""
    first = key[:1]
    i = data.find(first, max(0, len(data) - len(key) + 1))
    while i >= 0:
        if key.startswith(data[i:]):
            return i
        i = data.find(first, i + 1)
    return -1
