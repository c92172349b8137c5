"""Google error bodies: ``{"error": {"code", "message", "status"}}``.

``status`` is a ``google.rpc.Code`` name (INVALID_ARGUMENT, NOT_FOUND, ...). The same
object is what a Gemini stream sends as a ``data:`` frame when it fails mid-way.
``decode_error`` reads Google's shape first and falls back to the shared reader of
loose error bodies (OpenAI-, Anthropic-shaped, HTML, text) for Gemini-compatible
servers that answer otherwise.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...errors import ErrorKind, ProxyError
from ...lazy_decoder import LazyDecoder
from .._kit.upstream_errors import decode_error as decode_loose_error
from . import wire

# Google status name for each neutral kind (the client-facing vocabulary).
STATUS_BY_KIND: dict[str, str] = {
    "invalid_request": "INVALID_ARGUMENT",
    "authentication": "UNAUTHENTICATED",
    "permission": "PERMISSION_DENIED",
    "not_found": "NOT_FOUND",
    "request_too_large": "INVALID_ARGUMENT",
    "rate_limit": "RESOURCE_EXHAUSTED",
    "overloaded": "UNAVAILABLE",
    "not_implemented": "UNIMPLEMENTED",
    "api_error": "INTERNAL",
    "timeout": "DEADLINE_EXCEEDED",
    "bad_gateway": "UNAVAILABLE",
}

# Neutral kind and HTTP status of each Google status name (upstream errors; the HTTP
# status is what a mid-stream error frame, which has a ``code`` too, falls back on).
KIND_STATUS_BY_NAME: dict[str, tuple[ErrorKind, int]] = {
    "INVALID_ARGUMENT": ("invalid_request", 400),
    "FAILED_PRECONDITION": ("invalid_request", 400),
    "OUT_OF_RANGE": ("invalid_request", 400),
    "UNAUTHENTICATED": ("authentication", 401),
    "PERMISSION_DENIED": ("permission", 403),
    "NOT_FOUND": ("not_found", 404),
    "ABORTED": ("api_error", 409),
    "ALREADY_EXISTS": ("invalid_request", 409),
    "RESOURCE_EXHAUSTED": ("rate_limit", 429),
    "CANCELLED": ("api_error", 499),
    "INTERNAL": ("api_error", 500),
    "UNKNOWN": ("api_error", 500),
    "DATA_LOSS": ("api_error", 500),
    "UNIMPLEMENTED": ("not_implemented", 501),
    "UNAVAILABLE": ("overloaded", 503),
    "DEADLINE_EXCEEDED": ("timeout", 504),
}

_encoder = msgspec.json.Encoder()


class _GoogleError(msgspec.Struct):
    code: Any = None
    message: Any = None
    status: Any = None


class _GoogleErrorBody(msgspec.Struct):
    error: _GoogleError | None = None


_body_decoder: LazyDecoder[_GoogleErrorBody] = LazyDecoder(_GoogleErrorBody)


def error_response(status: int, kind: str, message: str) -> wire.ErrorResponse:
    name = STATUS_BY_KIND.get(kind, "INTERNAL")
    return wire.ErrorResponse(error=wire.ErrorBody(code=status, message=message, status=name))


def encode_error(error: ProxyError) -> bytes:
    return _encoder.encode(error_response(error.status, error.kind, error.message))


def from_google(err: _GoogleError, status: int | None) -> ProxyError | None:
    """A ``ProxyError`` from a Google error object; None when it is not one."""
    if not isinstance(err.message, str) or not isinstance(err.status, str):
        return None
    kind, default_status = KIND_STATUS_BY_NAME.get(err.status, ("api_error", 500))
    if status is None:
        status = err.code if isinstance(err.code, int) and 400 <= err.code < 600 else default_status
    return ProxyError(status, err.message or err.status, kind=kind)


def stream_error(data: bytes) -> ProxyError | None:
    """A mid-stream ``data: {"error": ...}`` frame as an error; None for anything else."""
    try:
        body = _body_decoder.decode(data)
    except (msgspec.DecodeError, ValueError):
        return None
    return from_google(body.error, None) if body.error is not None else None


def decode_error(status: int, body: bytes) -> ProxyError:
    try:
        parsed: _GoogleErrorBody | None = _body_decoder.decode(body)
    except (msgspec.DecodeError, ValueError):
        parsed = None
    if parsed is not None and parsed.error is not None:
        err = from_google(parsed.error, status)
        if err is not None:
            return err
    return decode_loose_error(status, body)
