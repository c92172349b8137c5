"""HTTP/1.1 response body framing, sans-IO (RFC 9112 §6-7): fixed length, chunked, or
until the connection closes.

The lean pool parses the response head with h11 and the body here. h11 yields one event
per chunk; an SSE upstream sends one chunk per event, so a read holding twenty events
became twenty yields and twenty writes to the client. ``feed`` returns everything a
read completes as one piece, and costs a ``find`` and a slice per chunk.
"""

from __future__ import annotations

import re

_MAX_LINE = 4096  # a chunk-size line or a trailer line longer than this is an attack
_HEX = frozenset(b"0123456789abcdefABCDEF")
# A bare size line (no extension, no blank): how every chunk of a stream starts.
_BARE_SIZE = re.compile(rb"([0-9a-fA-F]{1,16})\r\n").match


class BodyError(Exception):
    """The body broke its framing or ended early."""


class Framing:
    """Feed the bytes that follow the head; get the payload they complete."""

    done = False
    reusable = True  # the connection may carry another request once done
    leftover = b""  # bytes after the body's end (a server that over-sends)

    def feed(self, data: bytes) -> bytes:
        raise NotImplementedError

    def eof(self) -> None:
        """The connection closed: fine only where that ends the body."""
        if not self.done:
            raise BodyError("connection closed before the end of the body")


class Length(Framing):
    """``Content-Length: n``."""

    def __init__(self, length: int) -> None:
        self._left = length
        self.done = length == 0

    def feed(self, data: bytes) -> bytes:
        if self.done:
            self.leftover += data
            return b""
        if len(data) < self._left:
            self._left -= len(data)
            return data
        body, self.leftover = data[: self._left], data[self._left :]
        self._left = 0
        self.done = True
        return body


class UntilClose(Framing):
    """No length and not chunked: the body is everything until the server closes."""

    reusable = False

    def feed(self, data: bytes) -> bytes:
        return data

    def eof(self) -> None:
        self.done = True


class Chunked(Framing):
    """``Transfer-Encoding: chunked``: size lines, data, CRLFs, then trailers."""

    def __init__(self) -> None:
        self._buf = b""  # unparsed bytes (a size or trailer line cut by a read)
        self._left = 0  # bytes of the current chunk's data still to come
        self._crlf = False  # the CRLF after a chunk's data is due
        self._trailers = False  # past the last chunk: skipping trailer lines

    def feed(self, data: bytes) -> bytes:
        if self.done:
            self.leftover += data
            return b""
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos, end = 0, len(buf)
        while pos < end:
            if self._left:
                take = min(self._left, end - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self._left -= take
                self._crlf = self._left == 0
                continue
            if self._crlf:
                if end - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise BodyError("chunk data not followed by CRLF")
                pos += 2
                self._crlf = False
                continue
            if not self._trailers:
                # Whole chunks in a row, the bulk of a stream's read, in one C match
                # each; anything else (a cut chunk, the last one, extensions, errors)
                # takes the general steps around this.
                while (size_line := _BARE_SIZE(buf, pos)) is not None:
                    start = size_line.end()
                    stop = start + int(size_line[1], 16)
                    if stop == start or not buf.startswith(b"\r\n", stop):
                        break
                    out.append(buf[start:stop])
                    pos = stop + 2
                if pos >= end:
                    break
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if end - pos > _MAX_LINE:
                    raise BodyError("chunk-size or trailer line too long")
                break
            line = buf[pos:eol]
            pos = eol + 2
            if self._trailers:
                if not line:  # the empty line that ends the message
                    self.done = True
                    self.leftover = buf[pos:]
                    pos = end
                continue
            size = line.split(b";", 1)[0].strip(b" \t")  # drop chunk extensions
            if not size or len(size) > 16 or not _HEX.issuperset(size):
                raise BodyError(f"invalid chunk size {line[:40]!r}")
            self._left = int(size, 16)
            self._trailers = self._left == 0
        self._buf = buf[pos:] if pos < end else b""
        return out[0] if len(out) == 1 else b"".join(out)
