"""Prometheus metrics (``GET /metrics``) and the same instruments over OpenTelemetry.

``Metrics`` is what the middleware holds when ``metrics=True``: the exchange reports
each request once it is answered (``exchange``), and routing reports what happens on
the way — each attempt's end, retries, cooldowns, session affinity — through small
calls that never run per streamed event. With metrics off the middleware holds None
and every hook is one ``is not None`` check. ``specs`` lists every instrument.

``prometheus_client`` (the ``metrics`` extra) and OpenTelemetry are imported only
when a ``Metrics`` is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from . import specs as s

if TYPE_CHECKING:
    from ..routing.plan import Attempts, Target
    from ..usage.record import UsageRecord

NONE = "none"  # a label with nothing to name (no route matched, no upstream reached)
DIRECTION_REQUEST = "client_to_upstream"  # what a request translation drops
_ENDINGS = frozenset({"cancelled", "aborted"})  # attempts that ended neither way


class Sink(Protocol):
    def record(self, spec: s.Spec, value: float, labels: tuple[str, ...]) -> None: ...


def status_family(status: int) -> str:
    """2xx, 4xx, 5xx...; ``aborted`` when the client left before any answer."""
    return f"{status // 100}xx" if status >= 100 else "aborted"


class Metrics:
    """The gateway's instruments, exported as Prometheus text (``scrape``) and, when
    an OpenTelemetry meter provider is configured (or ``meter_provider`` given), also
    through it. ``otel=False`` never uses OpenTelemetry."""

    def __init__(self, *, meter_provider: Any = None, otel: bool = True) -> None:
        from .fields import FieldNames
        from .otel import OTelSink, configured_provider

        try:
            from .prometheus import PrometheusSink
        except ImportError as exc:
            raise ImportError(
                "metrics=True needs prometheus_client: pip install 'proxai-asgi[metrics]'"
            ) from exc

        self.prometheus = PrometheusSink()
        sinks: list[Sink] = [self.prometheus]
        if otel:
            provider = meter_provider if meter_provider is not None else configured_provider()
            if provider is not None:
                sinks.append(OTelSink(provider))
        self._sinks = tuple(sinks)
        self._fields = FieldNames()
        self._codecs: dict[str, tuple[str, str]] = {}

    # ------------------------------------------------------------------ export

    def scrape(self, accept: str | None = None) -> tuple[bytes, str]:
        """The Prometheus exposition and its content type (``accept``: the scraper's
        Accept header, which may ask for OpenMetrics)."""
        return self.prometheus.scrape(accept)

    def close(self) -> None:
        self.prometheus.close()

    def _emit(self, spec: s.Spec, value: float, labels: tuple[str, ...]) -> None:
        for sink in self._sinks:
            sink.record(spec, value, labels)

    def _codec(self, protocol: str | None) -> tuple[str, str]:
        """(gen_ai.provider.name, gen_ai.operation.name) of a protocol's upstream."""
        if protocol is None:
            return NONE, NONE
        known = self._codecs.get(protocol)
        if known is None:
            from ..protocols import get_codec

            codec = get_codec(protocol)  # type: ignore[arg-type]
            known = self._codecs[protocol] = (codec.system, codec.operation)
        return known

    # --------------------------------------------------------- exchange hooks

    def started(self, client_protocol: str) -> None:
        self._emit(s.IN_FLIGHT, 1, (client_protocol,))

    def finished(self, client_protocol: str) -> None:
        self._emit(s.IN_FLIGHT, -1, (client_protocol,))

    def queued(self, seconds: float, admitted: bool) -> None:
        self._emit(s.QUEUE_WAIT, seconds, ("admitted" if admitted else "rejected",))

    # ---------------------------------------------------------- routing hooks

    def attempt(self, route: str, target: Target, error: str, seconds: float) -> None:
        """One attempt ended: ``error`` is "" (it answered), its failure class (it
        failed before its answer's first content), ``cancelled`` (another attempt
        answered first) or ``aborted`` (it raised: its answer was cut)."""
        up = target.upstream
        provider, operation = self._codec(up.protocol)
        label = up.label
        self._emit(s.OPERATION_DURATION, seconds, (operation, provider, route, label, error))
        if not error:
            self._emit(s.ATTEMPTS, 1, (route, label, "success", ""))
            self._emit(s.TARGET_HEALTHY, 1, (label,))
        elif error in _ENDINGS:
            self._emit(s.ATTEMPTS, 1, (route, label, error, ""))
        else:
            self._emit(s.ATTEMPTS, 1, (route, label, "failure", error))

    def retried(self, route: str, target: Target, failure_class: str) -> None:
        self._emit(s.RETRIES, 1, (route, target.upstream.label, failure_class))

    def cooled(self, target: Target, scope: str) -> None:
        """A cooldown started on ``target``: ``key``, ``rate_limit`` or ``target``."""
        label = target.upstream.label
        self._emit(s.COOLDOWNS, 1, (label, scope))
        self._emit(s.TARGET_HEALTHY, 0, (label,))

    def affinity(self, route: str, outcome: str) -> None:
        """A session's request was served: ``hit``, ``moved`` or ``new``."""
        self._emit(s.AFFINITY, 1, (route, outcome))

    # --------------------------------------------------------------- exchange

    def exchange(self, rec: UsageRecord, dropped: list[str], routing: Attempts | None) -> None:
        """One answered request (``rec``: its ledger record)."""
        route = rec.route or NONE
        upstream = rec.upstream or NONE
        upstream_protocol = rec.upstream_protocol or NONE
        provider, operation = self._codec(rec.upstream_protocol)
        family = status_family(rec.status)
        ok = family == "2xx"
        served = (operation, provider, route, upstream)
        self._emit(s.REQUESTS, 1, (rec.client_protocol, upstream_protocol, family, route, upstream))
        seconds = rec.duration_ms / 1000
        self._emit(s.REQUEST_DURATION, seconds, (*served, "" if ok else family))
        if rec.ttft_ms is not None:
            ttft = rec.ttft_ms / 1000
            self._emit(s.TIME_TO_FIRST_TOKEN, ttft, served)
            if ok and rec.output_tokens > 1:
                per_token = (seconds - ttft) / (rec.output_tokens - 1)
                self._emit(s.TIME_PER_OUTPUT_TOKEN, max(per_token, 0.0), served)
        if routing is None and rec.upstream is not None:
            # Relayed straight to the wrapped app (no routing): one attempt, the exchange.
            self._direct_attempt(rec, served, seconds)
        elif routing is not None and routing.served_by and routing.served_by.fallback_index:
            self._emit(s.FALLBACKS, 1, (route, upstream))
        if ok:
            self._tokens(rec, served)
        if dropped:
            client = rec.client_protocol
            for name in dropped:
                field = self._fields.bounded(name)
                self._emit(
                    s.DROPPED_FIELDS, 1, (field, DIRECTION_REQUEST, client, upstream_protocol)
                )

    def _direct_attempt(
        self, rec: UsageRecord, served: tuple[str, str, str, str], seconds: float
    ) -> None:
        route, upstream = served[2], served[3]
        if 200 <= rec.status < 400:
            error, outcome = "", "success"
        else:
            from ..routing.failures import status_class

            error, outcome = status_class(rec.status), "failure"
        self._emit(s.OPERATION_DURATION, seconds, (*served, error))
        self._emit(s.ATTEMPTS, 1, (route, upstream, outcome, error))

    def _tokens(self, rec: UsageRecord, served: tuple[str, str, str, str]) -> None:
        prompt = (
            rec.input_tokens
            + rec.cache_read_tokens
            + rec.cache_write_5m_tokens
            + rec.cache_write_1h_tokens
        )
        if prompt or rec.output_tokens:
            self._emit(s.TOKEN_USAGE, prompt, (*served, "input"))
            self._emit(s.TOKEN_USAGE, rec.output_tokens, (*served, "output"))
        for kind, count in (
            ("input", rec.input_tokens),
            ("output", rec.output_tokens),
            ("cache_read", rec.cache_read_tokens),
            ("cache_write_5m", rec.cache_write_5m_tokens),
            ("cache_write_1h", rec.cache_write_1h_tokens),
            ("reasoning", rec.reasoning_tokens),
        ):
            if count:
                self._emit(s.TOKENS, count, (*served, kind))
        if rec.server_tool_requests:
            self._emit(s.SERVER_TOOL_REQUESTS, rec.server_tool_requests, served)


def open_metrics(spec: bool | Metrics) -> Metrics | None:
    """``metrics=``: True builds one (Prometheus, and OpenTelemetry when configured)."""
    if isinstance(spec, Metrics):
        return spec
    return Metrics() if spec else None
