"""A search backend for tests and demos: canned results, every query recorded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import anyio

from .backend import DEFAULT_MAX_RESULTS, SearchError, SearchResult


class StaticSearch:
    """Answers every query with ``results`` (or ``by_query[query]`` when listed);
    ``fail=True`` raises ``SearchError``, ``delay`` waits first (a slow backend)."""

    def __init__(
        self,
        results: Sequence[SearchResult] = (),
        *,
        by_query: Mapping[str, Sequence[SearchResult]] | None = None,
        fail: bool = False,
        delay: float = 0.0,
    ) -> None:
        self.results = list(results)
        self.by_query = dict(by_query or {})
        self.fail = fail
        self.delay = delay
        self.queries: list[str] = []

    async def __call__(
        self, query: str, *, max_results: int = DEFAULT_MAX_RESULTS
    ) -> list[SearchResult]:
        self.queries.append(query)
        if self.delay:
            await anyio.sleep(self.delay)
        if self.fail:
            raise SearchError("the test backend was told to fail")
        return list(self.by_query.get(query, self.results))[:max_results]
