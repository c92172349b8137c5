"""Failure classes: what a failed attempt means for the next one (sans-IO).

An attempt fails with a non-2xx answer, an in-band error in a 200 stream, or a
transport exception. Its class says what routing does next:

- ``request``: the request itself is refused (invalid, a content-policy refusal):
  never retried, answered as the provider answered.
- ``context``: the prompt does not fit this target (context length exceeded, 413,
  one request larger than the key's whole per-minute budget): not retried on the same
  target; a fallback may take it.
- ``key``: the key is refused or spent (401, 402, 403, ``insufficient_quota``,
  Gemini's ``API_KEY_INVALID``): the next key at once, this one cooled down long.
- ``target``: the target is busy or broken (408, 409, 429, 5xx, 529, refused or reset
  connections, timeouts, in-band overloaded and server errors): retried with backoff,
  then the next key, then the next fallback.

The HTTP status decides unless the codec's hint (``Codec.failure_hint``: its
provider's codes, messages and ``RetryInfo``) says more; nothing here names a
provider. Runs only on failures.
"""

from __future__ import annotations

import errno
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from random import random
from typing import TYPE_CHECKING

from ..client_values import loggable
from ..codec import FailureClass as FailureClass
from ..errors import ProxyError

if TYPE_CHECKING:
    from .. import canonical as c
    from ..codec import Codec

RawHeaders = list[tuple[bytes, bytes]]

# Statuses whose class is not their family's (4xx request, the rest target).
_CLASS_BY_STATUS: dict[int, FailureClass] = {
    401: "key",
    402: "key",
    403: "key",
    408: "target",  # request timeout
    409: "target",  # OpenAI's SDKs retry a conflict
    413: "context",  # too large for this target; another may take it
    425: "target",  # too early
    429: "target",
}
# Errnos of a connection that failed or broke (OSErrors that are the network's).
_NETWORK_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.EHOSTDOWN,
    }
)
_MAX_CODE = 80  # of a provider's code in a reason


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt: its class, the status it is answered with, a short
    loggable reason ("429 rate_limit_exceeded"), and the wait the upstream asked for."""

    cls: FailureClass
    status: int
    reason: str
    retry_after: float | None = None


def status_class(status: int) -> FailureClass:
    """The class a bare status implies."""
    cls = _CLASS_BY_STATUS.get(status)
    if cls is not None:
        return cls
    return "request" if 400 <= status < 500 else "target"


def _reason(status: int, code: str | None) -> str:
    if not code:
        return str(status)
    return f"{status} {loggable(code[:_MAX_CODE])}"


def classify_status(
    codec: Codec, status: int, headers: RawHeaders, body: bytes, now: float
) -> Failure:
    """A non-2xx upstream answer (``body``: at most 1 MB of it; ``now``: epoch
    seconds, for a retry-after given as a date) of ``codec``'s protocol."""
    hint = codec.failure_hint(status, body)
    wait = retry_after_seconds(headers, now)
    if wait is None:
        wait = hint.retry_after
    if wait is None:
        wait = codec.rate_limit_wait(headers, now)
    return Failure(hint.cls or status_class(status), status, _reason(status, hint.code), wait)


def classify_stream_error(codec: Codec, error: c.StreamError) -> Failure:
    """An in-band error that ``codec``'s stream decoder produced (Anthropic's
    ``event: error``, ``response.failed``, an error chunk or frame)."""
    hint = codec.stream_failure_hint(error)
    cls = hint.cls or status_class(error.status)
    return Failure(
        cls, error.status, _reason(error.status, hint.code or error.kind), hint.retry_after
    )


def classify_exception(exc: BaseException) -> Failure | None:
    """A transport failure (``ProxyError`` from our transports, httpx's transport
    errors, connection resets and refusals, timeouts), or None when ``exc`` is no
    routing failure (a bug, a cancellation: re-raise it). A group is classified by its
    first member when every member is a routing failure."""
    if isinstance(exc, BaseExceptionGroup):
        found = [classify_exception(e) for e in exc.exceptions]
        return found[0] if found and all(f is not None for f in found) else None
    if isinstance(exc, ProxyError):
        return Failure(status_class(exc.status), exc.status, f"{exc.status} {exc.kind}")
    name = type(exc).__name__
    httpx = sys.modules.get("httpx")  # never imported for this: only if a transport did
    if httpx is not None:
        if isinstance(exc, httpx.TimeoutException):
            return Failure("target", 504, f"504 {name}")
        if isinstance(exc, (httpx.NetworkError, httpx.RemoteProtocolError, httpx.DecodingError)):
            return Failure("target", 502, f"502 {name}")
        if isinstance(exc, httpx.HTTPError):
            return None  # a request we could not build or send: ours to fix
    anyio = sys.modules.get("anyio")
    if anyio is not None and isinstance(exc, anyio.BrokenResourceError):
        return Failure("target", 502, f"502 {name}")
    if isinstance(exc, TimeoutError):  # asyncio's and socket's too
        return Failure("target", 504, f"504 {name}")
    if isinstance(exc, (ConnectionError, EOFError)) or (
        isinstance(exc, OSError) and exc.errno in _NETWORK_ERRNOS
    ):
        return Failure("target", 502, f"502 {name}")
    ssl, socket = sys.modules.get("ssl"), sys.modules.get("socket")
    if (ssl is not None and isinstance(exc, ssl.SSLError)) or (
        socket is not None and isinstance(exc, socket.gaierror)  # a host that resolves to nothing
    ):
        return Failure("target", 502, f"502 {name}")
    return None


def retry_after_seconds(
    headers: RawHeaders, now: float, codec: Codec | None = None
) -> float | None:
    """Seconds the upstream asked to wait: ``retry-after-ms``, else ``retry-after``
    (seconds or an HTTP date, against ``now`` in epoch seconds), else, with ``codec``,
    the reset of its exhausted rate limit (``Codec.rate_limit_wait``)."""
    ms = retry_after = None
    for name, value in headers:
        if name == b"retry-after-ms":
            ms = value
        elif name == b"retry-after":
            retry_after = value
    if ms is not None:
        wait = _number(ms)
        if wait is not None:
            return wait / 1000
    if retry_after is not None:
        wait = _number(retry_after)
        if wait is None:
            wait = _http_date_wait(retry_after, now)
        if wait is not None:
            return wait
    return codec.rate_limit_wait(headers, now) if codec is not None else None


def _number(value: bytes) -> float | None:
    try:
        n = float(value)
    except ValueError:
        return None
    return n if math.isfinite(n) and n >= 0 else None


def _http_date_wait(value: bytes, now: float) -> float | None:
    # email.utils (~3 ms to import) only for the rare retry-after given as a date
    from email.utils import parsedate_to_datetime

    try:
        date = parsedate_to_datetime(value.decode("latin-1"))
        if date.tzinfo is None:  # "-0000": HTTP dates are GMT, not our local time
            date = date.replace(tzinfo=UTC)
        when = date.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when - now)


def backoff(
    attempt: int,
    retry_after: float | None = None,
    rand: Callable[[], float] = random,
    *,
    base: float = 0.5,
    factor: float = 2.0,
    cap: float = 8.0,
) -> float:
    """Seconds to wait before retry number ``attempt`` (1 for the first) on the same
    target: exponential (``base * factor**(attempt-1)``, at most ``cap``) with equal
    jitter (between half and all of it, so that retries spread out but never come at
    once), and never shorter than ``retry_after`` (plus up to a tenth of it, so that
    clients told the same time do not all come back together). ``rand`` returns a
    float in [0, 1). A caller compares a long ``retry_after`` with its budget: it is
    not capped here."""
    ceiling = min(cap, base * factor ** max(0, attempt - 1))
    delay = ceiling / 2 + ceiling / 2 * rand()
    if retry_after is not None and retry_after > 0:
        delay = max(delay, retry_after + retry_after / 10 * rand())
    return delay
