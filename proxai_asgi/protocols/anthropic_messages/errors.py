"""Anthropic error bodies: ``{"type":"error","error":{"type","message"}}``.

``encode_error`` renders a ``ProxyError`` in that shape (also used for the stream's
``event: error`` frame); ``decode_error`` turns any upstream error body (Anthropic,
OpenAI-shaped, HTML, plain text, empty) into a ``ProxyError`` with the upstream's
status and message: ``_kit.upstream_errors`` reads every codec's loose bodies.
"""

from __future__ import annotations

import msgspec

from ... import canonical as c
from ...codec import NO_HINT, FailureClass, FailureHint
from ...errors import ErrorKind, ProxyError
from .._kit.failure_hints import LazyPattern, fields_hint, text
from .._kit.ratelimit import RawHeaders, exhausted_wait
from .._kit.upstream_errors import decode_error, error_object
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


# ---- failures (routing): what an Anthropic error says beyond its status

# error.type -> class. 529 ``overloaded_error`` and 429 ``rate_limit_error`` are the
# target's; a 402 ``billing_error`` is the key's account.
_CLASS_BY_TYPE: dict[str, FailureClass] = {
    "authentication_error": "key",
    "permission_error": "key",
    "billing_error": "key",
    "rate_limit_error": "target",
    "overloaded_error": "target",
    "api_error": "target",
    "timeout_error": "target",
    "request_too_large": "context",
}
# invalid_request_error messages: "prompt is too long: 210000 tokens > 200000
# maximum", "input length and `max_tokens` exceed context limit: ...".
_CONTEXT_MESSAGE = LazyPattern(r"prompt is too long|exceed context limit")
# A 400 invalid_request_error: "Your credit balance is too low to access the
# Anthropic API" (another key's account may have credit).
_BILLING_MESSAGE = LazyPattern(r"credit balance is too low")

# (remaining, reset) of each limit; resets are RFC 3339 times.
RATE_LIMITS = (
    (b"anthropic-ratelimit-requests-remaining", b"anthropic-ratelimit-requests-reset"),
    (b"anthropic-ratelimit-tokens-remaining", b"anthropic-ratelimit-tokens-reset"),
    (b"anthropic-ratelimit-input-tokens-remaining", b"anthropic-ratelimit-input-tokens-reset"),
    (b"anthropic-ratelimit-output-tokens-remaining", b"anthropic-ratelimit-output-tokens-reset"),
)


def _hint(etype: object, code: object, message: object) -> FailureHint:
    # Anthropic-compatible servers answer in OpenAI's vocabulary too.
    loose = fields_hint(code, etype, message)
    cls = _CLASS_BY_TYPE.get(text(etype) or "") or loose.cls
    if cls in (None, "request") and isinstance(message, str):
        if _CONTEXT_MESSAGE.search(message):
            cls = "context"
        elif _BILLING_MESSAGE.search(message):
            cls = "key"
    return FailureHint(cls, text(etype) or loose.code, loose.retry_after)


def failure_hint(status: int, body: bytes) -> FailureHint:
    err = error_object(body)
    if err is None:
        return NO_HINT
    return _hint(err.get("type"), err.get("code"), err.get("message"))


def stream_failure_hint(error: c.StreamError) -> FailureHint:
    """An ``event: error``'s hint (its ``error.type`` is the decoded error's code)."""
    return _hint(error.code, None, error.message)


def rate_limit_wait(headers: RawHeaders, now: float) -> float | None:
    return exhausted_wait(headers, RATE_LIMITS, now)


__all__ = [
    "decode_error",
    "encode_error",
    "error_event",
    "error_type",
    "failure_hint",
    "rate_limit_wait",
    "stream_error_from_body",
    "stream_failure_hint",
]
