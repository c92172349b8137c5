"""The Brave Search backend against a fake of its API on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import anyio
import pytest

from proxai_asgi import BraveSearch, SearchResult
from proxai_asgi.search import SearchError
from tests.helpers.servers import serve

KEY = "brv-secret-key-123"


@dataclass
class FakeBrave:
    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    seen: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        query = parse_qs(scope["query_string"].decode())
        self.seen.append(
            {"path": scope["path"], "method": scope["method"], "headers": headers, "query": query}
        )
        if self.delay:
            await anyio.sleep(self.delay)
        await send(
            {
                "type": "http.response.start",
                "status": self.status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": self.body})


ANSWER = {
    "type": "search",
    "query": {"original": "python release"},
    "web": {
        "type": "search",
        "results": [
            {
                "title": "Python 3.14 released",
                "url": "https://www.python.org/downloads/release/python-3140/",
                "description": "The <strong>Python</strong> 3.14 release notes.",
                "page_age": "2025-10-07T00:00:00",
                "age": "October 7, 2025",
            },
            {
                "title": "What's new",
                "url": "https://docs.python.org/3/whatsnew/",
                "description": "Changes.",
            },
        ],
    },
}


@pytest.fixture
def brave() -> Iterator[tuple[FakeBrave, str]]:
    fake = FakeBrave(body=json.dumps(ANSWER).encode())
    with serve(fake) as url:
        yield fake, url


def test_brave_results_become_search_results(brave: tuple[FakeBrave, str]) -> None:
    fake, url = brave

    async def go() -> list[SearchResult]:
        backend = BraveSearch(KEY, base_url=url)
        try:
            return await backend("python release", max_results=3)
        finally:
            await backend.aclose()

    results = anyio.run(go)
    assert results == [
        SearchResult(
            "https://www.python.org/downloads/release/python-3140/",
            "Python 3.14 released",
            "The Python 3.14 release notes.",
            "2025-10-07T00:00:00",
        ),
        SearchResult("https://docs.python.org/3/whatsnew/", "What's new", "Changes.", None),
    ]
    req = fake.seen[0]
    assert req["method"] == "GET" and req["path"] == "/res/v1/web/search"
    assert req["query"] == {"q": ["python release"], "count": ["3"]}
    assert req["headers"]["x-subscription-token"] == KEY
    assert req["headers"]["accept"] == "application/json"


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [(401, b'{"error": "bad key"}', "401"), (200, b"<html>", "not its JSON")],
)
def test_a_brave_failure_is_a_search_error_without_the_key(
    brave: tuple[FakeBrave, str], status: int, body: bytes, words: str
) -> None:
    fake, url = brave
    fake.status, fake.body = status, body

    async def go() -> None:
        backend = BraveSearch(KEY, base_url=url)
        try:
            await backend("q")
        finally:
            await backend.aclose()

    with pytest.raises(SearchError) as info:
        anyio.run(go)
    assert words in str(info.value) and KEY not in str(info.value)
    assert KEY not in repr(BraveSearch(KEY, base_url=url))


def test_a_brave_that_does_not_answer_in_time_is_a_search_error(
    brave: tuple[FakeBrave, str],
) -> None:
    fake, url = brave
    fake.delay = 0.5

    async def go() -> None:
        backend = BraveSearch(KEY, base_url=url, timeout=0.05)
        try:
            await backend("q")
        finally:
            await backend.aclose()

    with pytest.raises(SearchError, match="did not answer"):
        anyio.run(go)


def test_brave_needs_a_key() -> None:
    with pytest.raises(ValueError):
        BraveSearch("")
