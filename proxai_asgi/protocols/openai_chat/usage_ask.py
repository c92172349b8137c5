"""Usage for a relayed Chat stream whose client did not ask for it.

A Chat stream reports its usage only when the request says
``stream_options.include_usage``; without it, a relayed answer would count no tokens
(and a budget would count nothing). With accounting on, the upstream request asks
for it (an exact edit: every other byte of the client's body kept, its other
``stream_options`` kept) and the answer loses what the client did not ask for:

- the usage-only chunk (``"choices": []`` and ``usage``, the last data frame before
  ``[DONE]``), whose usage is the exchange's;
- OpenAI's ``"usage":null`` member on every other chunk once usage is asked for.

Cheap: a chunk is only searched for ``"usage"``; only a frame that has it is decoded.
Usage a server sends unasked, or asked by the client's other options (vLLM's
``continuous_usage_stats`` on every chunk, servers that put it on the last content
chunk), is left as it came: the client would get it without the proxy too, and the
relay reads it from the stream's tail when no usage-only chunk came.
"""

from __future__ import annotations

import msgspec

from ...codec import Relayed, UsageAsked
from .._kit.json_members import last_member, with_member_first
from . import wire
from .response import usage_from_wire

_OPTIONS = b'"stream_options"'
_INCLUDE = b'"include_usage"'
_ASK = b'"include_usage":true'
_USAGE = b'"usage"'
_NULL_USAGE = b',"usage":null'  # (never inside a string: a string's quotes are escaped)


# (of a repeated key msgspec keeps the last, as ``last_member`` finds it)
class _Options(msgspec.Struct, gc=False):
    stream_options: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _Include(msgspec.Struct, gc=False):
    include_usage: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_options = msgspec.json.Decoder(_Options)
_include = msgspec.json.Decoder(_Include)


def _asks_already(raw: msgspec.Raw) -> bool:
    try:
        include = _include.decode(raw).include_usage
    except msgspec.ValidationError:
        return False  # (not an object)
    return include is not msgspec.UNSET and bytes(include) == b"true"


def ask_usage(body: bytes) -> UsageAsked | None:
    """``body`` asking for usage, unless it does already (``Codec.ask_usage``). The
    request is read in C first: usually it has no ``stream_options`` (one member is
    put in front) or asks already; only else are its members scanned."""
    try:
        found = _options.decode(body).stream_options
        if found is not msgspec.UNSET and _asks_already(found):
            return None  # the client asked: its stream is its own
        options = None if found is msgspec.UNSET else last_member(body, _OPTIONS)
        if options is None:
            edited = with_member_first(body, b'"stream_options":{' + _ASK + b"}")
        else:
            i, end = options
            value = body[i:end]
            if value == b"null":
                edited = body[:i] + b"{" + _ASK + b"}" + body[end:]
            elif value.startswith(b"{"):
                include = last_member(body, _INCLUDE, i)
                if include is None:
                    edited = body[:i] + with_member_first(value, _ASK) + body[end:]
                elif body[include[0] : include[1]] == b"true":
                    return None  # the client asked: its stream is its own
                else:
                    edited = body[: include[0]] + b"true" + body[include[1] :]
            else:
                return None  # not options: the upstream answers it as it is
    except (ValueError, IndexError, msgspec.DecodeError):
        return None
    return UsageAsked(edited, UsageStrip())


class _Chunk(msgspec.Struct, gc=False):
    model: str = ""
    choices: list[msgspec.Raw] | None = None
    usage: wire.Usage | None = None


_chunk = msgspec.json.Decoder(_Chunk)


def _after_last_frame(data: bytes, stop: int = -1) -> int:
    """Index just after the last frame end (a blank line) in ``data[:stop]``; 0: none."""
    stop = len(data) if stop < 0 else stop
    lf, crlf = data.rfind(b"\n\n", 0, stop), data.rfind(b"\r\n\r\n", 0, stop)
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)


def _frame_stop(data: bytes, i: int) -> int:
    lf, crlf = data.find(b"\n\n", i), data.find(b"\r\n\r\n", i)
    ends = [e for e in (lf + 2 if lf >= 0 else -1, crlf + 4 if crlf >= 0 else -1) if e >= 0]
    return min(ends) if ends else len(data)


def _usage_only(frame: bytes) -> Relayed | None:
    """The usage of ``frame`` if it is a usage-only chunk."""
    payload = b"\n".join(
        line[5:].removeprefix(b" ")
        for line in frame.replace(b"\r\n", b"\n").split(b"\n")
        if line.startswith(b"data:")
    )
    try:
        chunk = _chunk.decode(payload)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if chunk.choices == [] and chunk.usage is not None:
        return Relayed(chunk.model, usage_from_wire(chunk.usage))
    return None


class UsageStrip:
    """``codec.UsageStrip`` of a Chat stream asked for usage by ``ask_usage``."""

    __slots__ = ("_held", "usage")

    def __init__(self) -> None:
        self._held = b""  # a frame not yet whole (a wrapped app sends any cut)
        self.usage: Relayed | None = None

    def feed(self, data: bytes, last: bool = False) -> bytes:
        if self._held:
            data, self._held = self._held + data, b""
        if not last:
            end = _after_last_frame(data)
            if end < len(data):
                data, self._held = data[:end], data[end:]
        if _USAGE not in data:
            return data
        data = data.replace(_NULL_USAGE, b"")
        return self._cut(data) if _USAGE in data else data

    def _cut(self, data: bytes) -> bytes:
        """``data`` without its usage-only frames."""
        kept: list[bytes] = []
        pos = 0
        i = data.find(_USAGE)
        while i >= 0:
            start, stop = _after_last_frame(data, i), _frame_stop(data, i)
            found = _usage_only(data[start:stop])
            if found is not None:
                self.usage = found
                kept.append(data[pos:start])
                pos = stop
            i = data.find(_USAGE, stop)
        kept.append(data[pos:])
        return b"".join(kept)
