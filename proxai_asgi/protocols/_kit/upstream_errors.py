"""Upstream error bodies of any shape, read one way by every codec.

An upstream's non-2xx body is its own protocol's error object when it is well-behaved,
and otherwise whatever the server behind it writes: OpenAI's ``{"error": {...}}``,
Anthropic's ``{"type": "error", "error": {...}}``, vLLM's flat ``{"object": "error",
"message": ...}``, ``{"error": "..."}``, FastAPI's ``{"detail": ...}``, an HTML page,
plain text, nothing. ``decode_error`` keeps the upstream's status and message from any
of them; a codec reads its own protocol's richer shape first (Gemini's ``status``) and
falls back to this.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...errors import ErrorKind, ProxyError, kind_for_status, text_error_message

_enc = msgspec.json.Encoder()
_any_dec = msgspec.json.Decoder()

# error.type (OpenAI and Anthropic vocabularies) -> kind
_KIND_BY_TYPE: dict[str, ErrorKind] = {
    "invalid_request_error": "invalid_request",
    "authentication_error": "authentication",
    "permission_error": "permission",
    "not_found_error": "not_found",
    "rate_limit_error": "rate_limit",
    "request_too_large": "request_too_large",
    "server_error": "api_error",
    "api_error": "api_error",
    "overloaded_error": "overloaded",
    "timeout_error": "timeout",
    "billing_error": "permission",  # Anthropic's 402
    # vLLM / FastAPI-style names
    "BadRequestError": "invalid_request",
    "NotFoundError": "not_found",
    "InternalServerError": "api_error",
}

# error.code values that say more than the type does
_KIND_BY_CODE: dict[str, ErrorKind] = {
    "overloaded": "overloaded",
    "bad_gateway": "bad_gateway",
    "not_implemented": "not_implemented",
    "rate_limit_exceeded": "rate_limit",
    "insufficient_quota": "rate_limit",
    "invalid_api_key": "authentication",
}

# Statuses whose meaning is specific enough to win over the body's type.
_SPECIFIC_STATUSES = frozenset({401, 403, 404, 413, 429, 501, 502, 503, 504, 529})


def kind_from_fields(etype: object, code: object) -> ErrorKind | None:
    """The kind an error body's ``type`` / ``code`` name, if they name one."""
    if isinstance(code, str) and code in _KIND_BY_CODE:
        return _KIND_BY_CODE[code]
    if isinstance(etype, str) and etype in _KIND_BY_TYPE:
        return _KIND_BY_TYPE[etype]
    return None


def _opt_str(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return None


def _message_of(v: object) -> str | None:
    if isinstance(v, str) and v:
        return v
    if v is not None and not isinstance(v, str):
        try:
            return _enc.encode(v).decode()
        except (TypeError, msgspec.EncodeError):
            return None
    return None


def _from_error_object(status: int, obj: dict[str, Any]) -> ProxyError:
    message = _message_of(obj.get("message")) or f"upstream returned HTTP {status}"
    etype, code = obj.get("type"), obj.get("code")
    kind: ErrorKind | None = None
    if status in _SPECIFIC_STATUSES:
        kind = kind_for_status(status)
    if kind is None:
        kind = kind_from_fields(etype, code) or kind_for_status(status)
    return ProxyError(
        status, message, kind=kind, param=_opt_str(obj.get("param")), code=_opt_str(code)
    )


def parse_body(body: bytes) -> object:
    """An error body's JSON, or None when it is none."""
    if not body.strip():
        return None
    try:
        return _any_dec.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError):
        return None


def error_object(body: bytes) -> dict[str, Any] | None:
    """The error object of a loose body: OpenAI's and Anthropic's ``error``, vLLM's flat
    body, ``{"error": "text"}`` as ``{"message": ...}``; None for anything else."""
    return _error_object_of(parse_body(body))


def _error_object_of(obj: object) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    err = obj.get("error")
    if isinstance(err, dict):
        return err
    if isinstance(err, str) and err:
        return {"message": err, "code": obj.get("code")}
    return obj if "message" in obj else None


def decode_error(status: int, body: bytes) -> ProxyError:
    """An upstream non-2xx body of any content as a ``ProxyError`` keeping the upstream's
    status and message. Understands the OpenAI shape, the Anthropic shape, vLLM's flat
    ``{"object": "error", "message": ...}`` and FastAPI's ``{"detail": ...}``; anything
    else (HTML, plain text, empty) becomes a short plain-text message."""
    obj = parse_body(body)
    err = _error_object_of(obj)  # OpenAI and Anthropic shapes, vLLM's flat error
    if err is not None:
        return _from_error_object(status, err)
    if isinstance(obj, dict):
        detail = _message_of(obj.get("detail"))
        if detail:
            return ProxyError(status, detail, kind=kind_for_status(status))
    return ProxyError(status, text_error_message(status, body), kind=kind_for_status(status))
