"""The loose reader of upstream error bodies: Anthropic's ``{"type":"error","error":{...}}``,
OpenAI's ``{"error":{...}}`` and the shapes other servers use (``{"error":"..."}``,
``{"message":...}``, FastAPI's ``{"detail":...}``, HTML, plain text, empty), read as a
``ProxyError`` with the upstream's status and message. The Anthropic codec reads its
upstream errors with it; the Gemini codec falls back on it for Gemini-compatible servers
that answer otherwise."""

from __future__ import annotations

from typing import Any

import msgspec

from ...errors import ErrorKind, ProxyError, kind_for_status, text_error_message
from ...lazy_decoder import LazyDecoder

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
