"""The model and usage of a relayed Responses answer: the response object's for a
plain one, the terminal event's snapshot (``response.completed``, ``.incomplete``,
``.failed``) for a stream; its ``web_search_call`` items are the server tool requests.
Only those fields (and each output item's type) are decoded."""

from __future__ import annotations

import msgspec

from ...codec import Relayed
from ...stream_tail import StreamTail
from . import wire
from .response import usage_in


class _Item(msgspec.Struct, gc=False):
    type: str | None = None


class _Response(msgspec.Struct, gc=False):
    model: str = ""
    usage: wire.UpUsage | None = None
    output: list[_Item] | None = None


class _Terminal(msgspec.Struct, gc=False):
    response: _Response | None = None


_response = msgspec.json.Decoder(_Response)
_terminal = msgspec.json.Decoder(_Terminal)
_TERMINAL = (b"response.completed", b"response.incomplete", b"response.failed")


def _relayed(r: _Response) -> Relayed | None:
    if r.usage is None:
        return None
    searches = sum(item.type == "web_search_call" for item in r.output or ())
    return Relayed(r.model, usage_in(r.usage, searches))


def relayed_usage(body: bytes) -> Relayed | None:
    try:
        return _relayed(_response.decode(body))
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None


def relayed_stream_usage(tail: StreamTail) -> Relayed | None:
    for frame in reversed(tail.last_frames()):
        if not frame.data.startswith(b"{") or not any(t in frame.data[:120] for t in _TERMINAL):
            continue
        try:
            snapshot = _terminal.decode(frame.data).response
        except (msgspec.DecodeError, UnicodeDecodeError):
            return None
        return _relayed(snapshot) if snapshot is not None else None
    return None
