"""What an upstream's error says about a failure, in the vocabulary every codec meets:
OpenAI's error codes, which OpenAI-compatible servers (vLLM, llama.cpp, gateways) copy
and which the other protocols' compatible servers often answer with too.

``routing.failures`` classes a failure by its HTTP status; a hint refines that where
the provider's code or message says more: a 400 that is a context overflow (a fallback
with a larger window may take it), a 429 that is a spent quota (the key, not the
target, is done), a 429 for a request larger than the key's whole per-minute budget
(waiting never helps). Codecs read their own provider's shape first and fall back to
this. Only the failure path runs any of it.
"""

from __future__ import annotations

import re

from ...codec import NO_HINT, FailureClass, FailureHint
from .ratelimit import parse_duration
from .upstream_errors import error_object


class LazyPattern:
    """A case-insensitive regex compiled by its first search: hints run only on
    failures, and compiling every codec's patterns at import costs milliseconds."""

    __slots__ = ("_compiled", "_source")

    def __init__(self, source: str, flags: int = re.IGNORECASE) -> None:
        self._source = (source, flags)
        self._compiled: re.Pattern[str] | None = None

    def search(self, text: str) -> re.Match[str] | None:
        if self._compiled is None:
            self._compiled = re.compile(*self._source)
        return self._compiled.search(text)


# OpenAI ``error.code`` (or ``error.type``) -> class.
CLASS_BY_CODE: dict[str, FailureClass] = {
    "context_length_exceeded": "context",
    "insufficient_quota": "key",
    "invalid_api_key": "key",
    "account_deactivated": "key",
    "billing_hard_limit_reached": "key",
    "billing_not_active": "key",
    "access_terminated": "key",
    "content_policy_violation": "request",
    "content_filter": "request",
    "invalid_prompt": "request",
    "rate_limit_exceeded": "target",
    "server_error": "target",
    "overloaded": "target",
    "slow_down": "target",
    "vector_store_timeout": "target",
    # Responses' ``response.failed`` codes for an image the request carries.
    **dict.fromkeys(
        (
            "invalid_image",
            "invalid_image_format",
            "invalid_base64_image",
            "invalid_image_url",
            "image_too_large",
            "image_too_small",
            "image_parse_error",
            "image_content_policy_violation",
            "invalid_image_mode",
            "image_file_too_large",
            "unsupported_image_media_type",
            "empty_image_file",
            "failed_to_download_image",
            "image_file_not_found",
        ),
        "request",
    ),
}

# Messages of compatible servers that name no code: vLLM's "This model's maximum
# context length is 4096 tokens", llama.cpp's "the request exceeds the available
# context size", OpenAI's "Your input exceeds the context window of this model".
_CONTEXT_MESSAGE = LazyPattern(
    r"maximum context length|context[ _]length[ _]exceeded|context_window_exceeded"
    r"|exceeds? the (?:available )?context (?:size|window|length)"
)
_QUOTA_MESSAGE = LazyPattern(r"exceeded your current quota")
# OpenAI's 429 for one request larger than the key's tokens-per-minute limit.
_TOO_LARGE_MESSAGE = LazyPattern(r"\brequest too large for\b")
# "Please try again in 26.604s." / "in 20ms" / "in 1m30s"; "retry after 2 seconds".
_DELAY_DURATION = LazyPattern(r"(?:try again|retry) in ((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)\b", 0)
_DELAY_SECONDS = LazyPattern(r"(?:try again|retry) (?:in|after) (\d+(?:\.\d+)?) seconds?\b", 0)


def text(value: object) -> str | None:
    """A string field of an error object (codes are sometimes numbers)."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def retry_delay_in(message: str | None) -> float | None:
    """Seconds a message asks to wait ("Please try again in 26.604s.")."""
    if not message or ("again" not in message and "retry" not in message):
        return None
    found = _DELAY_DURATION.search(message)
    if found is not None:
        return parse_duration(found.group(1).encode())
    found = _DELAY_SECONDS.search(message)
    return float(found.group(1)) if found is not None else None


def refine(cls: FailureClass | None, message: str | None) -> FailureClass | None:
    """``cls`` (from a code, or None) corrected by what the message says."""
    if not message:
        return cls
    if cls is None or cls == "request":
        if _CONTEXT_MESSAGE.search(message):
            return "context"
        if _QUOTA_MESSAGE.search(message):
            return "key"
    elif cls == "target" and _TOO_LARGE_MESSAGE.search(message):
        return "context"
    return cls


def fields_hint(code: object, etype: object, message: object) -> FailureHint:
    """The hint an OpenAI-style error object's ``code``, ``type`` and ``message`` give."""
    code_s, type_s = text(code), text(etype)
    msg = message if isinstance(message, str) else None
    cls = CLASS_BY_CODE.get(code_s or "") or CLASS_BY_CODE.get(type_s or "")
    return FailureHint(refine(cls, msg), code_s or type_s, retry_delay_in(msg))


def loose_failure_hint(status: int, body: bytes) -> FailureHint:
    """The hint of an error body of any shape (OpenAI's, vLLM's flat one, ...)."""
    err = error_object(body)
    if err is None:
        return NO_HINT
    return fields_hint(err.get("code"), err.get("type"), err.get("message"))
