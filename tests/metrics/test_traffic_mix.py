"""A known traffic mix through ``ProxaiMiddleware(metrics=True)``, then one scrape
parsed with the client library's own parser: every count and token sum is exactly
what the traffic implies, computed from the fake upstreams' usage blocks by hand.

The mix: every client protocol x every upstream protocol, streamed and not, over an
HTTP upstream and the wrapped app; one request retried after a 503; one answered by
a fallback after its route's upstream failed; one with fields the translation drops.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx

from proxai_asgi import Fallback, ProxaiMiddleware, Route, Upstream
from proxai_asgi.codec import ProtocolName
from tests.helpers.servers import Seen, serve

from .helpers import (
    ANTHROPIC,
    CATEGORIES,
    CHAT,
    GEMINI,
    PROTOCOLS,
    Board,
    Scrape,
    categories,
    error,
    model_of,
    protocol_of,
    request,
)

TRANSPORTS = ("http", "inner")
PROVIDERS = {ANTHROPIC: "anthropic", CHAT: "openai", GEMINI: "gcp.gemini"}


def upstream(protocol: ProtocolName, transport: str, base: str, name: str, **kw: Any) -> Upstream:
    if transport == "inner":
        return Upstream.inner_app(protocol, name=name, **kw)
    url = base if protocol in (ANTHROPIC, GEMINI) else base + "/v1"
    return Upstream(protocol, url, name=name, **kw)


def routes(base: str) -> list[Route]:
    out = [
        Route(f"{p}-{t}", upstream(p, t, base, f"{p}-{t}")) for p in PROTOCOLS for t in TRANSPORTS
    ]
    out.append(Route("retry", upstream(ANTHROPIC, "http", base, "retrying", max_retries=1)))
    broken = upstream(CHAT, "inner", base, "broken", max_retries=0)
    rescue = upstream(GEMINI, "http", base, "rescue")
    out.append(Route("fallback", broken, fallbacks=[Fallback(rescue)]))
    return out


class Expected:
    """What the scrape must show, added up request by request."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str, str, str]] = Counter()
        self.tokens: Counter[tuple[str, str]] = Counter()
        self.answers: Counter[str] = Counter()  # answered requests per upstream
        self.with_usage: Counter[str] = Counter()  # those whose usage is known
        self.streamed = 0

    def answered(self, client: str, up: ProtocolName, route: str, label: str, stream: bool) -> None:
        self.requests[(client, up, route, label)] += 1
        self.answers[label] += 1
        self.streamed += stream
        self.with_usage[label] += 1
        for kind, count in categories(up).items():
            self.tokens[(label, kind)] += count


