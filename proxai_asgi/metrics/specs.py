"""Every instrument the gateway records: its OpenTelemetry name, its Prometheus name,
kind, unit and labels, in one table both exporters build from.

Names follow the OpenTelemetry GenAI semantic conventions where they have one (toward
the client ``gen_ai.server.*``, per upstream attempt ``gen_ai.client.*``); the rest is
``proxai.*``. A Prometheus name is the OpenTelemetry one with dots as underscores and
the unit as a suffix (``_seconds``; counters get ``_total`` from the client library);
a label is the attribute with dots as underscores, the ``proxai.`` namespace dropped.
Every label value is bounded: configuration (route glob, upstream name), protocol
names, classes and outcomes, never a client's model string, session, key or field
name it made up (``fields.bounded``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Where prometheus_client's multiprocess mode keeps every process's values.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

Kind = Literal["counter", "histogram", "updown", "gauge"]

OP = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
TOKEN_TYPE = "gen_ai.token.type"
ERROR = "error.type"
ROUTE = "proxai.route"
UPSTREAM = "proxai.upstream"
CLIENT = "proxai.client.protocol"
UPSTREAM_PROTOCOL = "proxai.upstream.protocol"
STATUS_CLASS = "proxai.status_class"
OUTCOME = "proxai.outcome"
FAILURE = "proxai.failure_class"
SCOPE = "proxai.cooldown.scope"
FIELD = "proxai.field"
DIRECTION = "proxai.direction"

# The conventions' advised bucket boundaries.
DURATION_BUCKETS: tuple[float, ...] = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56)
DURATION_BUCKETS += (5.12, 10.24, 20.48, 40.96, 81.92)
TTFT_BUCKETS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25)
TTFT_BUCKETS += (0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
TOKEN_BUCKETS: tuple[float, ...] = tuple(4.0**i for i in range(14))  # 1 .. 4**13
QUEUE_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: one of each
class Spec:
    otel: str  # the OpenTelemetry instrument name
    prom: str  # the Prometheus name (a counter's without ``_total``)
    kind: Kind
    unit: str  # UCUM, as OpenTelemetry takes it
    doc: str
    labels: tuple[str, ...]  # attribute names, in label order
    buckets: tuple[float, ...] = ()

    @property
    def prom_labels(self) -> tuple[str, ...]:
        return tuple(prom_label(a) for a in self.labels)


def prom_label(attribute: str) -> str:
    return attribute.removeprefix("proxai.").replace(".", "_")


_SERVED = (OP, PROVIDER, ROUTE, UPSTREAM)

REQUEST_DURATION = Spec(
    "gen_ai.server.request.duration",
    "gen_ai_server_request_duration_seconds",
    "histogram",
    "s",
    "Time from the request's arrival to the end of its answer, as the client saw it.",
    (*_SERVED, ERROR),
    DURATION_BUCKETS,
)
TIME_TO_FIRST_TOKEN = Spec(
    "gen_ai.server.time_to_first_token",
    "gen_ai_server_time_to_first_token_seconds",
    "histogram",
    "s",
    "Time from the request's arrival to the first byte of a streamed answer.",
    _SERVED,
    TTFT_BUCKETS,
)
TIME_PER_OUTPUT_TOKEN = Spec(
    "gen_ai.server.time_per_output_token",
    "gen_ai_server_time_per_output_token_seconds",
    "histogram",
    "s",
    "Time per output token after the first of a streamed answer.",
    _SERVED,
    TPOT_BUCKETS,
)
OPERATION_DURATION = Spec(
    "gen_ai.client.operation.duration",
    "gen_ai_client_operation_duration_seconds",
    "histogram",
    "s",
    "Duration of one upstream attempt (error_type: failure class, cancelled, aborted).",
    (*_SERVED, ERROR),
    DURATION_BUCKETS,
)
TOKEN_USAGE = Spec(
    "gen_ai.client.token.usage",
    "gen_ai_client_token_usage",
    "histogram",
    "{token}",
    "Tokens per answered upstream call: input (all prompt tokens, cached included, "
    "as the convention counts them) and output.",
    (*_SERVED, TOKEN_TYPE),
    TOKEN_BUCKETS,
)
TOKENS = Spec(
    "proxai.tokens",
    "proxai_tokens",
    "counter",
    "{token}",
    "Tokens of answered requests by ledger category: input (never cached tokens), "
    "output (reasoning included), cache_read, cache_write_5m, cache_write_1h, reasoning.",
    (*_SERVED, TOKEN_TYPE),
)
SERVER_TOOL_REQUESTS = Spec(
    "proxai.server_tool.requests",
    "proxai_server_tool_requests",
    "counter",
    "{request}",
    "Requests server tools (search, fetch) made for answered requests; billed apart.",
    _SERVED,
)
REQUESTS = Spec(
    "proxai.requests",
    "proxai_requests",
    "counter",
    "{request}",
    "Requests answered, by client protocol, upstream protocol and status class.",
    (CLIENT, UPSTREAM_PROTOCOL, STATUS_CLASS, ROUTE, UPSTREAM),
)
ATTEMPTS = Spec(
    "proxai.attempts",
    "proxai_attempts",
    "counter",
    "{attempt}",
    "Upstream attempts by outcome (success, failure, cancelled, aborted) and failure class.",
    (ROUTE, UPSTREAM, OUTCOME, FAILURE),
)
RETRIES = Spec(
    "proxai.retries",
    "proxai_retries",
    "counter",
    "{retry}",
    "Attempts retried on the same target after a failure of this class.",
    (ROUTE, UPSTREAM, FAILURE),
)
FALLBACKS = Spec(
    "proxai.fallbacks",
    "proxai_fallbacks",
    "counter",
    "{request}",
    "Requests answered by a fallback (upstream: the fallback that answered).",
    (ROUTE, UPSTREAM),
)
COOLDOWNS = Spec(
    "proxai.cooldowns",
    "proxai_cooldowns",
    "counter",
    "{cooldown}",
    "Cooldowns started: scope key (a refused key), rate_limit (a key's model), target.",
    (UPSTREAM, SCOPE),
)
TARGET_HEALTHY = Spec(
    "proxai.target.healthy",
    "proxai_target_healthy",
    "gauge",
    "1",
    "1 once an upstream answered, 0 once it was cooled down: the latest observed.",
    (UPSTREAM,),
)
AFFINITY = Spec(
    "proxai.affinity",
    "proxai_affinity",
    "counter",
    "{request}",
    "Requests of a session: served where it was bound (hit), moved elsewhere, or new.",
    (ROUTE, OUTCOME),
)
IN_FLIGHT = Spec(
    "proxai.requests.in_flight",
    "proxai_requests_in_flight",
    "updown",
    "{request}",
    "Requests being served now.",
    (CLIENT,),
)
QUEUE_WAIT = Spec(
    "proxai.queue.wait",
    "proxai_queue_wait_seconds",
    "histogram",
    "s",
    "Wait for a max_concurrency slot (outcome: admitted, or rejected with a 429).",
    (OUTCOME,),
    QUEUE_BUCKETS,
)
DROPPED_FIELDS = Spec(
    "proxai.dropped_fields",
    "proxai_dropped_fields",
    "counter",
    "{field}",
    "Fields translation dropped, by field (other: one the client made up) and direction.",
    (FIELD, DIRECTION, CLIENT, UPSTREAM_PROTOCOL),
)

ALL = (
    REQUEST_DURATION,
    TIME_TO_FIRST_TOKEN,
    TIME_PER_OUTPUT_TOKEN,
    OPERATION_DURATION,
    TOKEN_USAGE,
    TOKENS,
    SERVER_TOOL_REQUESTS,
    REQUESTS,
    ATTEMPTS,
    RETRIES,
    FALLBACKS,
    COOLDOWNS,
    TARGET_HEALTHY,
    AFFINITY,
    IN_FLIGHT,
    QUEUE_WAIT,
    DROPPED_FIELDS,
)
