"""STUB (replaced by the classify branch): failure classes."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .. import canonical as c
from ..codec import Codec
from ..errors import ProxyError

FailureClass = Literal["request", "context", "key", "target"]
RawHeaders = list[tuple[bytes, bytes]]


@dataclass(frozen=True, slots=True)
class Failure:
    cls: FailureClass
    status: int
    reason: str
    retry_after: float | None = None


def classify_status(
    codec: Codec, status: int, headers: RawHeaders, body: bytes, now: float
) -> Failure:
    ra = retry_after_seconds(headers, now)
    if status in (401, 402, 403):
        return Failure("key", status, str(status), ra)
    if status in (408, 409, 429) or status >= 500:
        return Failure("target", status, str(status), ra)
    if b"context_length" in body:
        return Failure("context", status, "context length", ra)
    return Failure("request", status, str(status), ra)


def classify_stream_error(codec: Codec, error: c.StreamError) -> Failure:
    if error.status in (400, 404, 413, 422):
        return Failure("request", error.status, error.kind)
    return Failure("target", error.status, error.kind)


def classify_exception(exc: BaseException) -> Failure | None:
    if isinstance(exc, ProxyError):
        return Failure("target", exc.status, exc.message[:80])
    if isinstance(exc, OSError):
        return Failure("target", 502, type(exc).__name__)
    return None


def retry_after_seconds(headers: RawHeaders, now: float) -> float | None:
    for k, v in headers:
        if k.lower() == b"retry-after" and v.strip().isdigit():
            return float(v)
    return None


def backoff(attempt: int, retry_after: float | None, rand: Callable[[], float] = random.random) -> float:
    base = min(8.0, 0.5 * 2**attempt)
    wait = base / 2 + rand() * base / 2
    return max(wait, retry_after or 0.0)
