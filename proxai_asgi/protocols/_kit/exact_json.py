"""JSON bodies encoded at their exact size.

``msgspec.json.Encoder.encode`` grows its output by half again each time it fills and
returns that block as it is: a translated 14 KB request held up to 1.46x its own size
while it was made (issue 16 §3). Encoding into a buffer kept by the thread and copying
the finished body out holds exactly the body per request and costs no more (one copy
in place of the growth steps; ``bench/long_conversations.py``). Encoding never awaits,
so one buffer per thread serves every request that thread translates.

``encode_made`` also lets the encoded value go before the body is copied out, so a
request's peak holds the larger of the two, not both (a translated request's objects
are ~0.3-0.5x its body).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ParamSpec

import msgspec

_P = ParamSpec("_P")

_FIRST = 1 << 14
# A buffer that a rare huge body grew past this is let go, not kept for the thread.
_KEEP = 4 << 20


class _Buffer(threading.local):
    def __init__(self) -> None:
        self.data = bytearray(_FIRST)


_local = _Buffer()


def encode_made(
    encoder: msgspec.json.Encoder, make: Callable[_P, object], *args: _P.args, **kw: _P.kwargs
) -> bytes:
    """``encoder.encode(make(*args, **kw))``, allocated at its exact size, the made value
    freed before the copy: only this call's stack refers to it, until ``encode_into``
    returns."""
    buf = _local.data
    encoder.encode_into(make(*args, **kw), buf)
    return _copied(buf)


def _copied(buf: bytearray) -> bytes:
    out = bytes(buf)
    if len(out) > _KEEP:
        _local.data = bytearray(_FIRST)
    return out
