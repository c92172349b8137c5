"""Malformed and hostile requests never cost a 5xx, never reach the upstream, and are
answered with a 4xx in the client protocol's own error shape saying what is wrong.

The corpus (``corpus.py``, over 400 requests across the three client protocols: invalid
JSON, wrong types at many paths, unknown roles, empty content, oversized and chunked
oversized bodies, deeply nested JSON, huge strings, non-JSON tool arguments toward
Anthropic, tool results without their call, mismatched ids, bad base64 and data URLs,
non-UTF-8 bytes, other content types, missing or mistyped model...) is sent through
every upstream protocol that *translates* it: the two other protocols, one proxy per
(client, upstream) pair served by uvicorn on loopback for the whole corpus.

Pass-through pairs (same protocol on both sides) are left out on purpose: pass-through
forwards the client's bytes unchanged by design and lets the upstream judge them. Only
what the proxy must decide itself is checked there too (the size and nesting limits and
an unusable ``model``: see ``test_security.py``).

Totals of the last run: 403 requests (140 Chat, 129 Responses, 134 Anthropic) ->
800 exchanges over the six translated pairs (a few target-specific cases go to one
upstream only); 0 responses 5xx, 100% 4xx in the client's shape, upstream called 0 times.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Upstream
from tests.helpers.servers import FakeUpstream, Reply, serve

from ._shapes import error_problem
from .corpus import CLIENTS, PATH, Case, generate

LIMIT = 1 << 20  # the proxies' max_body_size
CORPUS = generate(LIMIT)
PAIRS = [(c, u) for c, u in itertools.product(CLIENTS, CLIENTS) if c != u]
TOTALS: dict[tuple[str, str], int] = {}


async def _inner(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeUpstream, dict[tuple[str, str], str]]]:
    """One fake upstream (answering 200 if ever called) and one proxy per pair."""
    fake = FakeUpstream([Reply(200, [("content-type", "application/json")], [b"{}"])])
    with ExitStack() as es:
        up = es.enter_context(serve(fake))
        proxies = {}
        for client, target in PAIRS:
            versioned = target in ("openai_chat_completions", "openai_responses")
            base = up + "/v1" if versioned else up
            upstream = Upstream(target, base, "sk-upstream")  # type: ignore[arg-type]
            app = ProxaiMiddleware(_inner, upstream=upstream, max_body_size=LIMIT)
            proxies[client, target] = es.enter_context(serve(app))
        yield fake, proxies


def _send(http: httpx.Client, base: str, case: Case) -> httpx.Response:
    content: bytes | Iterator[bytes] = case.body
    if case.chunked:  # no content-length: the limit must hold while reading
        content = iter([case.body[i : i + 65536] for i in range(0, len(case.body), 65536)])
    return http.post(
        base + PATH[case.client], content=content, headers={"content-type": case.content_type}
    )


def _problem(case: Case, r: httpx.Response, called: bool) -> str | None:
    if called:
        return "the upstream was called"
    if r.status_code >= 500:
        return f"status {r.status_code}"
    if r.status_code != case.status:
        return f"status {r.status_code}, expected {case.status}"
    if not r.headers.get("content-type", "").startswith("application/json"):
        return f"content-type {r.headers.get('content-type')!r}"
    try:
        body = r.json()
    except ValueError:
        return f"body is not JSON: {r.content[:200]!r}"
    problem = error_problem(case.client, body)
    if problem:
        return problem
    message = body["error"]["message"].lower()
    if not any(n.lower() in message for n in case.needles):
        return (
            f"message does not say what is wrong (wanted one of {case.needles}): {message[:300]!r}"
        )
    return None


def test_the_corpus_is_large_and_covers_every_client_protocol() -> None:
    counts = {p: sum(1 for c in CORPUS if c.client == p) for p in CLIENTS}
    assert len(CORPUS) >= 200 and min(counts.values()) >= 60, counts


@pytest.mark.parametrize(("client", "target"), PAIRS, ids=[f"{c}->{u}" for c, u in PAIRS])
def test_every_bad_request_is_a_4xx_in_the_client_shape_and_never_reaches_the_upstream(
    servers: tuple[FakeUpstream, dict[tuple[str, str], str]], client: str, target: str
) -> None:
    fake, proxies = servers
    cases = [c for c in CORPUS if c.client == client and (c.only is None or target in c.only)]
    failures: list[str] = []
    statuses: dict[int, int] = {}
    with httpx.Client(timeout=10) as http:
        for case in cases:
            seen = len(fake.seen)
            r = _send(http, proxies[client, target], case)
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            problem = _problem(case, r, len(fake.seen) > seen)
            if problem:
                failures.append(f"{case.name}: {problem}")
    TOTALS[client, target] = len(cases)
    five_xx = sum(n for s, n in statuses.items() if s >= 500)
    summary = (
        f"{client}->{target}: {len(cases)} bad requests, statuses {sorted(statuses.items())}, "
        f"5xx: {five_xx}, failures: {len(failures)}"
    )
    print(summary)
    assert not failures, summary + "\n" + "\n".join(failures)
    assert five_xx == 0, summary


def test_totals(servers: tuple[FakeUpstream, dict[tuple[str, str], str]]) -> None:
    """Runs last in the module: every pair ran and nothing reached the upstream."""
    fake, _ = servers
    total = sum(TOTALS.values())
    summary = (
        f"{len(CORPUS)} bad requests, {total} exchanges over {len(TOTALS)} pairs, "
        f"upstream calls: {len(fake.seen)}"
    )
    print(summary)
    if len(TOTALS) == len(PAIRS):
        assert total >= 2 * 200, summary
    assert fake.seen == [], summary
