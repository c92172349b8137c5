"""Prometheus and OpenTelemetry metrics (stub: issue 29 fills it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..routing.plan import Attempts
    from ..usage.record import UsageRecord


class Metrics:
    def exchange(self, rec: UsageRecord, dropped: list[str], routing: Attempts | None) -> None:
        return None


def open_metrics(spec: bool | Metrics) -> Metrics | None:
    if isinstance(spec, Metrics):
        return spec
    return Metrics() if spec else None
