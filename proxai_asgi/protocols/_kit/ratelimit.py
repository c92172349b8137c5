"""Rate limits told in the client's own scheme.

Clients back off on the headers of their own provider, not on what another provider
says: the OpenAI SDKs read ``x-ratelimit-*`` (resets as durations such as ``6m0s``)
and ``retry-after``/``retry-after-ms``; the Anthropic SDKs and Claude Code read
``retry-after`` and ``anthropic-ratelimit-*`` (resets as RFC 3339 times), and Claude
Code stops retrying only when ``anthropic-ratelimit-unified-status`` says
``rejected`` — without it, a proxy in front of an exhausted quota makes it retry
forever. So a translated answer carries the upstream's limits renamed into the
client's scheme, next to the upstream's own headers. Nothing is invented: a header
appears only when the upstream stated what it says.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

RawHeaders = list[tuple[bytes, bytes]]

_KINDS = (b"requests", b"tokens")
_DURATION = re.compile(rb"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {b"h": 3600.0, b"m": 60.0, b"s": 1.0, b"ms": 0.001}


def _get(headers: RawHeaders, name: bytes) -> bytes | None:
    for k, v in headers:
        if k == name:
            return v
    return None


def parse_duration(value: bytes) -> float | None:
    """OpenAI's reset durations: ``1s``, ``6m0s``, ``1h2m3.5s``, ``20ms``."""
    parts = _DURATION.findall(value.strip())
    if not parts or b"".join(n + u for n, u in parts) != value.strip():
        return None
    return sum(float(n) * _UNIT[u] for n, u in parts)


def format_duration(seconds: float) -> bytes:
    if seconds < 1:
        return b"%dms" % max(0, round(seconds * 1000))
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return (f"{int(minutes)}m" + text if minutes else text).encode()


def parse_time(value: bytes) -> float | None:
    """Anthropic's reset times (RFC 3339)."""
    try:
        return datetime.fromisoformat(value.decode().replace("Z", "+00:00")).timestamp()
    except (ValueError, UnicodeDecodeError):
        return None


def format_time(epoch: float) -> bytes:
    return datetime.fromtimestamp(math.ceil(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ").encode()


def retry_after_seconds(headers: RawHeaders, now: float) -> int | None:
    """Whole seconds to wait, from ``retry-after`` (seconds or an HTTP date) or
    ``retry-after-ms``."""
    value = _get(headers, b"retry-after")
    if value is not None:
        if value.strip().isdigit():
            return int(value)
        # email.utils (~3 ms to import) only for the rare retry-after given as a date
        from email.utils import parsedate_to_datetime

        try:
            return max(0, math.ceil(parsedate_to_datetime(value.decode()).timestamp() - now))
        except (TypeError, ValueError, UnicodeDecodeError):
            pass
    ms = _get(headers, b"retry-after-ms")
    if ms is not None:
        try:
            return max(0, math.ceil(float(ms) / 1000))
        except ValueError:
            return None
    return None


def exhausted_wait(
    headers: RawHeaders, limits: tuple[tuple[bytes, bytes], ...], now: float
) -> float | None:
    """Seconds until the exhausted limits reset: of the ``(remaining, reset)`` header
    pairs whose remaining count is 0, the longest wait their resets give (durations
    such as ``6m0s`` or RFC 3339 times). None when no limit is exhausted: a reset of
    a limit with room left says nothing about this failure."""
    wait: float | None = None
    for remaining, reset in limits:
        left = _get(headers, remaining)
        value = _get(headers, reset)
        if left is None or left.strip() != b"0" or value is None:
            continue
        seconds = parse_duration(value)
        if seconds is None:
            when = parse_time(value)
            if when is None:
                continue
            seconds = max(0.0, when - now)
        wait = seconds if wait is None else max(wait, seconds)
    return wait


def _add(out: RawHeaders, headers: RawHeaders, name: bytes, value: bytes) -> None:
    if _get(headers, name) is None and _get(out, name) is None:
        out.append((name, value))


def _openai_name(kind: bytes, field: bytes) -> bytes:
    return b"x-ratelimit-%s-%s" % (field, kind)


def _anthropic_name(kind: bytes, field: bytes) -> bytes:
    return b"anthropic-ratelimit-%s-%s" % (kind, field)


def _renamed(
    headers: RawHeaders,
    source: Callable[[bytes, bytes], bytes],
    target: Callable[[bytes, bytes], bytes],
    reset: Callable[[bytes], bytes | None],
    now: float,
) -> RawHeaders:
    """The upstream's limits under the client's names (``reset`` converts a reset
    value between the schemes), and ``retry-after`` in whole seconds."""
    out: RawHeaders = []
    for kind in _KINDS:
        for field in (b"limit", b"remaining"):
            value = _get(headers, source(kind, field))
            if value is not None:
                _add(out, headers, target(kind, field), value)
        value = _get(headers, source(kind, b"reset"))
        converted = reset(value) if value is not None else None
        if converted is not None:
            _add(out, headers, target(kind, b"reset"), converted)
    wait = retry_after_seconds(headers, now)
    if wait is not None:
        _add(out, headers, b"retry-after", str(wait).encode())
    return out


def for_anthropic_client(
    headers: RawHeaders, *, exhausted: bool, now: float | None = None
) -> RawHeaders:
    """Headers to add for an Anthropic client: the upstream's OpenAI-style limits
    renamed, ``retry-after`` in seconds, and, when the upstream said its quota is
    exhausted, the unified ``rejected`` status and ``x-should-retry: false``."""
    at = time.time() if now is None else now

    def reset(value: bytes) -> bytes | None:
        seconds = parse_duration(value)
        return format_time(at + seconds) if seconds is not None else None

    out = _renamed(headers, _openai_name, _anthropic_name, reset, at)
    if exhausted:
        _add(out, headers, b"anthropic-ratelimit-unified-status", b"rejected")
        _add(out, headers, b"x-should-retry", b"false")
    return out


def for_openai_client(
    headers: RawHeaders, *, exhausted: bool, now: float | None = None
) -> RawHeaders:
    """Headers to add for an OpenAI client: the upstream's Anthropic-style limits
    renamed (resets as durations from now), ``retry-after`` in seconds, and
    ``x-should-retry: false`` when the upstream said its quota is exhausted."""
    at = time.time() if now is None else now

    def reset(value: bytes) -> bytes | None:
        when = parse_time(value)
        return format_duration(max(0.0, when - at)) if when is not None else None

    out = _renamed(headers, _anthropic_name, _openai_name, reset, at)
    rejected = _get(headers, b"anthropic-ratelimit-unified-status") == b"rejected"
    if exhausted or rejected:
        _add(out, headers, b"x-should-retry", b"false")
    return out


def for_gemini_client(headers: RawHeaders, *, exhausted: bool) -> RawHeaders:
    """Headers to add for a Gemini client: Google states no limits in headers (its
    errors carry RetryInfo), so only the wait, when the upstream gave one."""
    wait = retry_after_seconds(headers, time.time())
    if wait is None or any(k == b"retry-after" for k, _ in headers):
        return []
    return [(b"retry-after", str(wait).encode())]
