"""Runs of text deltas, translated a read at a time.

A saturated upstream stream arrives tens of frames per read, and most of them are
text deltas of one block. Event by event, each costs ~1.5 µs of Python calls around
one JSON decode (the SSE event, the decoder's dispatch, a canonical ``BlockDelta``,
the encoder's dispatch, one frame). ``StreamTranslator`` instead asks the upstream
decoder for the run of text-delta frames that opens the rest of a read
(``StreamDecoder.delta_run``: one tight loop, a decode and a few tests per frame, no
canonical event) and the client encoder writes the run's frames in one join
(``StreamEncoder.encode_deltas``). Every frame is still its own delta, so the client's
bytes are those of the event-by-event path whatever the read boundaries; a frame the
run cannot vouch for ends it and goes through ``feed`` as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any, TypeVar

import msgspec

from ... import canonical as c
from ...sse import SSEEvent

_T = TypeVar("_T")

# A codec's one-join writer for a run of fragments, or None when its state does not
# allow one (the block is not on the wire yet, or writes deltas some other way).
FastDeltas = Callable[[int, list[str]], "bytes | None"]


def encode_deltas_with(
    encode: Callable[[c.StreamEvent], bytes], fast: FastDeltas, index: int, texts: list[str]
) -> bytes:
    """``texts`` through ``fast`` where it takes them, else one by one through
    ``encode``. The first delta of a block is where ``fast`` usually declines (it
    opens the block on the wire), so it goes alone and the rest are offered again."""
    out = fast(index, texts)
    if out is not None:
        return out
    head = encode(c.BlockDelta(index=index, text=texts[0]))
    rest = texts[1:]
    if not rest:
        return head
    tail = fast(index, rest)
    if tail is None:
        tail = b"".join([encode(c.BlockDelta(index=index, text=t)) for t in rest])
    return head + tail


def decoded(
    decode: Callable[[bytes], _T], events: list[SSEEvent], start: int
) -> Iterator[tuple[SSEEvent, _T]]:
    """``events[start:]`` with their data decoded, in turn, up to the first whose data
    does not decode (``feed`` then says what it is). A run's loop stops pulling where
    the run ends, and hands the frame that ended it to ``Held``."""
    for e in islice(events, start, None):
        try:
            value = decode(e.data)
        except (msgspec.DecodeError, ValueError):
            return
        yield e, value


class Held:
    """The frame that ended a run, decoded: the decoder's ``feed`` gets that very frame
    next (``event is held.event``) and takes ``value`` instead of decoding it again."""

    __slots__ = ("event", "value")

    def __init__(self) -> None:
        self.event: SSEEvent | None = None
        self.value: Any = None

    def put(self, event: SSEEvent, value: object) -> None:
        self.event, self.value = event, value
