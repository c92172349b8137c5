"""A rate limit reaches the client in its own provider's scheme, on both transports,
in every translated direction, streamed and not: ``retry-after`` and the client's
rate-limit headers, mapped from the upstream's own; nothing invented. The 429 is the
answer here, so the proxy does not retry it (``max_retries=0``; tests/routing/ retries)."""

from __future__ import annotations

import json
import time
from datetime import datetime

import httpx
import pytest

from proxai_asgi.protocols._kit import ratelimit
from tests.helpers.servers import FakeUpstream, Reply

from .conftest import Stack
from .test_upstream_errors import PAIRS, client_request, upstream_error

OPENAI_LIMITS = [
    ("retry-after-ms", "2500"),
    ("x-ratelimit-limit-requests", "500"),
    ("x-ratelimit-remaining-requests", "0"),
    ("x-ratelimit-reset-requests", "6m0s"),
    ("x-ratelimit-limit-tokens", "30000"),
    ("x-ratelimit-remaining-tokens", "12"),
    ("x-ratelimit-reset-tokens", "1.5s"),
]
ANTHROPIC_LIMITS = [
    ("retry-after", "30"),
    ("anthropic-ratelimit-requests-limit", "50"),
    ("anthropic-ratelimit-requests-remaining", "0"),
    ("anthropic-ratelimit-tokens-limit", "80000"),
    ("anthropic-ratelimit-tokens-remaining", "7"),
]


def limits_of(upstream: str) -> list[tuple[str, str]]:
    if upstream == "anthropic_messages":
        reset = ratelimit.format_time(time.time() + 30).decode()
        return [*ANTHROPIC_LIMITS, ("anthropic-ratelimit-requests-reset", reset)]
    return OPENAI_LIMITS


def rfc3339(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("client", "upstream"), PAIRS)
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_429_carries_retry_after_and_the_clients_rate_limit_headers(
    stack: Stack, fake: FakeUpstream, inner: bool, client: str, upstream: str, stream: bool
) -> None:
    headers = [("content-type", "application/json"), *limits_of(upstream)]
    fake.push(Reply(429, headers, [upstream_error(upstream, 429)]))
    proxy = stack.proxy(fake, upstream, inner=inner, max_retries=0)  # type: ignore[arg-type]
    path, body = client_request(client, stream)
    t0 = time.time()
    r = httpx.post(proxy + path, json=body, timeout=20)
    assert r.status_code == 429
    h = r.headers
    if upstream == "anthropic_messages":
        assert h["retry-after"] == "30"
    else:  # only retry-after-ms was given: 2.5 s, in whole seconds
        assert h["retry-after"] == "3" and h["retry-after-ms"] == "2500"
    if client == "anthropic_messages":  # OpenAI limits, renamed
        assert h["anthropic-ratelimit-requests-limit"] == "500"
        assert h["anthropic-ratelimit-requests-remaining"] == "0"
        assert h["anthropic-ratelimit-tokens-remaining"] == "12"
        assert 355 <= rfc3339(h["anthropic-ratelimit-requests-reset"]) - t0 <= 365
        assert "anthropic-ratelimit-unified-status" not in h  # a limit, not a quota
    elif upstream == "anthropic_messages":  # Anthropic limits, renamed
        assert h["x-ratelimit-limit-requests"] == "50"
        assert h["x-ratelimit-remaining-requests"] == "0"
        assert h["x-ratelimit-limit-tokens"] == "80000"
        reset = ratelimit.parse_duration(h["x-ratelimit-reset-requests"].encode())
        assert reset is not None and 20 <= reset <= 31
    else:  # OpenAI to OpenAI: its own headers
        assert h["x-ratelimit-reset-requests"] == "6m0s"


@pytest.mark.parametrize("client", ["anthropic_messages", "openai_chat_completions"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_an_exhausted_quota_tells_the_client_not_to_retry(
    stack: Stack, fake: FakeUpstream, inner: bool, client: str
) -> None:
    err = {
        "message": "You exceeded your current quota",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
    fake.push(
        Reply(429, [("content-type", "application/json")], [json.dumps({"error": err}).encode()])
    )
    proxy = stack.proxy(fake, "openai_responses", inner=inner, max_retries=0)
    path, body = client_request(client, False)
    r = httpx.post(proxy + path, json=body, timeout=20)
    assert r.status_code == 429 and r.headers["x-should-retry"] == "false"
    if client == "anthropic_messages":
        assert r.headers["anthropic-ratelimit-unified-status"] == "rejected"
        assert r.json()["error"]["type"] == "rate_limit_error"


@pytest.mark.parametrize(("client", "upstream"), PAIRS)
def test_no_limit_is_invented_when_the_upstream_states_none(
    stack: Stack, fake: FakeUpstream, client: str, upstream: str
) -> None:
    fake.push(Reply(429, [("content-type", "application/json")], [upstream_error(upstream, 429)]))
    proxy = stack.proxy(fake, upstream, max_retries=0)  # type: ignore[arg-type]
    path, body = client_request(client, False)
    r = httpx.post(proxy + path, json=body, timeout=20)
    assert r.status_code == 429
    assert not [k for k in r.headers if "ratelimit" in k or k.startswith("retry-after")]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("1h2m3.5s", 3723.5), ("20ms", 0.02), ("0s", 0.0)],
)
def test_openai_durations_parse_and_format_back(text: str, seconds: float) -> None:
    assert ratelimit.parse_duration(text.encode()) == pytest.approx(seconds)
    again = ratelimit.parse_duration(ratelimit.format_duration(seconds))
    assert again == pytest.approx(seconds, abs=0.001)


@pytest.mark.parametrize("bad", [b"", b"soon", b"5", b"1x", b"1s junk"])
def test_a_duration_that_is_not_one_is_ignored(bad: bytes) -> None:
    assert ratelimit.parse_duration(bad) is None


GEMINI_PAIRS = [
    ("gemini_generate_content", u) for u in ("openai_chat_completions", "anthropic_messages")
] + [
    (c, "gemini_generate_content")
    for c in ("openai_chat_completions", "openai_responses", "anthropic_messages")
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("client", "upstream"), GEMINI_PAIRS)
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_429_in_gemini_directions_carries_retry_after(
    stack: Stack, fake: FakeUpstream, inner: bool, client: str, upstream: str, stream: bool
) -> None:
    """Google states no limits in headers: what reaches either side is the wait, as
    ``retry-after`` in whole seconds (from ``retry-after-ms`` when that is all there is)."""
    wait = (
        [("retry-after-ms", "2500")]
        if upstream != "gemini_generate_content"
        else [("retry-after", "7")]
    )
    fake.push(
        Reply(429, [("content-type", "application/json"), *wait], [upstream_error(upstream, 429)])
    )
    proxy = stack.proxy(fake, upstream, inner=inner, max_retries=0)  # type: ignore[arg-type]
    path, body = client_request(client, stream)
    r = httpx.post(proxy + path, json=body, timeout=20)
    assert r.status_code == 429
    assert r.headers["retry-after"] == ("7" if upstream == "gemini_generate_content" else "3")
