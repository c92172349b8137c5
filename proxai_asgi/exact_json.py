"""JSON bodies encoded at their exact size.

``msgspec.json.Encoder.encode`` grows its output by half again each time it fills and
returns that block as it is: a translated 14 KB request held up to 1.46x its own size
while it was made (issue 16 §3). Encoding into a buffer kept by the thread and copying
the finished body out holds exactly the body per request and costs no more (one copy
in place of the growth steps; ``bench/long_conversations.py``). Encoding never awaits,
so one buffer per thread serves every request that thread translates.
"""

from __future__ import annotations

import threading

import msgspec

_FIRST = 1 << 14
# A buffer that a rare huge body grew past this is let go, not kept for the thread.
_KEEP = 4 << 20


class _Buffer(threading.local):
    def __init__(self) -> None:
        self.data = bytearray(_FIRST)


_local = _Buffer()


def encode(encoder: msgspec.json.Encoder, value: object) -> bytes:
    """``encoder.encode(value)``, allocated at its exact size."""
    buf = _local.data
    encoder.encode_into(value, buf)
    out = bytes(buf)
    if len(out) > _KEEP:
        _local.data = bytearray(_FIRST)
    return out
