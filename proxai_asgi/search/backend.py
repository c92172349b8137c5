"""The search backend interface: what the proxy calls when it runs a web search
itself (for an upstream that has none), and how one search becomes a canonical
``ServerToolUse`` whatever the backend did (answered, raised, or took too long)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

import anyio

from .. import canonical as c
from ..client_values import loggable

logger = logging.getLogger("proxai_asgi")

# Results asked of a backend per search, unless configured otherwise.
DEFAULT_MAX_RESULTS = 5
# A search not answered within this many seconds is reported to the model as failed.
DEFAULT_TIMEOUT = 15.0
# What a backend's snippet may add to the conversation, per result.
MAX_SNIPPET_CHARS = 2000


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One page a search found: what the model reads and cites."""

    url: str
    title: str
    snippet: str
    page_age: str | None = None  # the page's date as the search engine gives it


class SearchBackend(Protocol):
    """``async def search(query, *, max_results=5) -> list[SearchResult]``; raising
    (any exception) or taking too long is a failed search, told to the model."""

    def __call__(self, query: str, *, max_results: int = ...) -> Awaitable[list[SearchResult]]: ...


class SearchError(Exception):
    """A backend could not search (its API refused, failed or timed out). The message
    never holds the backend's key."""


async def run(
    backend: SearchBackend | None,
    call_id: str,
    query: str,
    *,
    max_results: int = DEFAULT_MAX_RESULTS,
    timeout: float = DEFAULT_TIMEOUT,
) -> c.ServerToolUse:
    """One search as the client sees it: its hits, or the error its provider reports
    for a search that could not run ("unavailable": no backend, a backend that
    failed or did not answer in ``timeout`` seconds)."""
    use = c.ServerToolUse(id=call_id, name="web_search", input={"query": query})
    if backend is None:
        use.error = "unavailable"
        return use
    try:
        with anyio.fail_after(timeout):
            results = await backend(query, max_results=max_results)
    except TimeoutError:
        logger.warning("proxai_asgi web search timed out after %gs", timeout)
        use.error = "unavailable"
        return use
    except Exception as exc:  # a backend's failure is the search's, never the answer's
        # Only a SearchError's message is known to hold no secret (another exception's
        # may quote a URL with the backend's key): of the others, the class.
        said = str(exc)[:200] if isinstance(exc, SearchError) else type(exc).__name__
        logger.warning("proxai_asgi web search failed: %s", loggable(said))
        use.error = "unavailable"
        return use
    use.hits = [
        c.SearchHit(
            url=r.url,
            title=r.title,
            snippet=r.snippet[:MAX_SNIPPET_CHARS],
            page_age=r.page_age,
        )
        for r in results[:max_results]
    ]
    return use


# At most this many searches in one answer, whatever the client's max_uses says.
MAX_SEARCHES = 8


@dataclass(frozen=True, slots=True)
class Searcher:
    """How the proxy searches: its backend (None: the client's search is answered as
    unavailable) and its bounds (results per search, seconds per search, searches
    per answer)."""

    backend: SearchBackend | None = None
    max_results: int = DEFAULT_MAX_RESULTS
    timeout: float = DEFAULT_TIMEOUT
    max_searches: int = MAX_SEARCHES

    def __post_init__(self) -> None:
        if self.max_results < 1 or self.max_searches < 1 or self.timeout <= 0:
            raise ValueError("search: max_results, max_searches and timeout must be positive")

    def limit(self, max_uses: int | None) -> int:
        """Searches allowed in one answer: the client's max_uses within the cap."""
        return self.max_searches if max_uses is None else max(0, min(max_uses, self.max_searches))

    async def search(self, call_id: str, query: str) -> c.ServerToolUse:
        return await run(
            self.backend, call_id, query, max_results=self.max_results, timeout=self.timeout
        )

    async def aclose(self) -> None:
        """Close the backend's connections, if it keeps any (``BraveSearch``)."""
        close = getattr(self.backend, "aclose", None)
        if close is not None:
            await close()
