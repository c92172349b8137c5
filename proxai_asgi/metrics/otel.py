"""The same instruments through an OpenTelemetry meter (dotted names), for OTLP.

Used when the application configured a meter provider (``metrics.set_meter_provider``
before the middleware is built) or passes one; the API's default provider (a proxy
that records nothing until one is set, or the no-op) is not used.
"""

from __future__ import annotations

from typing import Any

from .specs import ALL, Spec


def configured_provider() -> Any | None:
    """The application's meter provider, or None when it set none (or OpenTelemetry
    is not installed)."""
    try:
        from opentelemetry import metrics
        from opentelemetry.metrics import NoOpMeterProvider
        from opentelemetry.metrics._internal import _ProxyMeterProvider
    except ImportError:  # pragma: no cover - the otel extra is not installed
        return None
    provider = metrics.get_meter_provider()
    if isinstance(provider, NoOpMeterProvider | _ProxyMeterProvider):
        return None
    return provider


def _instrument(meter: Any, spec: Spec) -> Any:
    if spec.kind == "counter":
        return meter.create_counter(spec.otel, unit=spec.unit, description=spec.doc).add
    if spec.kind == "updown":
        return meter.create_up_down_counter(spec.otel, unit=spec.unit, description=spec.doc).add
    if spec.kind == "gauge":
        return meter.create_gauge(spec.otel, unit=spec.unit, description=spec.doc).set
    hist = meter.create_histogram(
        spec.otel,
        unit=spec.unit,
        description=spec.doc,
        explicit_bucket_boundaries_advisory=list(spec.buckets),
    )
    return hist.record


class OTelSink:
    __slots__ = ("_by_spec",)

    def __init__(self, provider: Any) -> None:
        meter = provider.get_meter("proxai_asgi")
        # Each spec's recording method (add, set or record), bound once.
        self._by_spec: dict[Spec, Any] = {s: _instrument(meter, s) for s in ALL}

    def record(self, spec: Spec, value: float, labels: tuple[str, ...]) -> None:
        # An empty label (no error) is an absent attribute, as the conventions have it.
        attributes = {k: v for k, v in zip(spec.labels, labels, strict=True) if v}
        self._by_spec[spec](value, attributes)
