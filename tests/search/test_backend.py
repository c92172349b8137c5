"""One search as the client sees it, whatever the backend did; the bounds."""

from __future__ import annotations

import anyio
import pytest

from proxai_asgi import Searcher, SearchResult
from proxai_asgi.search import StaticSearch
from proxai_asgi.search.backend import MAX_SNIPPET_CHARS, run

HITS = [SearchResult(f"https://e.example/{i}", f"T{i}", f"s{i}") for i in range(8)]


def test_search_results_become_hits_bounded_by_max_results() -> None:
    backend = StaticSearch([*HITS[:2], SearchResult("https://x", "X", "y" * 9000, "2026-01-02")])

    async def go() -> None:
        use = await run(backend, "call_1", "q", max_results=3)
        assert use.id == "call_1" and use.name == "web_search" and use.input == {"query": "q"}
        assert use.error is None and use.hits is not None
        assert [h.url for h in use.hits] == [
            "https://e.example/0",
            "https://e.example/1",
            "https://x",
        ]
        assert len(use.hits[2].snippet or "") == MAX_SNIPPET_CHARS
        assert use.hits[2].page_age == "2026-01-02"
        few = await run(StaticSearch(HITS), "c", "q", max_results=2)
        assert len(few.hits or []) == 2

    anyio.run(go)


def test_no_backend_answers_the_search_as_unavailable() -> None:
    use = anyio.run(run, None, "c", "q")
    assert use.error == "unavailable" and use.hits is None


def test_a_backend_that_raises_is_an_unavailable_search() -> None:
    backend = StaticSearch(HITS, fail=True)
    use = anyio.run(run, backend, "c", "q")
    assert use.error == "unavailable" and backend.queries == ["q"]


def test_a_backend_that_takes_too_long_is_an_unavailable_search() -> None:
    backend = StaticSearch(HITS, delay=5.0)

    async def go() -> None:
        with anyio.fail_after(2):
            use = await run(backend, "c", "q", timeout=0.05)
        assert use.error == "unavailable"

    anyio.run(go)


def test_a_plain_async_function_is_a_backend() -> None:
    async def my_search(query: str, *, max_results: int = 5) -> list[SearchResult]:
        return [SearchResult(url="https://example.com/a", title="A", snippet=query)]

    use = anyio.run(Searcher(my_search).search, "c", "hello")
    assert use.hits is not None and use.hits[0].snippet == "hello"


def test_searches_per_answer_are_the_clients_max_uses_within_the_cap() -> None:
    s = Searcher(max_searches=4)
    assert s.limit(None) == 4 and s.limit(2) == 2 and s.limit(10) == 4 and s.limit(0) == 0
    with pytest.raises(ValueError):
        Searcher(timeout=0)


def test_search_result_is_a_small_frozen_value() -> None:
    r = SearchResult(url="https://example.com/a", title="A", snippet="...")
    assert r.page_age is None
    with pytest.raises(AttributeError):
        r.url = "x"  # type: ignore[misc]


def test_a_backends_own_exception_is_logged_by_its_class_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def leaky(query: str, *, max_results: int = 5) -> list[SearchResult]:
        raise RuntimeError("GET https://search.example/?key=sk-secret-1 failed")

    with caplog.at_level("WARNING", logger="proxai_asgi"):
        use = anyio.run(run, leaky, "c", "q")
    assert use.error == "unavailable"
    assert "RuntimeError" in caplog.text and "sk-secret-1" not in caplog.text
