"""The function the proxy offers for a client's web search, its results as the model
reads them, and the answer's [n] references read back as citations."""

from __future__ import annotations

import json

from proxai_asgi import canonical as c
from proxai_asgi.search import offer


def _request(**kw: object) -> c.Request:
    base: dict[str, object] = {
        "model": "m",
        "messages": [c.Message(role="user", content=[c.Text(text="news?")])],
        "tools": [c.Tool(name="Bash", parameters={"type": "object"})],
        "web_search": c.WebSearch(max_uses=2),
    }
    base.update(kw)
    return c.Request(**base)  # type: ignore[arg-type]


def test_the_search_is_offered_as_a_function_beside_the_clients_own_tools() -> None:
    req = _request()
    up = offer.upstream_request(req, "web_search", req.web_search or c.WebSearch())
    assert [t.name for t in up.tools] == ["Bash", "web_search"]
    fn = up.tools[1]
    assert fn.kind == "function" and "query" in json.dumps(fn.parameters)
    assert "[1]" in (fn.description or "")  # the model is told how to cite
    assert up.web_search is None
    # the client's request (what its encoders see) is left as it was
    assert [t.name for t in req.tools] == ["Bash"] and req.web_search is not None


def test_the_functions_name_does_not_take_a_client_tools_name() -> None:
    req = _request(tools=[c.Tool(name="web_search")])
    assert offer.tool_name(req) == "proxy_web_search"
    assert offer.tool_name(_request()) == "web_search"


def test_a_client_that_forbids_tools_gets_no_search_offered() -> None:
    req = _request(tool_choice=c.ToolChoice(mode="none"))
    up = offer.upstream_request(req, "web_search", c.WebSearch())
    assert [t.name for t in up.tools] == ["Bash"]


def test_allowed_domains_are_told_to_the_model() -> None:
    tool = offer.function_tool("web_search", c.WebSearch(allowed_domains=["docs.python.org"]))
    assert "docs.python.org" in (tool.description or "")


def test_the_clients_raw_search_tool_is_not_also_sent_beside_the_function() -> None:
    hosted = c.HostedTool(
        protocol="anthropic_messages",
        type="web_search_20250305",
        raw={"name": "web_search", "max_uses": 3},
    )
    other = c.HostedTool(protocol="anthropic_messages", type="code_execution_20250825", raw={})
    ws = c.WebSearch(max_uses=3)
    req = _request(web_search=ws, hosted_tools=[hosted, other])
    assert offer.web_search_of(req) is ws
    up = offer.upstream_request(req, "web_search", ws)
    # not also reported as dropped by the upstream's encoder; other tools stay its to report
    assert up.hosted_tools == [other] and up.web_search is None
    assert offer.web_search_of(_request(web_search=None)) is None


def test_results_are_numbered_sources_with_url_title_and_excerpt() -> None:
    use = c.ServerToolUse(
        id="call_1",
        name="web_search",
        input={"query": "py 3.14"},
        hits=[
            c.SearchHit(url="https://a.example/x", title="A", snippet="alpha text"),
            c.SearchHit(url="https://b.example/y", title="B", snippet="beta text", page_age="2026"),
        ],
    )
    result = offer.result_of(use, first=3)
    text = result.content[0].text  # type: ignore[union-attr]
    assert not result.is_error and result.call_id == "call_1"
    assert "[3] A\nURL: https://a.example/x" in text and "alpha text" in text
    assert "[4] B\nURL: https://b.example/y" in text and "Published: 2026" in text


def test_a_failed_search_tells_the_model_it_failed() -> None:
    use = c.ServerToolUse(id="c", name="web_search", input={"query": "q"}, error="unavailable")
    result = offer.result_of(use, 1)
    assert result.is_error and "unavailable" in result.content[0].text  # type: ignore[union-attr]
    over = c.ServerToolUse(id="c", name="web_search", error="max_uses_exceeded")
    assert "No more web searches" in offer.result_of(over, 1).content[0].text  # type: ignore[union-attr]


def test_a_calls_query_is_read_from_its_arguments() -> None:
    call = c.ToolCall(id="1", name="web_search", arguments='{"query": " rust 2026 "}')
    assert offer.query_of(call) == "rust 2026"
    assert offer.query_of(c.ToolCall(id="1", name="web_search", arguments="{}")) is None
    assert offer.query_of(c.ToolCall(id="1", name="web_search", arguments="not json")) is None
    assert offer.query_of(c.ToolCall(id="1", name="web_search", arguments='{"query": 5}')) is None


def test_numbered_references_become_citations_of_their_sources() -> None:
    sources = [
        c.SearchHit(url="https://a.example", title="A", snippet="x" * 400),
        c.SearchHit(url="https://b.example", title="B"),
    ]
    text = "Yes [1]. Both agree [1, 2]; not [7] nor [0]."
    cites = offer.citations(text, sources)
    assert [x.url for x in cites] == ["https://a.example", "https://a.example", "https://b.example"]
    first = cites[0]
    assert text[first.start_index : first.end_index] == "[1]"  # type: ignore[misc]
    assert first.title == "A" and first.cited_text == "x" * offer.CITED_TEXT_CHARS
    assert text[cites[2].start_index : cites[2].end_index] == "[1, 2]"  # type: ignore[misc]
    assert offer.citations("no refs [1]", []) == []


def test_an_earlier_search_the_client_replays_reaches_the_model_as_a_call_and_result() -> None:
    use = c.ServerToolUse(
        id="srv_1",
        name="web_search",
        input={"query": "q"},
        hits=[c.SearchHit(url="https://a.example", title="A", snippet="s")],
    )
    messages = [
        c.Message(role="user", content=[c.Text(text="hi")]),
        c.Message(
            role="assistant", content=[c.Text(text="Looking."), use, c.Text(text="Done [1].")]
        ),
        c.Message(role="user", content=[c.Text(text="more")]),
    ]
    out = offer.replayed(messages, "web_search")
    roles = [m.role for m in out]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    call = out[1].content[-1]
    assert (
        isinstance(call, c.ToolCall)
        and call.id == "srv_1"
        and json.loads(call.arguments) == {"query": "q"}
    )
    result = out[2].content[0]
    assert isinstance(result, c.ToolResult) and "[1] A" in result.content[0].text  # type: ignore[union-attr]
    assert offer.replayed(messages[:1], "web_search") is not None


def test_a_body_that_may_search_is_told_by_its_bytes() -> None:
    from proxai_asgi.serving.searching import may_search

    assert may_search(b'{"tools":[{"type":"web_search_20250305"}]}')
    assert may_search(b'{"tools":[{"googleSearch":{}}]}') and may_search(b'{"google_search":{}}')
    assert not may_search(b'{"tools":[{"name":"Bash"}]}')
