"""One ledger record per exchange: who asked, what served it, what it used and cost.

Tokens are counted the one way the ledger and the price table agree on, whatever the
provider's own convention: ``input_tokens`` is the prompt tokens read neither from nor
into a cache; cache reads and the two cache-write durations are apart; ``output_tokens``
includes the reasoning tokens, which ``reasoning_tokens`` also counts on their own.
"""

from __future__ import annotations

import time

import msgspec

from .. import canonical as c


class UsageRecord(msgspec.Struct, kw_only=True, gc=False):
    request_id: str
    time: str  # ISO 8601, UTC, when the request arrived
    owner: str  # the keyed hash of the client credential, or the application's owner id
    route: str | None  # the matched route's model glob (configuration, never the client's)
    upstream: str | None  # the serving target's configured name
    key_id: str | None  # the serving key's short hash, never the key
    client_protocol: str
    upstream_protocol: str | None
    requested_model: str | None
    served_model: str | None
    status: int
    stream: bool = False
    attempts: int = 0
    fallback_index: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0
    server_tool_requests: int = 0
    ttft_ms: float | None = None
    duration_ms: float = 0.0
    cost_usd: float | None = None  # None: the model has no price, never a guessed 0
    price_version: str | None = None


def count_tokens(rec: UsageRecord, usage: c.Usage) -> None:
    """The canonical usage in the ledger's categories (see the module docstring)."""
    cache_write = usage.cache_creation_tokens
    write_1h = min(usage.cache_creation_1h_tokens, cache_write)
    rec.input_tokens = max(usage.input_tokens - usage.cached_tokens - cache_write, 0)
    rec.output_tokens = usage.output_tokens
    rec.cache_read_tokens = usage.cached_tokens
    rec.cache_write_5m_tokens = cache_write - write_1h
    rec.cache_write_1h_tokens = write_1h
    rec.reasoning_tokens = usage.reasoning_tokens
    rec.server_tool_requests = usage.server_tool_requests


_second: list[tuple[int, str]] = [(-1, "")]  # the last whole second formatted


def iso_time(when: float) -> str:
    """``when`` (a Unix time) in ISO 8601, UTC, to the millisecond, as ``datetime``
    gives it (its microseconds rounded the same way); the second's text is made once
    per second, not per record."""
    whole = int(when)
    micro = round((when - whole) * 1e6)
    if micro >= 1_000_000:
        whole += 1
        micro -= 1_000_000
    known, text = _second[0]
    if known != whole:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _second[0] = (whole, text)
    return f"{text}.{micro // 1000:03d}+00:00"
