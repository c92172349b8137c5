"""Incremental, sans-IO Server-Sent Events decoding and encoding.

The decoder follows httpx's decoder shape: ``decode(chunk)`` returns the events that
chunk completes, ``flush()`` returns what a final unterminated frame held. Lines are
split on bytes, so a UTF-8 character split across chunks is reassembled before any
text is decoded; CR, LF and CRLF line ends are all accepted (a CR at the end of one
chunk followed by LF at the start of the next counts once).

This runs once per upstream event on every translated stream, so it is written for
speed (measured with ``bench/sansio.py``): a chunk that is exactly one frame, the usual
shape of a network read, skips the line loop (a ``data:``-only frame, LF or CRLF, is recognised
before the line split, an ``event:`` + ``data:`` frame right after it: each was the
faster place for its shape); the line loop is inline with the pending frame in locals;
the usual ``data: `` / ``event: `` spellings are tested before the general
``field:value`` parse; and ``SSEEvent`` is a msgspec Struct (a NamedTuple costs
~190 ns more to build).
"""

from __future__ import annotations

import msgspec

_CR = 0x0D  # tested as an int: ``b"\r" in buf`` costs ~150 ns more than ``13 in buf``
_COLON = 0x3A


class SSEEvent(msgspec.Struct, frozen=True, gc=False):
    event: str | None  # the ``event:`` field, None when absent
    data: bytes  # ``data:`` lines joined with b"\n"
    id: str | None = None

    @property
    def is_done(self) -> bool:
        return self.data == b"[DONE]"


class SSEDecoder:
    __slots__ = ("_buf", "_data", "_event", "_id", "_skip_lf")

    def __init__(self) -> None:
        self._buf = b""  # a line not yet ended
        # The frame being read: its ``event:`` and its ``data:`` lines (a non-empty
        # list means a data field was seen, even an empty one).
        self._event: str | None = None
        self._data: list[bytes] = []
        self._id: str | None = None  # the last event ID; it persists across events
        self._skip_lf = False

    def decode(self, chunk: bytes) -> list[SSEEvent]:
        if (
            chunk[:6] == b"data: "
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk[-1:] == b"\n"
            and _CR not in chunk
            and not (self._buf or self._data or self._skip_lf or self._event is not None)
        ):
            # Exactly one ``data:`` line (no CR: the line ends are LFs) and the blank
            # line, with nothing pending: how Chat upstreams send each chunk, one frame
            # per read (~0.4 instead of ~0.55 us).
            return [SSEEvent(None, chunk[6:-2], self._id)]
        end = len(chunk) - 4
        if (
            chunk[:6] == b"data: "
            and chunk.find(b"\r") == end
            and chunk[end:] == b"\r\n\r\n"
            and chunk.find(b"\n") == end + 1
            and not (self._buf or self._data or self._skip_lf or self._event is not None)
        ):
            # The same with CRLF line ends: how Gemini sends each chunk.
            return [SSEEvent(None, chunk[6:end], self._id)]
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._skip_lf = False
        buf = self._buf + chunk if self._buf else chunk
        if _CR in buf:
            if buf.endswith(b"\r"):
                # The matching LF may open the next chunk.
                self._skip_lf = True
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        event, data = self._event, self._data
        if len(lines) == 3 and not lines[2] and event is None and not data:
            # Exactly one ``event:`` line, one ``data:`` line and the blank line, with
            # nothing pending: how Anthropic and Responses upstreams send each event,
            # one frame per read (~0.6 instead of ~0.75 us).
            head, body = lines[0], lines[1]
            if head[:7] == b"event: " and body[:6] == b"data: ":
                return [SSEEvent(head[7:].decode("utf-8", "replace"), body[6:], self._id)]
        out: list[SSEEvent] = []
        for line in lines:
            if not line:  # a blank line ends the frame
                if data or event is not None:
                    out.append(SSEEvent(event, b"\n".join(data), self._id))
                    event, data = None, []
            elif line[:6] == b"data: ":
                data.append(line[6:])
            elif line[:7] == b"event: ":
                event = line[7:].decode("utf-8", "replace")
            elif line[0] != _COLON:  # not a comment: any other spelling, or another field
                name, _, value = line.partition(b":")
                if value[:1] == b" ":
                    value = value[1:]
                if name == b"data":
                    data.append(value)
                elif name == b"event":
                    event = value.decode("utf-8", "replace")
                elif name == b"id":
                    self._id = value.decode("utf-8", "replace")
                # "retry" and unknown fields are ignored, as the spec says.
        self._event, self._data = event, data
        return out

    def flush(self) -> list[SSEEvent]:
        """End of input: a last frame without its blank line still counts (the first LF
        ends a pending line, the second is the blank line that ends the frame)."""
        self._skip_lf = False
        return self.decode(b"\n\n")


def frame_head(event: str | None = None) -> bytes:
    """What precedes a frame's data: the ``event:`` line, if any, and ``data: ``. The
    stream encoders build their byte templates from it once."""
    if event is None:
        return b"data: "
    return b"event: " + event.encode() + b"\ndata: "


def encode_event(data: bytes, event: str | None = None, *, end: bytes = b"\n\n") -> bytes:
    """One SSE frame. ``data`` must not contain newlines (JSON from msgspec never does);
    ``end`` is the blank line (Google's servers end frames with CRLF CRLF)."""
    return frame_head(event) + data + end


DONE_FRAME = b"data: [DONE]\n\n"
