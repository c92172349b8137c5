"""Anthropic error bodies: ``{"type":"error","error":{"type","message"}}``.

``encode_error`` renders a ``ProxyError`` in that shape (also used for the stream's
``event: error`` frame); ``decode_error`` turns any upstream error body (Anthropic,
OpenAI-shaped, HTML, plain text, empty) into a ``ProxyError`` with the upstream's
status and message: ``_kit.upstream_errors`` reads every codec's loose bodies.
"""

from __future__ import annotations

import msgspec

from ...errors import ErrorKind, ProxyError
from .._kit.upstream_errors import decode_error
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


__all__ = ["decode_error", "encode_error", "error_event", "error_type", "stream_error_from_body"]
