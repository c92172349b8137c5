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
faster place for its shape); a read of many ``event:`` + ``data:`` frames (a saturated
stream) is cut with list and bytes operations (``_uniform``); the line loop keeps the pending
frame in locals and tests the usual ``data: `` / ``event: `` spellings before the
general ``field:value`` parse; event names are looked up, not decoded, once seen;
and ``SSEEvent`` is a msgspec Struct (a NamedTuple costs ~190 ns more to build).
"""

from __future__ import annotations

import re

import msgspec

from .bounded_cache import BoundedCache

_CR = 0x0D  # tested as an int: ``b"\r" in buf`` costs ~150 ns more than ``13 in buf``
_COLON = 0x3A
_LONE_CR = re.compile(b"\r(?!\n)")  # a CR that is a line end by itself


# ``event: `` lines seen, and their names: a stream repeats a handful of them, and a
# look-up costs less than slicing and decoding each (bounded by bytes: the names are
# the upstream's; a hit is in the young generation, ``recent``).
_NAMES: BoundedCache[bytes, str] = BoundedCache(
    max_bytes=256 << 10, max_entries=512, max_item_bytes=1024
)


def _event_name(line: bytes) -> str:
    name: str | None = _NAMES.get(line)
    if name is None:
        name = line[7:].decode("utf-8", "replace")
        _NAMES.put(line, name)
    return name


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
            if _LONE_CR.search(buf) is None:  # CRLF only (Gemini): drop the CRs
                buf = buf.translate(None, b"\r")  # (~0.1 us per frame less than replace)
            else:
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
        at = 0
        if event is not None or data:  # the frame a previous read began, to its end
            at = lines.index(b"") + 1 if b"" in lines else len(lines)
            self._lines(lines[:at], out)
        if len(lines) - at > 5:  # two frames or more
            at += self._uniform(lines, at, out)
        self._lines(lines[at:] if at else lines, out)
        return out

    def _lines(self, lines: list[bytes], out: list[SSEEvent]) -> None:
        """Whole lines onto the pending frame; the frames they end go to ``out``."""
        event, data = self._event, self._data
        for line in lines:
            if not line:  # a blank line ends the frame
                if data or event is not None:
                    out.append(SSEEvent(event, b"\n".join(data), self._id))
                    event, data = None, []
            elif line[:6] == b"data: ":
                data.append(line[6:])
            elif line[:7] == b"event: ":
                event = _NAMES.recent(line)
                if event is None:
                    event = _event_name(line)
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

    def _uniform(self, lines: list[bytes], at: int, out: list[SSEEvent]) -> int:
        """The whole frames from ``lines[at]`` on when each is one ``event: `` line, one
        ``data: `` line and the blank line, nothing pending: a read of a saturated
        Anthropic or Responses stream, tens of frames. Checked and cut with list and
        bytes operations (~0.4 instead of ~0.55 us per frame; for ``data:``-only
        frames the line loop is as fast). Returns the number of lines taken (0: not
        that shape; the line loop reads them)."""
        if lines[at][:7] != b"event: ":
            return 0
        k = (len(lines) - at) // 3  # whole frames
        end = at + 3 * k
        names, values = lines[at:end:3], lines[at + 1 : end : 3]
        # (Lines hold no LF, so each "\nevent: " or "\ndata: " starts a line.)
        if (
            any(lines[at + 2 : end : 3])
            or (b"\n" + b"\n".join(names)).count(b"\nevent: ") != k
            or (b"\n" + b"\n".join(values)).count(b"\ndata: ") != k
        ):
            return 0
        last, get = self._id, _NAMES.recent
        out += [
            SSEEvent(get(name) or _event_name(name), value[6:], last)
            for name, value in zip(names, values, strict=True)
        ]
        return end - at

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
