"""Incremental, sans-IO Server-Sent Events decoding and encoding.

The decoder follows httpx's decoder shape: ``decode(chunk)`` returns the events that
chunk completes, ``flush()`` returns what a final unterminated frame held. Lines are
split on bytes, so a UTF-8 character split across chunks is reassembled before any
text is decoded; CR, LF and CRLF line ends are all accepted (a CR at the end of one
chunk followed by LF at the start of the next counts once).
"""

from __future__ import annotations

from typing import NamedTuple


class SSEEvent(NamedTuple):
    event: str | None  # the ``event:`` field, None when absent
    data: bytes  # ``data:`` lines joined with b"\n"
    id: str | None = None

    @property
    def is_done(self) -> bool:
        return self.data == b"[DONE]"


class SSEDecoder:
    __slots__ = ("_buf", "_data", "_event", "_has_data", "_id", "_skip_lf")

    def __init__(self) -> None:
        self._buf = b""
        self._event: str | None = None
        self._data: list[bytes] = []
        self._id: str | None = None
        self._has_data = False
        self._skip_lf = False

    def decode(self, chunk: bytes) -> list[SSEEvent]:
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._skip_lf = False
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" not in buf:
            # Fast path: LF-only framing, the common case.
            lines = buf.split(b"\n")
            self._buf = lines.pop()
        else:
            if buf.endswith(b"\r"):
                # The matching LF may open the next chunk.
                self._skip_lf = True
            lines = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
            self._buf = lines.pop()
        out: list[SSEEvent] = []
        for line in lines:
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        return out

    def flush(self) -> list[SSEEvent]:
        """End of input: a last frame without its blank line still counts."""
        out: list[SSEEvent] = []
        if self._buf:
            ev = self._line(self._buf)
            self._buf = b""
            if ev is not None:
                out.append(ev)
        ev = self._line(b"")
        if ev is not None:
            out.append(ev)
        return out

    def _line(self, line: bytes) -> SSEEvent | None:
        if not line:
            if not self._has_data and self._event is None:
                return None
            ev = SSEEvent(self._event, b"\n".join(self._data), self._id)
            self._event = None
            self._data = []
            self._has_data = False
            return ev
        if line[0] == 0x3A:  # ":" comment
            return None
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._has_data = True
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            self._id = value.decode("utf-8", "replace")
        # "retry" and unknown fields are ignored, as the spec says.
        return None


def encode_event(data: bytes, event: str | None = None) -> bytes:
    """One SSE frame. ``data`` must not contain newlines (JSON from msgspec never does)."""
    if event is None:
        return b"data: " + data + b"\n\n"
    return b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"


DONE_FRAME = b"data: [DONE]\n\n"
