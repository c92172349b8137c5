"""Web search run by the proxy for an upstream that has none: the client's own SDK
sees its provider's search blocks (or items) and a cited answer, over both
transports, streamed and not; a failing, slow or missing backend gives the client's
own search error and the answer goes on; the loop is bounded."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from proxai_asgi import ProxaiMiddleware, Searcher, SearchResult, Upstream
from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from proxai_asgi.search import StaticSearch
from tests.helpers.search_model import ANSWER, FAILED, QUERY, SearchModel
from tests.helpers.servers import serve

HITS = [
    SearchResult(
        "https://www.python.org/downloads/release/python-3140/", "Python 3.14.0", "Released Oct 7."
    ),
    SearchResult(
        "https://docs.python.org/3.14/whatsnew/3.14.html", "What's new", "Changes.", "2025-10-07"
    ),
]
SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
BASH = {"name": "Bash", "description": "run", "input_schema": {"type": "object", "properties": {}}}


async def _not_found(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


@contextlib.contextmanager
def proxy(model: Any, transport: str, search: Any, **options: Any) -> Iterator[str]:
    with contextlib.ExitStack() as es:
        protocol: ProtocolName = model.protocol
        if transport == "inner":
            app = ProxaiMiddleware(
                model, upstream=Upstream.inner_app(protocol, **options), search=search
            )
        else:
            base = es.enter_context(serve(model))
            if protocol.startswith("openai"):
                base += "/v1"
            app = ProxaiMiddleware(
                _not_found, upstream=Upstream(protocol, base, **options), search=search
            )
        yield es.enter_context(serve(app))


def _anthropic(url: str, stream: bool, tools: list[dict[str, Any]] | None = None) -> Any:
    client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
    kw: dict[str, Any] = {
        "model": "m",
        "max_tokens": 200,
        "messages": [{"role": "user", "content": "When did Python 3.14 come out?"}],
        "tools": tools or [SEARCH_TOOL],
    }
    if not stream:
        return client.messages.create(**kw).model_dump()
    with client.messages.stream(**kw) as s:
        return s.get_final_message().model_dump()


def _responses(url: str, stream: bool) -> Any:
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
    kw: dict[str, Any] = {
        "model": "m",
        "input": "When did Python 3.14 come out?",
        "tools": [{"type": "web_search"}],
    }
    if not stream:
        return client.responses.create(**kw).model_dump()
    with client.responses.stream(**kw) as s:
        return s.get_final_response().model_dump()


def _tool_messages(model: SearchModel, i: int) -> list[dict[str, Any]]:
    return [m for m in model.bodies[i]["messages"] if m["role"] == "tool"]


BOTH = pytest.mark.parametrize("transport", ["http", "inner"])
STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])


@BOTH
@STREAMS
def test_an_anthropic_client_sees_its_search_blocks_and_a_cited_answer_through_a_chat_upstream(
    transport: str, stream: bool
) -> None:
    model, backend = SearchModel(), StaticSearch(HITS)
    with proxy(model, transport, backend) as url:
        msg = _anthropic(url, stream)
    assert [b["type"] for b in msg["content"]] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    use, result, text = msg["content"]
    assert use["name"] == "web_search" and use["input"] == {"query": QUERY}
    assert result["tool_use_id"] == use["id"]
    assert [r["url"] for r in result["content"]] == [h.url for h in HITS]
    assert text["text"] == ANSWER
    assert [c["url"] for c in text["citations"]] == [HITS[0].url]
    assert msg["stop_reason"] == "end_turn"
    assert msg["usage"]["server_tool_use"]["web_search_requests"] == 1
    assert (msg["usage"]["input_tokens"], msg["usage"]["output_tokens"]) == (300, 20)  # both rounds
    assert backend.queries == [QUERY]
    # the model was offered the search as a function, then given the numbered results
    first, second = model.bodies
    assert [t["function"]["name"] for t in first["tools"]] == ["web_search"]
    assert "web_search_options" not in first
    results = _tool_messages(model, 1)
    assert len(results) == 1 and "[1] Python 3.14.0" in results[0]["content"]
    assert HITS[1].url in results[0]["content"]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "web_search"


@BOTH
@STREAMS
def test_a_responses_client_sees_a_web_search_call_and_a_cited_answer_through_a_chat_upstream(
    transport: str, stream: bool
) -> None:
    model, backend = SearchModel(), StaticSearch(HITS)
    with proxy(model, transport, backend) as url:
        resp = _responses(url, stream)
    assert [i["type"] for i in resp["output"]] == ["web_search_call", "message"]
    call, message = resp["output"]
    assert call["status"] == "completed" and call["action"]["query"] == QUERY
    part = message["content"][0]
    assert part["text"] == ANSWER
    cite = part["annotations"][0]
    assert cite["type"] == "url_citation" and cite["url"] == HITS[0].url
    assert ANSWER[cite["start_index"] : cite["end_index"]] == "[1]"
    assert resp["usage"]["input_tokens"] == 300 and resp["usage"]["output_tokens"] == 20
    assert backend.queries == [QUERY] and len(model.bodies) == 2


@pytest.mark.parametrize(
    "search",
    [StaticSearch(HITS, fail=True), Searcher(StaticSearch(HITS, delay=5.0), timeout=0.05), None],
    ids=["failing", "timing-out", "none"],
)
@STREAMS
def test_a_search_that_cannot_run_is_the_clients_unavailable_error_and_the_answer_goes_on(
    search: Any, stream: bool
) -> None:
    model = SearchModel()
    with proxy(model, "http", search) as url:
        msg = _anthropic(url, stream)
    assert [b["type"] for b in msg["content"]] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    error = msg["content"][1]["content"]
    assert error == {"type": "web_search_tool_result_error", "error_code": "unavailable"}
    assert msg["content"][2]["text"] == FAILED and msg["stop_reason"] == "end_turn"
    assert (msg["usage"].get("server_tool_use") or {}).get("web_search_requests", 0) == 0
    told = _tool_messages(model, 1)[0]["content"]
    assert "unavailable" in told  # the model was told the search failed


@STREAMS
def test_the_loop_is_bounded_and_a_model_that_keeps_searching_gets_pause_turn(stream: bool) -> None:
    model, backend = SearchModel(mode="always"), StaticSearch(HITS)
    with proxy(model, "http", Searcher(backend, max_searches=2)) as url:
        msg = _anthropic(url, stream)
    kinds = [b["type"] for b in msg["content"]]
    assert kinds == ["server_tool_use", "web_search_tool_result"] * 3
    assert msg["content"][5]["content"]["error_code"] == "max_uses_exceeded"
    assert msg["stop_reason"] == "pause_turn"
    assert len(backend.queries) == 2 and len(model.bodies) == 4
    assert msg["usage"]["server_tool_use"]["web_search_requests"] == 2


def test_the_clients_max_uses_bounds_the_searches() -> None:
    model, backend = SearchModel(mode="always"), StaticSearch(HITS)
    with proxy(model, "http", backend) as url:
        msg = _anthropic(url, False, [{**SEARCH_TOOL, "max_uses": 1}])
    errors = [b["content"] for b in msg["content"] if b["type"] == "web_search_tool_result"]
    assert isinstance(errors[0], list) and errors[1]["error_code"] == "max_uses_exceeded"
    assert len(backend.queries) == 1


@STREAMS
def test_a_client_tool_called_beside_the_search_goes_to_the_client(stream: bool) -> None:
    model, backend = SearchModel(mode="client_tool"), StaticSearch(HITS)
    with proxy(model, "inner", backend) as url:
        msg = _anthropic(url, stream, [SEARCH_TOOL, BASH])
    assert [b["type"] for b in msg["content"]] == ["tool_use"]
    assert msg["content"][0]["name"] == "Bash" and msg["stop_reason"] == "tool_use"
    assert backend.queries == [] and len(model.bodies) == 1
    assert [t["function"]["name"] for t in model.bodies[0]["tools"]] == ["Bash", "web_search"]


@STREAMS
def test_proxy_search_searches_for_an_upstream_whose_protocol_has_a_hosted_search(
    stream: bool,
) -> None:
    model, backend = SearchModel(protocol="anthropic_messages"), StaticSearch(HITS)
    with proxy(model, "http", backend, proxy_search=True) as url:
        msg = _anthropic(url, stream)
    assert [b["type"] for b in msg["content"]] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    first = model.bodies[0]
    assert [t.get("type", "custom") for t in first["tools"]] == ["custom"]  # a function, not hosted
    assert first["tools"][0]["name"] == "web_search" and "input_schema" in first["tools"][0]
    assert backend.queries == [QUERY]


def test_a_request_without_search_through_proxy_search_is_relayed_untouched() -> None:
    model, backend = SearchModel(protocol="anthropic_messages", mode="plain"), StaticSearch(HITS)
    with proxy(model, "http", backend, proxy_search=True) as url:
        msg = _anthropic(url, False, [BASH])
    assert msg["content"][0]["text"] == ANSWER
    assert backend.queries == [] and json.dumps(model.bodies[0]["tools"]) == json.dumps([BASH])


def test_an_upstream_with_its_own_search_is_left_to_run_it() -> None:
    model, backend = SearchModel(protocol="openai_responses", mode="plain"), StaticSearch(HITS)
    with proxy(model, "http", backend) as url:
        msg = _anthropic(url, False)
    assert msg["content"][0]["text"] == ANSWER
    assert backend.queries == []
    tools = model.bodies[0].get("tools", [])
    assert not any(t.get("name") == "web_search" and t.get("type") == "function" for t in tools)


def _raw_stream(url: str, path: str, body: dict[str, Any]) -> bytes:
    import httpx

    with httpx.stream("POST", url + path, json=body, headers={"x-api-key": "k"}, timeout=10) as r:
        assert r.status_code == 200
        return r.read()


@BOTH
def test_the_rounds_are_one_stream_with_one_start_and_one_end(transport: str) -> None:
    from tests.helpers.validate_responses import validate_responses_stream

    model, backend = SearchModel(), StaticSearch(HITS)
    ask = {"model": "m", "max_tokens": 100, "stream": True, "tools": [SEARCH_TOOL]}
    ask["messages"] = [{"role": "user", "content": "news?"}]
    with proxy(model, transport, backend) as url:
        anthropic_raw = _raw_stream(url, "/v1/messages", ask)
        responses_ask = {
            "model": "m",
            "input": "news?",
            "stream": True,
            "tools": [{"type": "web_search"}],
        }
        responses_raw = _raw_stream(url, "/v1/responses", responses_ask)
    events = [
        line[7:] for line in anthropic_raw.decode().splitlines() if line.startswith("event: ")
    ]
    assert events.count("message_start") == 1 and events.count("message_stop") == 1
    assert events[-1] == "message_stop" and events.count("message_delta") == 1
    assert b'"tool_use"' not in anthropic_raw  # the function call round is not shown
    assert b'"name": "web_search"' in anthropic_raw or b'"name":"web_search"' in anthropic_raw
    # the strict validator: sequence numbers, items added and done, the terminal snapshot
    stream = validate_responses_stream(responses_raw)
    assert stream.response is not None and stream.response["status"] == "completed"
    assert [i["type"] for i in stream.response["output"]] == ["web_search_call", "message"]


@BOTH
def test_a_gemini_clients_google_search_is_run_by_the_proxy_through_a_chat_upstream(
    transport: str,
) -> None:
    import httpx

    model, backend = SearchModel(), StaticSearch(HITS)
    body = {
        "contents": [{"role": "user", "parts": [{"text": "news?"}]}],
        "tools": [{"googleSearch": {}}],
    }
    with proxy(model, transport, backend) as url:
        path = "/v1beta/models/m:generateContent"
        r = httpx.post(url + path, headers={"x-goog-api-key": "k"}, json=body, timeout=10)
    assert r.status_code == 200, r.text
    candidate = r.json()["candidates"][0]
    assert candidate["content"]["parts"][-1]["text"] == ANSWER
    assert r.json()["usageMetadata"]["promptTokenCount"] == 300
    assert backend.queries == [QUERY] and len(model.bodies) == 2
    # (groundingMetadata is the response side's Gemini encoder's: the lead checks it
    # here once that merges; streamed Gemini needs its ServerTool event too.)


@STREAMS
def test_the_ledger_counts_the_proxys_searches_and_both_rounds_tokens(
    stream: bool, tmp_path: Any
) -> None:
    import sqlite3

    model, backend = SearchModel(), StaticSearch(HITS)
    db = tmp_path / "usage.db"
    with serve(model) as base:
        up = Upstream("openai_chat_completions", base + "/v1")
        app = ProxaiMiddleware(_not_found, upstream=up, search=backend, ledger=f"sqlite:///{db}")
        with serve(app, close_app=True) as url:
            _anthropic(url, stream)
    row = (
        sqlite3.connect(db)
        .execute(
            "SELECT server_tool_requests, input_tokens, output_tokens, status FROM proxai_usage"
        )
        .fetchall()
    )
    assert row == [(1, 300, 20, 200)]


class _PatchingModel(SearchModel):
    """Answers by calling the client's freeform ``apply_patch`` (sent to a Chat
    upstream as a function taking ``{"input": ...}``)."""

    def answer(self, req: c.Request, n: int) -> c.Response:
        call = c.ToolCall(id="call_p1", name="apply_patch", arguments=json.dumps({"input": PATCH}))
        return c.Response(
            id=f"chat{n}", model=req.model, content=[call], stop_reason="tool_use", usage=c.Usage()
        )


PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"


@BOTH
@STREAMS
def test_a_custom_tool_call_in_a_searched_answer_reaches_the_client_as_a_custom_call(
    transport: str, stream: bool
) -> None:
    """Codex offers ``apply_patch`` (a custom tool, a function toward Chat) beside
    its ``web_search``: the call goes back as a ``custom_tool_call`` with the raw
    patch, as on the path without search."""
    model = _PatchingModel()
    grammar = {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}
    kw: dict[str, Any] = {
        "model": "m",
        "input": "Add a.txt",
        "tools": [
            {"type": "custom", "name": "apply_patch", "format": grammar},
            {"type": "web_search"},
        ],
    }
    with proxy(model, transport, StaticSearch(HITS)) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        if stream:
            with client.responses.stream(**kw) as s:
                resp = s.get_final_response().model_dump()
        else:
            resp = client.responses.create(**kw).model_dump()
    offered = [t["function"]["name"] for t in model.bodies[0]["tools"]]
    assert offered == ["apply_patch", "web_search"]
    (call,) = resp["output"]
    assert call["type"] == "custom_tool_call" and call["name"] == "apply_patch"
    assert call["input"] == PATCH
