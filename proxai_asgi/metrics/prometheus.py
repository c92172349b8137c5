"""The instruments in ``prometheus_client``, and the scrape.

Each middleware has its own ``CollectorRegistry``: several in one process (tests, two
mounts) never collide. Under ``proxai-asgi --workers N`` the CLI sets
``PROMETHEUS_MULTIPROC_DIR`` to a fresh directory before the workers start; the
client library then keeps every value in a file per process there, and a scrape on
any worker reads them all (``MultiProcessCollector``): one scrape sees every worker.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder

from ..bounded_cache import BoundedCache
from .specs import ALL, MULTIPROC_ENV, Spec


def _instrument(spec: Spec, registry: CollectorRegistry) -> Any:
    labels = spec.prom_labels
    if spec.kind == "counter":
        return Counter(spec.prom, spec.doc, labels, registry=registry)
    if spec.kind == "histogram":
        return Histogram(spec.prom, spec.doc, labels, registry=registry, buckets=spec.buckets)
    # In one process a gauge is its value; over workers, in-flight requests add up
    # across the live ones, and a health reading is the most recent any worker made.
    if spec.kind == "updown":
        return Gauge(spec.prom, spec.doc, labels, registry=registry, multiprocess_mode="livesum")
    return Gauge(spec.prom, spec.doc, labels, registry=registry, multiprocess_mode="mostrecent")


class PrometheusSink:
    __slots__ = ("_by_spec", "_record", "multiprocess", "registry")

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        self._by_spec: dict[Spec, Any] = {s: _instrument(s, self.registry) for s in ALL}
        # Each series' recording method, bound once (``labels()`` costs more than the
        # recording): as many as the series, which bounded labels keep few; a method
        # dropped is bound again from the same series.
        self._record: BoundedCache[tuple[Spec, tuple[str, ...]], Callable[[float], None]]
        self._record = BoundedCache(max_bytes=4 << 20, max_entries=1 << 14, size=_series_size)

    def record(self, spec: Spec, value: float, labels: tuple[str, ...]) -> None:
        key = (spec, labels)
        method = self._record.recent(key) or self._record.get(key)
        if method is None:
            child = self._by_spec[spec].labels(*labels)
            kind = spec.kind
            method = child.observe if kind == "histogram" else child.inc
            if kind == "gauge":
                method = child.set
            self._record.put(key, method)
        method(value)

    def scrape(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition (the classic text format, or OpenMetrics when ``accept`` asks
        for it) and its content type."""
        registry = self.registry
        if self.multiprocess:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()  # per scrape, as the library requires
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        encoder, content_type = choose_encoder(accept or "")
        return encoder(registry), content_type

    def close(self) -> None:
        """A worker shutting down: its in-flight gauge leaves the live sum."""
        if self.multiprocess:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


def _series_size(key: tuple[Spec, tuple[str, ...]], _method: object) -> int:
    """A series' entry: its label values' text and a bound method's fixed cost (the
    spec is shared by every series of its instrument)."""
    return 200 + sum(len(v) for v in key[1])
