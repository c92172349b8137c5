"""How a relayed Responses stream must end: ``response.completed``, ``.incomplete`` or
``.failed``; when the upstream stopped short or broke, an ``error`` event and then a
``response.failed`` for the response it created, numbered after its last event so a
client checking ``sequence_number`` sees no gap and no restart."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from ...errors import ProxyError
from ...sse import SSEEvent, encode_event
from ...stream_tail import StreamTail
from .response import error_code
from .stream import _ERROR_EVENT_CODE

_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()


def stream_complete(tail: StreamTail) -> bool:
    frames = tail.last_frames()
    return bool(frames) and frames[-1].event in ("response.completed", "response.incomplete")


def stream_epilogue(tail: StreamTail, error: ProxyError | None) -> bytes:
    frames = tail.last_frames()
    last = frames[-1] if frames else None
    if last is not None and last.event in _TERMINAL:
        return b""
    err = error or ProxyError(
        502, "upstream stream ended before its terminal event", kind="bad_gateway"
    )
    seq = _last_sequence_number(frames)
    out = tail.separator()
    if last is None or last.event != "error":  # an upstream error event is already said
        seq += 1
        event = {
            "type": "error",
            "code": _ERROR_EVENT_CODE.get(err.kind, "server_error"),
            "message": err.message,
            "param": None,
            "sequence_number": seq,
        }
        out += _frame("error", event)
    snapshot = _created_response(tail.first_frame())
    snapshot["status"] = "failed"
    snapshot["error"] = {"code": error_code(err.kind), "message": err.message}
    seq += 1
    failed = {"type": "response.failed", "response": snapshot, "sequence_number": seq}
    return out + _frame("response.failed", failed)


def _frame(event: str, data: dict[str, Any]) -> bytes:
    return encode_event(_encode.encode(data), event)


def _json(frame: SSEEvent) -> Any:
    try:
        return _decode.decode(frame.data)
    except msgspec.DecodeError:
        return None


def _last_sequence_number(frames: list[SSEEvent]) -> int:
    for frame in reversed(frames):
        data = _json(frame)
        if isinstance(data, dict) and isinstance(data.get("sequence_number"), int):
            return int(data["sequence_number"])
    return -1


def _created_response(first: SSEEvent | None) -> dict[str, Any]:
    """The response the stream announced (its ``response.created`` snapshot), or a
    minimal one when the upstream never announced it."""
    data = _json(first) if first is not None else None
    response = data.get("response") if isinstance(data, dict) else None
    if isinstance(response, dict) and isinstance(response.get("id"), str):
        return response
    return {
        "id": f"resp_proxai_{time.time_ns():x}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "failed",
        "output": [],
    }
