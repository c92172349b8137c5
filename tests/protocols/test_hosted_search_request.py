"""The hosted web search on the request side, every client against every upstream
protocol (issue 30): each client's search tool is decoded to ``Request.web_search``
(a malformed one is its provider's 400), each upstream gets its own search tool with
the options it can express (the others reported), a tool choice naming the search
maps, and a replayed search reaches each upstream in a form it accepts (the upstream
codec's own decoder, which checks as the provider does, takes the body)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import PROTOCOLS, ProtocolName, UpstreamOptions
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols import get_codec, holds_search_placeholder
from proxai_asgi.protocols._kit.search_results import (
    CONTENT_PREFIX,
    content_placeholder,
    is_placeholder,
)

CHAT: ProtocolName = "openai_chat_completions"
RESPONSES: ProtocolName = "openai_responses"
ANTHROPIC: ProtocolName = "anthropic_messages"
GEMINI: ProtocolName = "gemini_generate_content"

LOCATION = {"type": "approximate", "city": "Lyon", "country": "FR"}
USER = "what happened today?"

# Each client's search with every option its provider has (that we map).
CLIENT_BODIES: dict[ProtocolName, dict[str, Any]] = {
    ANTHROPIC: {
        "model": "m",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": USER}],
        "tools": [
            {
                "type": "web_search_20250305",
                "name": "web_search",
                "max_uses": 3,
                "allowed_domains": ["example.org"],
                "user_location": LOCATION,
            }
        ],
    },
    RESPONSES: {
        "model": "m",
        "input": USER,
        "tools": [
            {
                "type": "web_search",
                "filters": {"allowed_domains": ["example.org"]},
                "user_location": LOCATION,
                "search_context_size": "high",
            }
        ],
    },
    GEMINI: {
        "contents": [{"role": "user", "parts": [{"text": USER}]}],
        "tools": [{"googleSearch": {}}],
    },
    CHAT: {
        "model": "m",
        "messages": [{"role": "user", "content": USER}],
        "web_search_options": {
            "search_context_size": "low",
            "user_location": {
                "type": "approximate",
                "approximate": {"city": "Lyon", "country": "FR"},
            },
        },
    },
}
EXPECTED_SEARCH = {
    ANTHROPIC: c.WebSearch(max_uses=3, allowed_domains=["example.org"], user_location=LOCATION),
    RESPONSES: c.WebSearch(
        allowed_domains=["example.org"], user_location=LOCATION, context_size="high"
    ),
    GEMINI: c.WebSearch(),
    CHAT: c.WebSearch(context_size="low", user_location=LOCATION),
}
# What each upstream's search can say (the rest is reported).
MAPPED: dict[ProtocolName, set[str]] = {
    ANTHROPIC: {"max_uses", "allowed_domains", "blocked_domains", "user_location"},
    RESPONSES: {"allowed_domains", "user_location", "context_size"},
    GEMINI: set(),
}
OPTIONS = ("max_uses", "allowed_domains", "blocked_domains", "user_location", "context_size")


def decode(protocol: ProtocolName, body: dict[str, Any], lossy: bool = False) -> c.Request:
    report = TranslationReport(lossy=lossy)
    req = get_codec(protocol).decode_request(json.dumps(body).encode(), report)
    if protocol == GEMINI:
        req.model = "m"
    return req


def encode(protocol: ProtocolName, req: c.Request) -> tuple[dict[str, Any], list[str]]:
    report = TranslationReport()
    body = get_codec(protocol).encode_request(req, report, UpstreamOptions())
    accepted = get_codec(protocol).decode_request(body, TranslationReport())  # strict
    assert accepted.messages  # (the upstream's own checks took it)
    return json.loads(body), report.dropped


def search_tool(protocol: ProtocolName, body: dict[str, Any]) -> Any:
    if protocol == ANTHROPIC:
        return next(t for t in body["tools"] if t.get("name") == "web_search")
    if protocol == RESPONSES:
        return next(t for t in body["tools"] if t["type"] == "web_search")
    if protocol == GEMINI:
        return next(t for t in body["tools"] if "googleSearch" in t)
    return body.get("web_search_options")


@pytest.mark.parametrize("client", list(CLIENT_BODIES))
def test_each_clients_search_tool_becomes_the_canonical_web_search(client: ProtocolName) -> None:
    assert decode(client, CLIENT_BODIES[client]).web_search == EXPECTED_SEARCH[client]


PAIRS = [(cl, up) for cl in PROTOCOLS for up in PROTOCOLS if cl != up]


@pytest.mark.parametrize(("client", "upstream"), PAIRS)
def test_the_upstream_gets_its_own_search_tool_and_the_rest_is_reported(
    client: ProtocolName, upstream: ProtocolName
) -> None:
    req = decode(client, CLIENT_BODIES[client])
    body, dropped = encode(upstream, req)
    ws = EXPECTED_SEARCH[client]
    if upstream == CHAT:  # no search of its own: the proxy runs it, or it is reported
        assert get_codec(CHAT).hosts_web_search(UpstreamOptions()) is False
        assert "web_search_options" not in body and "tools" not in body
        assert "tools.web_search" in dropped
        return
    assert get_codec(upstream).hosts_web_search(UpstreamOptions()) is True
    tool = search_tool(upstream, body)
    if upstream == ANTHROPIC:
        assert tool["type"] == "web_search_20250305"
        assert tool.get("max_uses") == ws.max_uses
        assert tool.get("allowed_domains") == ws.allowed_domains
        assert tool.get("user_location") == ws.user_location
    elif upstream == RESPONSES:
        assert tool.get("filters") == (
            {"allowed_domains": ws.allowed_domains} if ws.allowed_domains else None
        )
        assert tool.get("user_location") == ws.user_location
        assert tool.get("search_context_size") == ws.context_size
        # the pages each search found, which the client's search result lists
        assert "web_search_call.action.sources" in body["include"]
    else:
        assert tool == {"googleSearch": {}}
    unmapped = {
        f"tools.web_search.{o}"
        for o in OPTIONS
        if getattr(ws, o) is not None and o not in MAPPED[upstream]
    }
    assert {d for d in dropped if d.startswith("tools.web_search")} == unmapped
    assert not [d for d in dropped if d.startswith("tools.") and "web_search" not in d]


@pytest.mark.parametrize(
    ("client", "body", "param"),
    [
        (
            ANTHROPIC,
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 0},
            "max_uses",
        ),
        (ANTHROPIC, {"type": "web_search_20250305", "name": "search"}, "name"),
        (
            ANTHROPIC,
            {
                "type": "web_search_20250305",
                "name": "web_search",
                "allowed_domains": ["a.org"],
                "blocked_domains": ["b.org"],
            },
            "tools.0",
        ),
        (
            ANTHROPIC,
            {
                "type": "web_search_20250305",
                "name": "web_search",
                "user_location": {"type": "exact"},
            },
            "user_location.type",
        ),
        (RESPONSES, {"type": "web_search", "search_context_size": "huge"}, "search_context_size"),
        (
            RESPONSES,
            {"type": "web_search", "filters": {"allowed_domains": "a.org"}},
            "allowed_domains",
        ),
        (RESPONSES, {"type": "web_search_preview", "filters": {}}, "filters"),
        (GEMINI, {"googleSearch": {"freshness": 1}}, "google_search"),
        (CHAT, {"search_context_size": "huge"}, "search_context_size"),
        (CHAT, {"user_location": {"type": "approximate", "approximate": {"city": 5}}}, "city"),
    ],
)
def test_a_malformed_search_option_is_the_clients_providers_400(
    client: ProtocolName, body: dict[str, Any], param: str
) -> None:
    request = dict(CLIENT_BODIES[client])
    if client == CHAT:
        request["web_search_options"] = body
    else:
        request["tools"] = [body]
    with pytest.raises(ProxyError) as exc:
        decode(client, request)
    assert exc.value.status == 400 and param in (exc.value.param or "")


def test_gemini_exclude_domains_and_a_legacy_retrieval_tool_are_searches_too() -> None:
    body = dict(CLIENT_BODIES[GEMINI], tools=[{"google_search": {"exclude_domains": ["b.org"]}}])
    assert decode(GEMINI, body).web_search == c.WebSearch(blocked_domains=["b.org"])
    legacy = dict(CLIENT_BODIES[GEMINI], tools=[{"googleSearchRetrieval": {}}])
    assert decode(GEMINI, legacy).web_search == c.WebSearch()
    out, dropped = encode(ANTHROPIC, decode(GEMINI, body))
    assert search_tool(ANTHROPIC, out)["blocked_domains"] == ["b.org"] and dropped == []
    _, dropped = encode(RESPONSES, decode(GEMINI, body))
    assert dropped == ["tools.web_search.blocked_domains"]


def test_unknown_or_provider_only_fields_of_a_search_tool_are_reported_not_refused() -> None:
    anthropic = dict(
        CLIENT_BODIES[ANTHROPIC],
        tools=[{"type": "web_search_20260209", "name": "web_search", "defer_loading": True}],
    )
    report = TranslationReport()
    req = get_codec(ANTHROPIC).decode_request(json.dumps(anthropic).encode(), report)
    assert req.web_search == c.WebSearch() and report.dropped == ["tools.web_search.defer_loading"]
    codex = dict(
        CLIENT_BODIES[RESPONSES], tools=[{"type": "web_search", "external_web_access": False}]
    )
    report = TranslationReport()
    req = get_codec(RESPONSES).decode_request(json.dumps(codex).encode(), report)
    assert req.web_search == c.WebSearch()
    assert report.dropped == ["tools.web_search.external_web_access"]


def test_the_same_protocol_keeps_its_own_raw_search_tool() -> None:
    for protocol in (ANTHROPIC, RESPONSES, GEMINI):
        req = decode(protocol, CLIENT_BODIES[protocol])
        body, dropped = encode(protocol, req)
        raw = CLIENT_BODIES[protocol]["tools"]
        assert body["tools"] == raw and dropped == []


# ---------------------------------------------------------------------- tool choice


def test_a_tool_choice_naming_the_search_maps_where_the_upstream_can_say_it() -> None:
    anthropic = dict(CLIENT_BODIES[ANTHROPIC], tool_choice={"type": "tool", "name": "web_search"})
    req = decode(ANTHROPIC, anthropic)
    body, _ = encode(RESPONSES, req)
    assert body["tool_choice"] == {"type": "web_search"}
    body, dropped = encode(GEMINI, req)  # Gemini cannot force its search
    assert "toolConfig" not in body and "tool_choice" in dropped
    responses = dict(CLIENT_BODIES[RESPONSES], tool_choice={"type": "web_search_preview"})
    req = decode(RESPONSES, responses)
    assert req.tool_choice == c.ToolChoice(mode="tool", name="web_search")
    body, _ = encode(ANTHROPIC, req)
    assert body["tool_choice"] == {"type": "tool", "name": "web_search"}
    preview = dict(responses, tools=[{"type": "web_search_preview"}])
    body, _ = encode(RESPONSES, decode(RESPONSES, preview))  # (a stored turn's path)
    assert body["tool_choice"] == {"type": "web_search_preview"}


# ---------------------------------------------------------------------- replays

SEARCH_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_01",
    "name": "web_search",
    "input": {"query": "lyon news"},
}


def _result(encrypted: str) -> dict[str, Any]:
    return {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_01",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.org/a",
                "title": "Page A",
                "encrypted_content": encrypted,
                "page_age": "1 day",
            }
        ],
    }


def anthropic_replay(encrypted: str) -> dict[str, Any]:
    return dict(
        CLIENT_BODIES[ANTHROPIC],
        messages=[
            {"role": "user", "content": USER},
            {
                "role": "assistant",
                "content": [SEARCH_USE, _result(encrypted), {"type": "text", "text": "It rained."}],
            },
            {"role": "user", "content": "and tomorrow?"},
        ],
    )


RESPONSES_REPLAY = dict(
    CLIENT_BODIES[RESPONSES],
    input=[
        {"role": "user", "content": USER},
        {
            "type": "web_search_call",
            "id": "ws_01",
            "status": "completed",
            "action": {
                "type": "search",
                "query": "lyon news",
                "sources": [{"type": "url", "url": "https://example.org/a"}],
            },
        },
        {"role": "assistant", "content": [{"type": "output_text", "text": "It rained."}]},
        {"role": "user", "content": "and tomorrow?"},
    ],
)


def _assistant_text(protocol: ProtocolName, body: dict[str, Any]) -> str:
    if protocol == ANTHROPIC:
        turns = [m for m in body["messages"] if m["role"] == "assistant"]
        blocks = turns[0]["content"]
        return blocks if isinstance(blocks, str) else "".join(b.get("text", "") for b in blocks)
    if protocol == RESPONSES:
        items = [i for i in body["input"] if i.get("role") == "assistant"]
        return "".join(p["text"] for i in items for p in i["content"])
    if protocol == GEMINI:
        turns = [t for t in body["contents"] if t["role"] == "model"]
        return "".join(p.get("text", "") for t in turns for p in t["parts"])
    return "".join(m["content"] or "" for m in body["messages"] if m["role"] == "assistant")


@pytest.mark.parametrize("upstream", [CHAT, RESPONSES, GEMINI])
def test_an_anthropic_search_replayed_to_another_upstream_is_text_it_accepts(
    upstream: ProtocolName,
) -> None:
    req = decode(ANTHROPIC, anthropic_replay("EqQBCioIAhgC"))
    assert req.messages[1].content[0] == c.ServerToolUse(
        id="srvtoolu_01",
        name="web_search",
        input={"query": "lyon news"},
        result=_result("EqQBCioIAhgC")["content"],
        hits=[
            c.SearchHit(
                url="https://example.org/a",
                title="Page A",
                page_age="1 day",
                encrypted_content="EqQBCioIAhgC",
            )
        ],
    )
    body, dropped = encode(upstream, req)
    said = _assistant_text(upstream, body)
    assert "lyon news" in said and "https://example.org/a" in said and "Page A" in said
    assert "It rained." in said and "EqQBCioIAhgC" not in json.dumps(body)
    assert not [d for d in dropped if "server_tool_use" in d or "web_search_tool_result" in d]


@pytest.mark.parametrize("upstream", [CHAT, ANTHROPIC, GEMINI])
def test_a_responses_search_replayed_to_another_upstream_is_text_it_accepts(
    upstream: ProtocolName,
) -> None:
    req = decode(RESPONSES, RESPONSES_REPLAY)
    body, _ = encode(upstream, req)
    said = _assistant_text(upstream, body)
    assert "lyon news" in said and "https://example.org/a" in said and "It rained." in said
    assert "ws_01" not in json.dumps(body)


def test_a_responses_search_goes_back_to_responses_as_its_item() -> None:
    req = decode(RESPONSES, RESPONSES_REPLAY)
    body, _ = encode(RESPONSES, req)
    call = next(i for i in body["input"] if i.get("type") == "web_search_call")
    assert call == RESPONSES_REPLAY["input"][1]


def test_anthropics_own_search_goes_back_to_anthropic_as_its_blocks() -> None:
    body, _ = encode(ANTHROPIC, decode(ANTHROPIC, anthropic_replay("EqQBCioIAhgC")))
    blocks = body["messages"][1]["content"]
    assert blocks[:2] == [SEARCH_USE, _result("EqQBCioIAhgC")]


def test_a_placeholder_replayed_toward_anthropic_becomes_text_not_encrypted_content() -> None:
    placeholder = content_placeholder(c.SearchHit(url="https://example.org/a"))
    assert is_placeholder(placeholder) and not is_placeholder("EqQBCioIAhgC")
    raw = json.dumps(anthropic_replay(placeholder)).encode()
    assert holds_search_placeholder(raw)  # (so the proxy translates it, not relays it)
    body, _ = encode(ANTHROPIC, decode(ANTHROPIC, anthropic_replay(placeholder)))
    assert CONTENT_PREFIX not in json.dumps(body)
    blocks = body["messages"][1]["content"]
    assert all(b["type"] == "text" for b in blocks)
    assert "https://example.org/a" in blocks[0]["text"]


def test_a_failed_or_proxy_run_search_reads_as_text_with_its_error_and_snippets() -> None:
    from proxai_asgi.protocols._kit.hosted_search import as_text

    failed = c.ServerToolUse(
        id="x", name="web_search", input={"query": "q"}, error="max_uses_exceeded"
    )
    assert as_text(failed) == "[web_search: q]\n(the search failed: max_uses_exceeded)"
    found = c.ServerToolUse(
        id="x",
        name="web_search",
        input={},
        hits=[c.SearchHit(url="https://a.example/", snippet="Sunny in Lyon.")],
    )
    assert as_text(found) == "[web_search]\n- <https://a.example/>\n  Sunny in Lyon."


def test_a_gemini_search_error_names_the_tool_where_it_is() -> None:
    f = {"functionDeclarations": [{"name": "f", "parameters": {"type": "object"}}]}
    body = dict(CLIENT_BODIES[GEMINI], tools=[f, {"google_search": {"freshness": 1}}])
    with pytest.raises(ProxyError) as exc:
        decode(GEMINI, body)
    assert 'Unknown name "freshness"' in exc.value.message
    assert exc.value.param == "tools[1].google_search"
