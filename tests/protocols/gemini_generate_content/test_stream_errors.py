"""A Gemini stream that fails mid-way sends a Google error object as a ``data:``
frame: the decoder keeps its status and the code routing classes it by."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxai_asgi import canonical as c

from ._util import stream_events

_CHUNK = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}, "index": 0}],
    "responseId": "r1",
    "modelVersion": "gemini-2.5-flash",
}
_KEY_INVALID = {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    "reason": "API_KEY_INVALID",
    "domain": "googleapis.com",
}


def _sse(*objs: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(o).encode() + b"\r\n\r\n" for o in objs)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"},
            c.StreamError(
                status=503,
                kind="overloaded",
                message="The model is overloaded.",
                code="UNAVAILABLE",
            ),
        ),
        (
            {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"},
            c.StreamError(
                status=429, kind="rate_limit", message="quota", code="RESOURCE_EXHAUSTED"
            ),
        ),
        (
            {"message": "boom", "status": "INTERNAL"},  # no code: the status name's status
            c.StreamError(status=500, kind="api_error", message="boom", code="INTERNAL"),
        ),
        (
            {
                "code": 400,
                "message": "API key not valid.",
                "status": "INVALID_ARGUMENT",
                "details": [_KEY_INVALID],
            },
            c.StreamError(
                status=400,
                kind="invalid_request",
                message="API key not valid.",
                code="API_KEY_INVALID",
            ),
        ),
    ],
)
def test_an_error_frame_after_content_keeps_its_status_and_code(
    error: dict[str, Any], expected: c.StreamError
) -> None:
    events = stream_events(_sse(_CHUNK, {"error": error}))
    assert any(isinstance(e, c.BlockDelta) for e in events)
    assert events[-1] == expected


def test_an_error_frame_first_is_the_whole_stream() -> None:
    error = {"code": 503, "message": "down", "status": "UNAVAILABLE"}
    assert stream_events(_sse({"error": error})) == [
        c.StreamError(status=503, kind="overloaded", message="down", code="UNAVAILABLE")
    ]
