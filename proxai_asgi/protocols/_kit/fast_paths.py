"""The one switch over the request codecs' fast paths.

Each fast path in a ``request.py`` (a one-parse decode, a look-up by content, an agent
loop's usual turn built inline) is a shortcut that sits beside the general path it
equals and is taken only while ``FAST.on``. Production never turns it off: the switch
exists so that ``tests/protocols/test_fast_paths.py`` can run every request both ways
and assert the same bytes. A codec reads it once per request (or per helper call),
into a local, so the hot loops test a local boolean.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class _Switch:
    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True


FAST = _Switch()


@contextmanager
def general_only() -> Iterator[None]:
    """Every request codec's fast paths off inside the block (process-wide: for tests,
    which run one request at a time)."""
    FAST.on = False
    try:
        yield
    finally:
        FAST.on = True
