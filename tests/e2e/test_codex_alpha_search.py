"""Codex's standalone web search endpoint, ``POST /v1/alpha/search``: from the proxy's
backend for an upstream without search, from the upstream's own search otherwise;
errors in the OpenAI shape Codex reads."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from proxai_asgi.search import StaticSearch
from tests.e2e.test_proxy_search import HITS, proxy
from tests.helpers.search_model import SearchModel
from tests.helpers.servers import FakeUpstream, Reply

# As Codex's SearchClient sends it (codex-rs/codex-api/src/search.rs), our own values.
CODEX_SEARCH = {
    "id": "search-session-1",
    "model": "m",
    "commands": {
        "search_query": [{"q": "python 3.14 release", "recency": 30}, {"q": "pep 745"}],
        "response_length": "short",
    },
    "settings": {
        "search_context_size": "low",
        "filters": {"allowed_domains": ["python.org"]},
        "allowed_callers": ["direct"],
        "external_web_access": True,
    },
}


def _post(url: str, body: Any) -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"authorization": "Bearer k", "content-type": "application/json"}
    return httpx.post(url + "/v1/alpha/search", content=data, headers=headers, timeout=10)


def _openai_error(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


@pytest.mark.parametrize("transport", ["http", "inner"])
def test_codex_search_is_served_from_the_backend_when_the_upstream_has_no_search(
    transport: str,
) -> None:
    model, backend = SearchModel(), StaticSearch(HITS)
    with proxy(model, transport, backend) as url:
        resp = _post(url, CODEX_SEARCH)
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    assert set(answer) == {"output", "encrypted_output"} and answer["encrypted_output"] is None
    out = answer["output"]
    assert backend.queries == ["python 3.14 release", "pep 745"]
    assert "[1] Python 3.14.0" in out and HITS[0].url in out
    assert "[3] Python 3.14.0" in out  # the second query's results numbered on
    assert model.bodies == []  # no model was asked


def test_a_plain_input_is_the_query() -> None:
    backend = StaticSearch(HITS)
    with proxy(SearchModel(), "inner", backend) as url:
        resp = _post(url, {"id": "s", "model": "m", "input": "what is new in python"})
    assert resp.status_code == 200 and backend.queries == ["what is new in python"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"id": "s", "model": "m", "commands": {"search_query": []}}, "no query"),
        ({"id": "s", "model": "m", "commands": {"search_query": [{"q": 5}]}}, "search_query"),
        (b"{not json", "not valid JSON"),
    ],
    ids=["no-query", "bad-query", "not-json"],
)
def test_a_bad_codex_search_gets_a_400_in_the_openai_shape(body: Any, words: str) -> None:
    with proxy(SearchModel(), "inner", StaticSearch(HITS)) as url:
        error = _openai_error(_post(url, body), 400)
    assert words in error["message"]


def test_without_a_backend_or_an_upstream_search_codex_gets_a_501() -> None:
    with proxy(SearchModel(), "inner", None) as url:
        error = _openai_error(_post(url, CODEX_SEARCH), 501)
    assert error["code"] == "web_search_unavailable"


def test_a_backend_that_fails_every_query_gives_codex_a_502() -> None:
    with proxy(SearchModel(), "inner", StaticSearch(HITS, fail=True)) as url:
        error = _openai_error(_post(url, CODEX_SEARCH), 502)
    assert "search" in error["message"]


TEXT = "Python 3.14.0 was released in October 2025 (python.org)."
# A Responses upstream with its own web search: one search call and a cited answer.
HOSTED_ANSWER = {
    "id": "resp_hosted1",
    "object": "response",
    "created_at": 1760000000,
    "status": "completed",
    "model": "m",
    "output": [
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "python 3.14 release"},
        },
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": TEXT,
                    "annotations": [
                        {
                            "type": "url_citation",
                            "url": HITS[0].url,
                            "title": "Python 3.14.0",
                            "start_index": 41,
                            "end_index": len(TEXT) - 1,
                        }
                    ],
                }
            ],
        },
    ],
    "usage": {"input_tokens": 50, "output_tokens": 20, "total_tokens": 70},
}


class HostedSearchModel(FakeUpstream):
    protocol = "openai_responses"


@pytest.mark.parametrize("transport", ["http", "inner"])
def test_codex_search_is_served_from_the_upstreams_own_search(transport: str) -> None:
    model = HostedSearchModel()
    json_type = [("content-type", "application/json")]
    model.push(Reply(200, json_type, [json.dumps(HOSTED_ANSWER).encode()]))
    backend = StaticSearch(HITS)
    with proxy(model, transport, backend) as url:
        resp = _post(url, CODEX_SEARCH)
    assert resp.status_code == 200, resp.text
    out = resp.json()["output"]
    assert out.startswith("Python 3.14.0 was released in October 2025")
    assert "Sources:\n[1] Python 3.14.0\nURL: " + HITS[0].url in out
    assert backend.queries == []  # the upstream searched, not the proxy
    sent = model.seen[0].json()
    assert sent["model"] == "m" and not sent.get("stream")
    assert {
        "type": "web_search",
        "filters": {"allowed_domains": ["python.org"]},
        "search_context_size": "low",
    } in sent["tools"]
    assert "python 3.14 release" in json.dumps(sent["input"]) and "pep 745" in json.dumps(
        sent["input"]
    )