def test_a_known_traffic_mix_scrapes_to_exactly_its_counts_and_token_sums() -> None:
    retried: list[Seen] = []

    def first_retry_fails(seen: Seen) -> Any:
        if model_of(seen) == "retry":
            retried.append(seen)
            return error(503) if len(retried) == 1 else None
        return None

    def broken_fails(seen: Seen) -> Any:
        return error(500) if model_of(seen) == "fallback" and protocol_of(seen) == CHAT else None

    board = Board(first_retry_fails, broken_fails)
    expected = Expected()
    with serve(board) as base:
        app = ProxaiMiddleware(board, routes=routes(base), metrics=True, max_concurrency=64)
        with serve(app) as url, httpx.Client(base_url=url, timeout=30) as http:

            def ask(client: ProtocolName, model: str, stream: bool, **extra: Any) -> httpx.Response:
                path, body = request(client, model, stream=stream)
                r = http.post(path, json={**body, **extra}, headers={"x-api-key": "k"})
                assert r.status_code == 200, (client, model, stream, r.text)
                return r

            for client in PROTOCOLS:
                for up in PROTOCOLS:
                    for transport in TRANSPORTS:
                        for stream in (False, True):
                            route = f"{up}-{transport}"
                            ask(client, route, stream)
                            expected.answered(client, up, route, route, stream)
            ask(ANTHROPIC, "retry", False)
            expected.answered(ANTHROPIC, ANTHROPIC, "retry", "retrying", False)
            ask(CHAT, "fallback", True)
            expected.answered(CHAT, GEMINI, "fallback", "rescue", True)
            dropped = ask(CHAT, f"{ANTHROPIC}-inner", False, logit_bias={"50256": -100}, zzz=1)
            expected.answered(CHAT, ANTHROPIC, f"{ANTHROPIC}-inner", f"{ANTHROPIC}-inner", False)
            assert dropped.headers["x-proxai-dropped-fields"] == "logit_bias, zzz"
            scrape = http.get("/metrics")
    assert scrape.headers["content-type"].startswith("text/plain; version=0.0.4")
    m = Scrape.parse(scrape.text)
    total = sum(expected.requests.values())

    # Requests by client protocol x upstream protocol x status class, per route.
    assert m.total("proxai_requests_total") == total
    for (client, up, route, label), n in expected.requests.items():
        labels = {"client_protocol": client, "upstream_protocol": up, "route": route}
        assert m.total("proxai_requests_total", **labels, status_class="2xx", upstream=label) == n
    assert m.total("gen_ai_server_request_duration_seconds_count", error_type="") == total
    assert m.total("gen_ai_server_time_to_first_token_seconds_count") == expected.streamed
    assert m.total("proxai_queue_wait_seconds_count", outcome="admitted") == total
    assert m.total("proxai_requests_in_flight") == 0

    # Tokens: the ledger's categories per upstream, and the conventions' histogram.
    for (label, kind), n in expected.tokens.items():
        assert m.total("proxai_tokens_total", upstream=label, gen_ai_token_type=kind) == n
    for label, answers in expected.answers.items():
        prompt = sum(expected.tokens[(label, k)] for k in CATEGORIES[:1] + CATEGORIES[2:5])
        usage = "gen_ai_client_token_usage"
        assert m.total(usage + "_sum", upstream=label, gen_ai_token_type="input") == prompt
        assert m.total(usage + "_sum", upstream=label, gen_ai_token_type="output") == (
            expected.tokens[(label, "output")]
        )
        assert m.total(usage + "_count", upstream=label, gen_ai_token_type="input") == (
            expected.with_usage[label]
        )
        assert m.total("proxai_attempts_total", upstream=label, outcome="success") == answers
    for protocol, provider in PROVIDERS.items():
        label = f"{protocol}-http"
        assert m.total(
            "gen_ai_client_operation_duration_seconds_count",
            upstream=label,
            gen_ai_provider_name=provider,
            gen_ai_operation_name="generate_content" if protocol == GEMINI else "chat",
        ) == expected.answers[label]

    # The retry, the fallback and what routing learned on the way.
    assert m.total("proxai_attempts_total", outcome="failure") == 2
    assert m.total("proxai_attempts_total", upstream="retrying", failure_class="target") == 1
    assert m.total("proxai_attempts_total", upstream="broken", failure_class="target") == 1
    assert m.total("proxai_retries_total") == 1
    assert m.total("proxai_retries_total", upstream="retrying", failure_class="target") == 1
    assert m.total("proxai_fallbacks_total") == 1
    assert m.total("proxai_fallbacks_total", route="fallback", upstream="rescue") == 1
    assert m.total("proxai_cooldowns_total") == 1
    assert m.total("proxai_cooldowns_total", upstream="broken", cooldown_scope="target") == 1
    assert m.total("proxai_target_healthy", upstream="broken") == 0
    assert m.total("proxai_target_healthy", upstream="rescue") == 1
    assert m.total("gen_ai_client_operation_duration_seconds_count", error_type="target") == 2

    # The dropped fields: a known one by name, the client's own as "other".
    assert m.total("proxai_dropped_fields_total") == 2
    for field in ("logit_bias", "other"):
        assert (
            m.total(
                "proxai_dropped_fields_total",
                field=field,
                direction="client_to_upstream",
                client_protocol=CHAT,
                upstream_protocol=ANTHROPIC,
            )
            == 1
        )
