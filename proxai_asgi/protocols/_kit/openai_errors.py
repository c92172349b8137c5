"""OpenAI error bodies: ``{"error": {"message", "type", "param", "code"}}``.

Chat Completions and Responses share this shape: both codecs' ``errors`` modules take
``encode_openai_error`` and ``decode_openai_error`` from here. An upstream's error body
of any shape is read by ``upstream_errors``.
"""

from __future__ import annotations

import msgspec

from ... import canonical as c
from ...codec import FailureHint
from ...errors import ErrorKind, ProxyError
from .failure_hints import fields_hint
from .failure_hints import loose_failure_hint as openai_failure_hint
from .ratelimit import RawHeaders, exhausted_wait
from .upstream_errors import decode_error as decode_openai_error
from .upstream_errors import kind_from_fields


class _ErrorBody(msgspec.Struct, kw_only=True):
    # Every key is always written: OpenAI clients read all four (nulls allowed).
    message: str
    type: str
    param: str | None
    code: str | None


class _ErrorEnvelope(msgspec.Struct, kw_only=True):
    error: _ErrorBody


_enc = msgspec.json.Encoder()

# kind -> (OpenAI error.type, default error.code)
_TYPE_BY_KIND: dict[ErrorKind, tuple[str, str | None]] = {
    "invalid_request": ("invalid_request_error", None),
    "authentication": ("authentication_error", None),
    "permission": ("permission_error", None),
    "not_found": ("not_found_error", None),
    "rate_limit": ("rate_limit_error", None),
    "request_too_large": ("invalid_request_error", None),
    "overloaded": ("server_error", "overloaded"),
    "api_error": ("server_error", None),
    "timeout": ("timeout_error", None),
    "bad_gateway": ("server_error", "bad_gateway"),
    "not_implemented": ("invalid_request_error", "not_implemented"),
}

STATUS_BY_KIND: dict[ErrorKind, int] = {
    "invalid_request": 400,
    "authentication": 401,
    "permission": 403,
    "not_found": 404,
    "request_too_large": 413,
    "rate_limit": 429,
    "api_error": 500,
    "not_implemented": 501,
    "bad_gateway": 502,
    "timeout": 504,
    "overloaded": 529,
}


def openai_error_type(kind: ErrorKind) -> tuple[str, str | None]:
    """The OpenAI ``(type, default code)`` for a kind."""
    return _TYPE_BY_KIND.get(kind, ("server_error", None))


def encode_openai_error(err: ProxyError) -> bytes:
    etype, default_code = openai_error_type(err.kind)
    body = _ErrorBody(
        message=err.message,
        type=etype,
        param=err.param,
        code=err.code if err.code is not None else default_code,
    )
    return _enc.encode(_ErrorEnvelope(error=body))


def status_from_fields(etype: object, code: object) -> int:
    """An HTTP status for an error reported inside a 200 stream."""
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return code
    kind = kind_from_fields(etype, code)
    return STATUS_BY_KIND[kind] if kind is not None else 500


# OpenAI's rate-limit headers: (remaining, reset) of each limit; resets are
# durations ("1s", "6m0s").
RATE_LIMITS = (
    (b"x-ratelimit-remaining-requests", b"x-ratelimit-reset-requests"),
    (b"x-ratelimit-remaining-tokens", b"x-ratelimit-reset-tokens"),
)


def openai_stream_failure_hint(error: c.StreamError) -> FailureHint:
    """An in-band error's hint: its ``code`` (``context_length_exceeded``,
    ``insufficient_quota``, ...) and message, as in an error body."""
    return fields_hint(error.code, None, error.message)


def openai_rate_limit_wait(headers: RawHeaders, now: float) -> float | None:
    return exhausted_wait(headers, RATE_LIMITS, now)


__all__ = [
    "decode_openai_error",
    "encode_openai_error",
    "kind_from_fields",
    "openai_error_type",
    "openai_failure_hint",
    "openai_rate_limit_wait",
    "openai_stream_failure_hint",
    "status_from_fields",
]
