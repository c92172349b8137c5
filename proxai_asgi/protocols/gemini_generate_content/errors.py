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

from ... import canonical as c
from ...codec import FailureClass, FailureHint
from ...errors import ErrorKind, ProxyError
from ...lazy_decoder import LazyDecoder
from .._kit.failure_hints import LazyPattern, fields_hint, loose_failure_hint
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
    details: Any = None  # google.rpc details: ErrorInfo, RetryInfo, QuotaFailure, ...


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


def stream_error(data: bytes) -> c.StreamError | None:
    """A mid-stream ``data: {"error": ...}`` frame as the stream's error (its code the
    ``ErrorInfo`` reason or the status name); None for anything else."""
    try:
        body = _body_decoder.decode(data)
    except (msgspec.DecodeError, ValueError):
        return None
    err = from_google(body.error, None) if body.error is not None else None
    if err is None or body.error is None:
        return None
    code = _Details(body.error.details).reason or body.error.status
    return c.StreamError(status=err.status, kind=err.kind, message=err.message, code=code)


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


# ---- failures (routing): what a Google error says beyond its status

# status name -> class; INVALID_ARGUMENT, NOT_FOUND and the like leave it to the
# HTTP status (a request failure). FAILED_PRECONDITION is the project's: "Gemini API
# free tier is not available in your country. Please enable billing".
_CLASS_BY_STATUS: dict[str, FailureClass] = {
    "UNAUTHENTICATED": "key",
    "PERMISSION_DENIED": "key",
    "FAILED_PRECONDITION": "key",
    "RESOURCE_EXHAUSTED": "target",
    "UNAVAILABLE": "target",
    "INTERNAL": "target",
    "UNKNOWN": "target",
    "DEADLINE_EXCEEDED": "target",
    "ABORTED": "target",
}
# ErrorInfo reasons that condemn the key (a 400 INVALID_ARGUMENT "API key not valid"
# carries API_KEY_INVALID) or its project.
_KEY_REASONS = frozenset(
    {
        "API_KEY_INVALID",
        "API_KEY_EXPIRED",
        "API_KEY_SERVICE_BLOCKED",
        "SERVICE_DISABLED",
        "CONSUMER_SUSPENDED",
        "BILLING_DISABLED",
    }
)
# "The input token count (1205828) exceeds the maximum number of tokens allowed
# (1048576)."
_CONTEXT_MESSAGE = LazyPattern(r"exceeds the maximum number of tokens")
_list_decoder: LazyDecoder[list[_GoogleErrorBody]] = LazyDecoder(list[_GoogleErrorBody])


class _Details:
    """What a Google error's ``details`` say: the ErrorInfo reason, RetryInfo's delay,
    and whether a spent quota is a daily one (``...PerDay...`` quota ids: waiting
    minutes never helps, the key is done for the day)."""

    __slots__ = ("daily", "reason", "retry_after")

    def __init__(self, details: object) -> None:
        self.reason: str | None = None
        self.retry_after: float | None = None
        self.daily = False
        for d in details if isinstance(details, list) else ():
            if not isinstance(d, dict):
                continue
            kind = d.get("@type")
            kind = kind if isinstance(kind, str) else ""
            if kind.endswith("ErrorInfo") and isinstance(d.get("reason"), str):
                self.reason = d["reason"]
                meta = d.get("metadata")
                limit = meta.get("quota_limit") if isinstance(meta, dict) else None
                self.daily |= isinstance(limit, str) and "PerDay" in limit
            elif kind.endswith("RetryInfo"):
                self.retry_after = _proto_duration(d.get("retryDelay"))
            elif kind.endswith("QuotaFailure") and isinstance(d.get("violations"), list):
                self.daily |= any(
                    isinstance(v, dict) and "PerDay" in str(v.get("quotaId", ""))
                    for v in d["violations"]
                )


def _proto_duration(value: object) -> float | None:
    """A google.protobuf.Duration in JSON: ``"38s"``, ``"0.5s"``."""
    if not isinstance(value, str) or not value.endswith("s"):
        return None
    try:
        seconds = float(value[:-1])
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _google_hint(err: _GoogleError) -> FailureHint:
    details = _Details(err.details)
    name = err.status if isinstance(err.status, str) else None
    message = err.message if isinstance(err.message, str) else ""
    cls: FailureClass | None = _CLASS_BY_STATUS.get(name or "")
    if details.reason in _KEY_REASONS or (name == "RESOURCE_EXHAUSTED" and details.daily):
        cls = "key"
    elif name == "INVALID_ARGUMENT" and _CONTEXT_MESSAGE.search(message):
        cls = "context"
    return FailureHint(cls, details.reason or name, details.retry_after)


def _parsed(body: bytes) -> _GoogleError | None:
    """The Google error of a body, also in the ``[{"error": ...}]`` array a
    streamGenerateContent call without ``alt=sse`` answers with."""
    try:
        if body.lstrip()[:1] == b"[":
            items = _list_decoder.decode(body)
            return items[0].error if items else None
        return _body_decoder.decode(body).error
    except (msgspec.DecodeError, ValueError):
        return None


def failure_hint(status: int, body: bytes) -> FailureHint:
    err = _parsed(body)
    if err is None or not isinstance(err.status, str):
        return loose_failure_hint(status, body)  # a Gemini-compatible server's own shape
    return _google_hint(err)


def stream_failure_hint(error: c.StreamError) -> FailureHint:
    """An error frame's hint: its code is the ErrorInfo reason or the status name."""
    code = error.code
    if code in _KEY_REASONS:
        return FailureHint("key", code, None)
    if code in _CLASS_BY_STATUS or code == "INVALID_ARGUMENT":
        err = _GoogleError(message=error.message, status=code)
        return _google_hint(err)
    return fields_hint(code, None, error.message)


def rate_limit_wait(headers: list[tuple[bytes, bytes]], now: float) -> float | None:
    """Google states no limits in headers: its errors carry RetryInfo."""
    return None
