"""Anthropic error bodies: ``{"type":"error","error":{"type","message"}}``.

``encode_error`` renders a ``ProxyError`` in that shape (also used for the stream's
``event: error`` frame); ``decode_error`` turns any upstream error body (Anthropic,
OpenAI-shaped, HTML, plain text, empty) into a ``ProxyError`` with the upstream's
status and message.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...errors import ErrorKind, ProxyError, kind_for_status, text_error_message
from ...lazy_decoder import LazyDecoder
from . import wire

# Anthropic ``error.type`` for each neutral kind (the client-facing vocabulary).
ERROR_TYPE_BY_KIND: dict[str, str] = {
    "invalid_request": "invalid_request_error",
    "authentication": "authentication_error",
    "permission": "permission_error",
    "not_found": "not_found_error",
    "request_too_large": "request_too_large",
    "rate_limit": "rate_limit_error",
    "overloaded": "overloaded_error",
    "not_implemented": "invalid_request_error",
    "api_error": "api_error",
    "timeout": "api_error",
    "bad_gateway": "api_error",
}

# Neutral kind and HTTP status of each Anthropic ``error.type`` (for upstream errors;
# the status is used for mid-stream ``event: error``, which has none of its own).
KIND_STATUS_BY_ERROR_TYPE: dict[str, tuple[ErrorKind, int]] = {
    "invalid_request_error": ("invalid_request", 400),
    "authentication_error": ("authentication", 401),
    "billing_error": ("permission", 402),
    "permission_error": ("permission", 403),
    "not_found_error": ("not_found", 404),
    "request_too_large": ("request_too_large", 413),
    "rate_limit_error": ("rate_limit", 429),
    "api_error": ("api_error", 500),
    "timeout_error": ("timeout", 504),
    "overloaded_error": ("overloaded", 529),
}

_encoder = msgspec.json.Encoder()


def error_type(kind: str) -> str:
    return ERROR_TYPE_BY_KIND.get(kind, "api_error")


def error_event(kind: str, message: str) -> wire.ErrorEvent:
    return wire.ErrorEvent(error=wire.ErrorBody(type=error_type(kind), message=message))


def encode_error(error: ProxyError) -> bytes:
    return _encoder.encode(error_event(error.kind, error.message))


def stream_error_from_body(body: wire.ErrorBody) -> tuple[int, ErrorKind, str]:
    """Status, kind and message of an upstream ``event: error``."""
    kind, status = KIND_STATUS_BY_ERROR_TYPE.get(body.type, ("api_error", 500))
    return status, kind, body.message or body.type


# ------------------------------------------------------------- upstream bodies


class _ErrorDetail(msgspec.Struct):
    message: Any = None
    type: Any = None


class _AnyErrorBody(msgspec.Struct):
    """Anthropic ``{"type":"error","error":{...}}``, OpenAI ``{"error":{...}}``, and
    the loose shapes other servers use (``{"error":"..."}``, ``{"message":...}``,
    FastAPI's ``{"detail":...}``)."""

    error: _ErrorDetail | str | None = None
    message: Any = None
    detail: Any = None


_body_decoder: LazyDecoder[_AnyErrorBody] = LazyDecoder(_AnyErrorBody)


def decode_error(status: int, body: bytes) -> ProxyError:
    kind: ErrorKind = kind_for_status(status)
    message: str | None = None
    try:
        parsed: _AnyErrorBody | None = _body_decoder.decode(body)
    except (msgspec.DecodeError, ValueError):
        parsed = None
    if parsed is not None:
        err = parsed.error
        if isinstance(err, _ErrorDetail):
            if isinstance(err.message, str):
                message = err.message
            if isinstance(err.type, str) and err.type in KIND_STATUS_BY_ERROR_TYPE:
                kind = KIND_STATUS_BY_ERROR_TYPE[err.type][0]
        elif isinstance(err, str) and err:
            message = err
        if message is None:
            for value in (parsed.message, parsed.detail):
                if isinstance(value, str) and value:
                    message = value
                    break
                if value is not None:
                    message = _encoder.encode(value).decode()
                    break
    if message is None:
        message = text_error_message(status, body)
    return ProxyError(status, message, kind=kind)
