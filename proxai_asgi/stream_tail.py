"""The ends of a pass-through stream, kept without decoding the events in between.

Pass-through relays the upstream's bytes untouched, but the exchange around them is
ours: a stream that stops before its protocol's terminal event (the upstream died, a
load balancer cut it) must end with the client protocol's terminal error, not a silent
EOF the client could take for a complete answer. Deciding that needs only the last
frames; continuing it correctly (a Responses error whose ``sequence_number`` follows the
upstream's, a ``response.failed`` for the response that was created) needs the first
frame too. So this keeps the first frame and a bounded tail, at the cost of a list
append per chunk, and the codecs read them at the end (``Codec.stream_epilogue``).
"""

from __future__ import annotations

from collections import deque

from .sse import SSEDecoder, SSEEvent

TAIL_BYTES = 16 * 1024  # enough for the largest terminal frame we need to read whole
HEAD_BYTES = 64 * 1024  # the first frame (a Responses snapshot) is rarely over 4 KB
# With accounting on, the usage is read from the last frames too, and a Responses
# stream's last one (``response.completed``) repeats the whole answer: its tail is kept
# up to this (``Codec.usage_tail_bytes``). The chunks are the relayed ones, held a
# little longer, not copies.
USAGE_TAIL_BYTES = 2 * 1024 * 1024


class StreamTail:
    __slots__ = ("_chunks", "_frames", "_head", "_head_done", "_keep", "_size", "_trimmed")

    def __init__(self, keep: int = TAIL_BYTES) -> None:
        self._keep = keep
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._trimmed = False  # the tail no longer starts where the stream did
        self._head = b""
        self._head_done = False
        self._frames: list[SSEEvent] | None = None  # last_frames, until the next chunk

    def feed(self, chunk: bytes) -> None:
        if not self._head_done:
            head = self._head = self._head + chunk
            # Gemini ends frames with CRLF CRLF: without that check its head would grow
            # to HEAD_BYTES, copied again on every chunk.
            self._head_done = b"\n\n" in head or b"\r\n\r\n" in head or len(head) >= HEAD_BYTES
        self._frames = None
        chunks = self._chunks
        chunks.append(chunk)
        self._size += len(chunk)
        while len(chunks) > 1 and self._size - len(chunks[0]) >= self._keep:
            self._size -= len(chunks.popleft())
            self._trimmed = True

    @property
    def empty(self) -> bool:
        return self._size == 0

    def first_frame(self) -> SSEEvent | None:
        events = SSEDecoder().decode(self._head.replace(b"\r\n", b"\n"))
        return events[0] if events else None

    def last_frames(self) -> list[SSEEvent]:
        """The complete frames at the end of the stream (a frame cut short by the
        upstream is not one of them). Decoded once: a relayed stream's end reads them
        twice (whether it is complete, then its epilogue)."""
        if self._frames is None:
            tail = b"".join(self._chunks).replace(b"\r\n", b"\n")
            if self._trimmed:  # the tail may start mid-frame: read from a frame boundary on
                cut = tail.find(b"\n\n")
                tail = tail[cut + 2 :] if cut >= 0 else b""
            self._frames = SSEDecoder().decode(tail)
        return self._frames

    def separator(self) -> bytes:
        """What to write before an appended frame: a frame the upstream left half
        sent is closed first, so the appended one is a frame of its own."""
        if not self._chunks:
            return b""
        last = self._chunks[-1]
        if last.endswith((b"\n\n", b"\r\n\r\n")):
            return b""
        return b"\n\n"
