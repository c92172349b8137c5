"""A client's hosted web search through the proxy (issue 30, the request side): the
upstream receives its own protocol's search tool with the options it can express, the
others named in ``x-proxai-dropped-fields``; a malformed option is the client's own
provider's 400, before any upstream call; a replayed search reaches the upstream in a
form it accepts, and a replayed placeholder of the proxy's never reaches Anthropic as
encrypted content. Over both transports, streamed and not. (Chat upstreams, where the
proxy runs the search, are tested with that feature.)"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from proxai_asgi.protocols._kit.search_results import CONTENT_PREFIX, content_placeholder
from tests.helpers.canned import codec_answer
from tests.helpers.servers import FakeUpstream

from .conftest import Stack

CHAT: ProtocolName = "openai_chat_completions"
RESPONSES: ProtocolName = "openai_responses"
ANTHROPIC: ProtocolName = "anthropic_messages"
GEMINI: ProtocolName = "gemini_generate_content"
ANSWER = c.Response(
    id="x-1",
    model="m",
    content=[c.Text(text="ok")],
    stop_reason="end_turn",
    usage=c.Usage(input_tokens=3, output_tokens=1),
)
LOCATION = {"type": "approximate", "city": "Lyon", "country": "FR"}
USER = "what happened today?"
TOOL: dict[ProtocolName, Any] = {
    ANTHROPIC: {
        "type": "web_search_20250305",
        "name": "web_search",
        "max_uses": 2,
        "blocked_domains": ["spam.example"],
    },
    RESPONSES: {"type": "web_search", "user_location": LOCATION, "search_context_size": "low"},
    GEMINI: {"googleSearch": {}},
}


def request(client: ProtocolName, stream: bool, **extra: Any) -> tuple[str, dict[str, Any]]:
    """The client's path and body: a question, with its provider's search tool."""
    if client == GEMINI:
        path = "/v1beta/models/m:" + (
            "streamGenerateContent?alt=sse" if stream else "generateContent"
        )
        body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": USER}]}]}
        body["tools"] = [TOOL[GEMINI]]
        return path, body | extra
    if client == CHAT:
        body = {"model": "m", "messages": [{"role": "user", "content": USER}], "stream": stream}
        body["web_search_options"] = {"search_context_size": "high"}
        return "/v1/chat/completions", body | extra
    if client == RESPONSES:
        body = {"model": "m", "input": USER, "stream": stream, "tools": [TOOL[RESPONSES]]}
        return "/v1/responses", body | extra
    body = {
        "model": "m",
        "max_tokens": 100,
        "stream": stream,
        "messages": [{"role": "user", "content": USER}],
        "tools": [TOOL[ANTHROPIC]],
    }
    return "/v1/messages", body | extra


# What the upstream's own tool says for each client's search, and what is reported.
EXPECTED: dict[tuple[ProtocolName, ProtocolName], tuple[Any, set[str]]] = {
    (ANTHROPIC, RESPONSES): ({"type": "web_search"}, {"max_uses", "blocked_domains"}),
    (ANTHROPIC, GEMINI): ({"googleSearch": {}}, {"max_uses", "blocked_domains"}),
    (RESPONSES, ANTHROPIC): (
        {"type": "web_search_20250305", "name": "web_search", "user_location": LOCATION},
        {"context_size"},
    ),
    (RESPONSES, GEMINI): ({"googleSearch": {}}, {"user_location", "context_size"}),
    (GEMINI, ANTHROPIC): ({"type": "web_search_20250305", "name": "web_search"}, set()),
    (GEMINI, RESPONSES): ({"type": "web_search"}, set()),
    (CHAT, ANTHROPIC): ({"type": "web_search_20250305", "name": "web_search"}, {"context_size"}),
    (CHAT, RESPONSES): ({"type": "web_search", "search_context_size": "high"}, set()),
    (CHAT, GEMINI): ({"googleSearch": {}}, {"context_size"}),
}


def _search_tool(upstream: ProtocolName, body: dict[str, Any]) -> Any:
    tools = body.get("tools") or []
    assert len(tools) == 1, tools
    tools[0].pop("cache_control", None)  # (the proxy's own prompt-cache breakpoint)
    return tools[0]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize(("client", "upstream"), list(EXPECTED), ids=lambda p: str(p)[:9])
def test_the_clients_search_reaches_the_upstream_as_its_own_tool(
    stack: Stack,
    fake: FakeUpstream,
    client: ProtocolName,
    upstream: ProtocolName,
    inner: bool,
    stream: bool,
) -> None:
    fake.push(codec_answer(upstream, ANSWER))
    path, body = request(client, stream)
    r = httpx.post(stack.proxy(fake, upstream, inner=inner) + path, json=body, timeout=20)
    assert r.status_code == 200, r.text
    tool, reported = EXPECTED[(client, upstream)]
    assert _search_tool(upstream, fake.seen[0].json()) == tool
    dropped = r.headers.get("x-proxai-dropped-fields", "")
    said = {d.removeprefix("tools.web_search.") for d in dropped.split(", ") if d}
    assert said == reported


ERRORS: list[tuple[ProtocolName, dict[str, Any], Any]] = [
    (
        ANTHROPIC,
        {"tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 0}]},
        lambda e: e["type"] == "error" and e["error"]["type"] == "invalid_request_error",
    ),
    (
        RESPONSES,
        {"tools": [{"type": "web_search", "search_context_size": "huge"}]},
        lambda e: e["error"]["param"] == "tools[0].search_context_size",
    ),
    (
        GEMINI,
        {"tools": [{"googleSearch": {"freshness": "day"}}]},
        lambda e: e["error"]["status"] == "INVALID_ARGUMENT",
    ),
    (
        CHAT,
        {"web_search_options": {"search_context_size": "huge"}},
        lambda e: e["error"]["param"] == "web_search_options.search_context_size",
    ),
]


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize(("client", "extra", "shaped"), ERRORS, ids=[e[0] for e in ERRORS])
def test_a_malformed_search_option_is_the_providers_400_before_any_upstream_call(
    stack: Stack, fake: FakeUpstream, client: ProtocolName, extra: Any, shaped: Any, inner: bool
) -> None:
    upstream = RESPONSES if client != RESPONSES else ANTHROPIC
    fake.push(codec_answer(upstream, ANSWER))
    path, body = request(client, False, **extra)
    r = httpx.post(stack.proxy(fake, upstream, inner=inner) + path, json=body, timeout=20)
    assert r.status_code == 400 and shaped(r.json()), r.text
    assert fake.seen == []


# ---------------------------------------------------------------------- replays


def replay(encrypted: str) -> list[Any]:
    return [
        {"role": "user", "content": USER},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01",
                    "name": "web_search",
                    "input": {"query": "lyon news"},
                },
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_01",
                    "content": [
                        {
                            "type": "web_search_result",
                            "url": "https://example.org/a",
                            "title": "Page A",
                            "encrypted_content": encrypted,
                        }
                    ],
                },
                {"type": "text", "text": "It rained."},
            ],
        },
        {"role": "user", "content": "and tomorrow?"},
    ]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize("upstream", [CHAT, RESPONSES, GEMINI])
def test_a_replayed_anthropic_search_reaches_another_upstream_as_text(
    stack: Stack, fake: FakeUpstream, upstream: ProtocolName, inner: bool, stream: bool
) -> None:
    fake.push(codec_answer(upstream, ANSWER))
    path, body = request(ANTHROPIC, stream, messages=replay("EqQBCioIAhgC"))
    del body["tools"]
    r = httpx.post(stack.proxy(fake, upstream, inner=inner) + path, json=body, timeout=20)
    assert r.status_code == 200, r.text
    sent = fake.seen[0].body.decode()
    assert "lyon news" in sent and "https://example.org/a" in sent and "It rained." in sent
    assert "EqQBCioIAhgC" not in sent and "srvtoolu_01" not in sent


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_replayed_placeholder_never_reaches_anthropic_as_encrypted_content(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    fake.push(codec_answer(ANTHROPIC, ANSWER))
    placeholder = content_placeholder(c.SearchHit(url="https://example.org/a"))
    path, body = request(ANTHROPIC, stream, messages=replay(placeholder))
    r = httpx.post(stack.proxy(fake, ANTHROPIC, inner=inner) + path, json=body, timeout=20)
    assert r.status_code == 200, r.text
    sent = fake.seen[0].json()
    assert CONTENT_PREFIX not in fake.seen[0].body.decode()
    blocks = sent["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["text", "text"]
    assert "https://example.org/a" in blocks[0]["text"] and blocks[1]["text"] == "It rained."
    assert sent["tools"] == [TOOL[ANTHROPIC]]  # (the client's own tool, as it sent it)


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_anthropics_own_replayed_search_is_relayed_to_anthropic_untouched(
    stack: Stack, fake: FakeUpstream, inner: bool
) -> None:
    fake.push(codec_answer(ANTHROPIC, ANSWER))
    path, body = request(ANTHROPIC, False, messages=replay("EqQBCioIAhgC"))
    raw = json.dumps(body).encode()
    r = httpx.post(
        stack.proxy(fake, ANTHROPIC, inner=inner) + path,
        content=raw,
        headers={"content-type": "application/json"},
        timeout=20,
    )
    assert r.status_code == 200, r.text
    assert fake.seen[0].body == raw
