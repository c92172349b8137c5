"""A search backend on the Brave Search API (``GET /res/v1/web/search``, the key in
``X-Subscription-Token``): its web results as ``SearchResult``s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from .backend import DEFAULT_MAX_RESULTS, SearchError, SearchResult

if TYPE_CHECKING:
    import httpx

BRAVE_URL = "https://api.search.brave.com"
# Brave answers at most this many web results per request.
MAX_COUNT = 20


class _Result(msgspec.Struct):
    url: str
    title: str = ""
    description: str = ""
    page_age: str | None = None
    age: str | None = None


class _Web(msgspec.Struct):
    results: list[_Result] = msgspec.field(default_factory=list)


class _Answer(msgspec.Struct):
    web: _Web | None = None


_answer = msgspec.json.Decoder(_Answer)


class BraveSearch:
    """``BraveSearch(api_key)``: a backend for ``ProxaiMiddleware(search=...)``.
    ``base_url`` points it elsewhere (a test double, a corporate relay); a request
    taking longer than ``timeout`` seconds, an error status or an answer that is not
    Brave's raise ``SearchError`` (which never carries the key)."""

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = BRAVE_URL,
        timeout: float = 10.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not api_key:
            raise ValueError("BraveSearch needs an API key")
        self._key = api_key
        self._url = base_url.rstrip("/") + "/res/v1/web/search"
        self._timeout = timeout
        self._client = http_client
        self._own = http_client is None

    def __repr__(self) -> str:  # the key stays out of logs and tracebacks
        return f"BraveSearch(base_url={self._url!r})"

    async def __call__(
        self, query: str, *, max_results: int = DEFAULT_MAX_RESULTS
    ) -> list[SearchResult]:
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout)
        params: dict[str, Any] = {"q": query, "count": max(1, min(max_results, MAX_COUNT))}
        headers = {"accept": "application/json", "x-subscription-token": self._key}
        try:
            resp = await self._client.get(
                self._url, params=params, headers=headers, timeout=self._timeout
            )
        except httpx.TimeoutException:
            raise SearchError(f"Brave search did not answer within {self._timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise SearchError(f"Brave search could not be reached: {type(exc).__name__}") from None
        if resp.status_code != 200:
            raise SearchError(f"Brave search answered {resp.status_code}")
        try:
            answer = _answer.decode(resp.content)
        except msgspec.DecodeError:
            raise SearchError("Brave search answered something that is not its JSON") from None
        results = answer.web.results if answer.web is not None else []
        return [
            SearchResult(r.url, r.title, _plain(r.description), r.page_age or r.age)
            for r in results[:max_results]
        ]

    async def aclose(self) -> None:
        if self._own and self._client is not None:
            await self._client.aclose()
            self._client = None


def _plain(snippet: str) -> str:
    """Brave marks the query's words in its snippets with <strong>: plain text here."""
    return snippet.replace("<strong>", "").replace("</strong>", "")
