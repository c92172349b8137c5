"""An in-memory OpenTelemetry span exporter on the global tracer provider (the test is
skipped where the SDK is not installed)."""

from __future__ import annotations

from typing import Any

import pytest


def span_exporter() -> Any:
    trace = pytest.importorskip("opentelemetry.trace")
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    export = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    exporter = export.InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, sdk.TracerProvider):
        provider = sdk.TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter
