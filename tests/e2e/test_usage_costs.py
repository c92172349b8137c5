"""Every recorded provider answer with a usage block, served by a fake upstream,
through every client protocol (pass-through and translated), over both transports:
the ledger's token counts and cost equal a hand computation from the provider's own
usage block and list prices, and the same answer costs the same whatever the client
protocol.

The hand computation below is written from each provider's documented usage
semantics, not from the proxy's code: OpenAI's ``prompt_tokens`` / ``input_tokens``
include the cached ones; Anthropic's ``input_tokens`` excludes cache reads and writes,
and a stream's ``message_delta`` figures replace ``message_start``'s; Gemini's
``promptTokenCount`` includes ``cachedContentTokenCount`` and its
``candidatesTokenCount`` excludes ``thoughtsTokenCount`` (billed as output).

In-process: the proxy is called through ``httpx.ASGITransport``; the HTTP upstream is
one loopback server for the module, the wrapped-app upstream the same fake app.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from functools import cache
from typing import Any

import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Route, Upstream
from proxai_asgi.usage import MemoryLedger, UsageRecord
from tests.helpers.captures import capture_names, load, path_of
from tests.helpers.servers import serve

CHAT = "openai_chat_completions"
RESPONSES = "openai_responses"
ANTHROPIC = "anthropic_messages"
GEMINI = "gemini_generate_content"
CLIENTS = (CHAT, RESPONSES, ANTHROPIC, GEMINI)
OF_PREFIX = {"anthropic_": ANTHROPIC, "chat_": CHAT, "responses_": RESPONSES, "gemini_": GEMINI}

# List prices in USD per million tokens, as the providers publish them (see
# proxai_asgi/usage/price_list.py for the sources): input, output, cache read,
# cache write 5 m, cache write 1 h; and USD per web search.
PRICES: dict[str, tuple[float, float, float, float, float, float] | None] = {
    "claude-sonnet-4-20250514": (3.0, 15.0, 0.30, 3.75, 6.0, 0.01),
    "claude-sonnet-4-5-20250929": (3.0, 15.0, 0.30, 3.75, 6.0, 0.01),
    "gpt-4o-2024-08-06": (2.50, 10.0, 1.25, 2.50, 2.50, 0.01),
    "gpt-5-2025-08-07": (1.25, 10.0, 0.125, 1.25, 1.25, 0.01),
    "gemini-2.5-flash": (0.30, 2.50, 0.03, 0.30, 0.30, 0.0),
    "gemini-2.5-pro": (1.25, 10.0, 0.125, 1.25, 1.25, 0.0),
    "gemini-3-pro-preview": (2.0, 12.0, 0.20, 2.0, 2.0, 0.0),
    "gemini-1.5-flash": None,  # retired, not in the table: its cost is unknown (None)
}


# ------------------------------------------------------------------ the answers


class Answer:
    def __init__(
        self, name: str, protocol: str, stream: bool, body: bytes, model: str, status: int = 200
    ):
        self.name, self.protocol, self.stream, self.body = name, protocol, stream, body
        self.model = model  # the model the client asks for
        self.status = status


def _sse_data(body: str) -> Iterator[dict[str, Any]]:
    for frame in body.replace("\r\n", "\n").split("\n\n"):
        data = "".join(ln[5:].lstrip() for ln in frame.split("\n") if ln.startswith("data:"))
        if data and data != "[DONE]":
            yield json.loads(data)


def _answers() -> list[Answer]:
    out = []
    for name in capture_names():
        if "_err_" in name:
            continue
        cap = load(name)
        protocol = next(p for prefix, p in OF_PREFIX.items() if name.startswith(prefix))
        body = cap["response"]["body"]
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        req = cap["request"].get("body") or {}
        url = cap["request"].get("url") or ""
        model = req.get("model") or (url.split("models/")[1].split(":")[0] if url else "gpt-4o")
        out.append(Answer(name, protocol, bool(cap["stream"]), raw, model))
    return out


def _synthetic() -> list[Answer]:
    """Recorded answers with what no recording has: Anthropic cache writes of both
    lifetimes and web searches, a Chat and a Responses answer with cache reads and
    reasoning tokens, a Gemini answer with cached content, a Responses web search."""
    out = []
    msg = json.loads(load("anthropic_json_cache_read")["response"]["body"])
    msg["usage"] = {
        "input_tokens": 40,
        "cache_creation_input_tokens": 3000,
        "cache_read_input_tokens": 2000,
        "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000},
        "output_tokens": 120,
        "server_tool_use": {"web_search_requests": 2},
    }
    out.append(Answer("synthetic_anthropic_cache_writes", ANTHROPIC, False, _j(msg), "claude-x"))
    sse = load("anthropic_sse_text_basic")["response"]["body"]
    sse = sse.replace(
        '"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":15}',
        '"cache_creation_input_tokens":500,"cache_read_input_tokens":700,"output_tokens":15,'
        '"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":500},'
        '"server_tool_use":{"web_search_requests":1}}',
    )
    assert '"ephemeral_1h_input_tokens":500' in sse
    out.append(Answer("synthetic_anthropic_sse_cache_writes", ANTHROPIC, True, sse.encode(), "c"))
    chat = json.loads(load("chat_json_cached_tokens")["response"]["body"])
    chat["usage"]["completion_tokens_details"]["reasoning_tokens"] = 64
    out.append(Answer("synthetic_chat_reasoning", CHAT, False, _j(chat), "gpt-4o"))
    gem = json.loads(load("gemini_json_thinking")["response"]["body"])
    gem["usageMetadata"]["promptTokenCount"] = 250_000  # over Gemini 2.5 Pro's 200k tier
    gem["usageMetadata"]["cachedContentTokenCount"] = 100_000
    gem["modelVersion"] = "gemini-2.5-pro"
    out.append(Answer("synthetic_gemini_long_cached", GEMINI, False, _j(gem), "gemini-2.5-pro"))
    resp = load("responses_json_text_basic")["response"]["body"]
    resp = copy.deepcopy(resp if isinstance(resp, dict) else json.loads(resp))
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    resp["output"] = [{**search, "action": {"type": "search", "query": "q"}}, *resp["output"]]
    out.append(Answer("synthetic_responses_web_search", RESPONSES, False, _j(resp), "gpt-4o"))
    return out


def _j(obj: Any) -> bytes:
    return json.dumps(obj).encode()


# ------------------------------------------------------------------ hand computation


def _provider_usage(a: Answer) -> tuple[str, dict[str, int]]:
    """The served model and the ledger's token categories, from the provider's block."""
    if a.protocol == ANTHROPIC:
        if a.stream:
            frames = list(_sse_data(a.body.decode()))
            start = frames[0]["message"]
            u = dict(start["usage"])
            for f in frames:
                if f.get("type") == "message_delta":
                    u.update({k: v for k, v in f["usage"].items() if v is not None})
            model = start["model"]
        else:
            msg = json.loads(a.body)
            u, model = msg["usage"], msg["model"]
        written = u.get("cache_creation_input_tokens") or 0
        one_hour = (u.get("cache_creation") or {}).get("ephemeral_1h_input_tokens", 0)
        return model, {
            "input": u["input_tokens"],
            "output": u["output_tokens"],
            "cache_read": u.get("cache_read_input_tokens") or 0,
            "write_5m": written - one_hour,
            "write_1h": one_hour,
            "reasoning": 0,
            "tools": (u.get("server_tool_use") or {}).get("web_search_requests", 0),
        }
    if a.protocol == CHAT:
        chunks = list(_sse_data(a.body.decode())) if a.stream else [json.loads(a.body)]
        last = [ch for ch in chunks if ch.get("usage")][-1]
        u = last["usage"]
        cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        return last["model"], {
            "input": u["prompt_tokens"] - cached,
            "output": u["completion_tokens"],
            "cache_read": cached,
            "write_5m": 0,
            "write_1h": 0,
            "reasoning": (u.get("completion_tokens_details") or {}).get("reasoning_tokens", 0),
            "tools": 0,
        }
    if a.protocol == RESPONSES:
        if a.stream:
            events = list(_sse_data(a.body.decode()))
            r = [e["response"] for e in events if "response" in e][-1]  # the last snapshot
        else:
            r = json.loads(a.body)
        u = r["usage"]
        cached = u["input_tokens_details"]["cached_tokens"]
        return r["model"], {
            "input": u["input_tokens"] - cached,
            "output": u["output_tokens"],
            "cache_read": cached,
            "write_5m": 0,
            "write_1h": 0,
            "reasoning": u["output_tokens_details"]["reasoning_tokens"],
            "tools": sum(item["type"] == "web_search_call" for item in r["output"]),
        }
    chunks = list(_sse_data(a.body.decode())) if a.stream else [json.loads(a.body)]
    last = [ch for ch in chunks if ch.get("usageMetadata")][-1]
    u = last["usageMetadata"]
    cached = u.get("cachedContentTokenCount", 0)
    thoughts = u.get("thoughtsTokenCount", 0)
    return last["modelVersion"], {
        "input": u["promptTokenCount"] - cached + u.get("toolUsePromptTokenCount", 0),
        "output": u.get("candidatesTokenCount", 0) + thoughts,
        "cache_read": cached,
        "write_5m": 0,
        "write_1h": 0,
        "reasoning": thoughts,
        "tools": 0,
    }


def _hand_cost(model: str, t: dict[str, int]) -> float | None:
    prices = PRICES[model]
    if prices is None:
        return None
    inp, out, read, w5, w1, search = prices
    prompt = t["input"] + t["cache_read"] + t["write_5m"] + t["write_1h"]
    if model == "gemini-2.5-pro" and prompt > 200_000:  # the long-context prices
        inp, out, read = 2.50, 15.0, 0.25
    tokens = (
        t["input"] * inp
        + t["output"] * out
        + t["cache_read"] * read
        + t["write_5m"] * w5
        + t["write_1h"] * w1
    )
    return tokens / 1e6 + t["tools"] * search


# ------------------------------------------------------------------ the proxy


class Fake:
    """The upstream: whatever answer the running test set, for any request."""

    answer: Answer | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http" and self.answer is not None
        while (await receive()).get("more_body"):
            pass
        ctype = b"text/event-stream" if self.answer.stream else b"application/json"
        headers = [(b"content-type", ctype)]
        status = self.answer.status
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": self.answer.body})


FAKE = Fake()


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with serve(FAKE) as url:
        yield url


def _request(client: str, model: str, stream: bool) -> tuple[str, dict[str, Any]]:
    text = [{"role": "user", "content": "hi"}]
    if client == CHAT:
        body: dict[str, Any] = {"model": model, "messages": text, "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return "/v1/chat/completions", body
    if client == RESPONSES:
        return "/v1/responses", {"model": model, "input": text, "stream": stream}
    if client == ANTHROPIC:
        return "/v1/messages", {
            "model": model,
            "max_tokens": 64,
            "messages": text,
            "stream": stream,
        }
    action = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/v1beta/models/{model}:{action}", {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}]
    }


async def _exchange(
    a: Answer, client: str, transport: str, url: str, *, cost_header: bool = False
) -> tuple[httpx.Response, UsageRecord]:
    ledger = MemoryLedger()
    if transport == "inner":
        up = Upstream.inner_app(a.protocol)  # type: ignore[arg-type]
    else:
        base = url + "/v1" if a.protocol in (CHAT, RESPONSES) else url
        up = Upstream(a.protocol, base, "sk-up")  # type: ignore[arg-type]
    mw = ProxaiMiddleware(FAKE, routes=[Route("*", up)], ledger=ledger, cost_header=cost_header)
    path, body = _request(client, a.model, a.stream)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=mw), base_url="http://proxy"
        ) as http:
            r = await http.post(path, json=body, headers={"authorization": "Bearer sk-client"})
    finally:
        await mw.aclose()
    records = await ledger.records()
    assert len(records) == 1, records
    return r, records[0]


def _tokens(rec: UsageRecord) -> dict[str, int]:
    return {
        "input": rec.input_tokens,
        "output": rec.output_tokens,
        "cache_read": rec.cache_read_tokens,
        "write_5m": rec.cache_write_5m_tokens,
        "write_1h": rec.cache_write_1h_tokens,
        "reasoning": rec.reasoning_tokens,
        "tools": rec.server_tool_requests,
    }


# Answers only their own protocol's client can ask for.
SAME_PROTOCOL_ONLY = {"chat_sse_n3_choices"}  # n=3: alternative answers, a Chat request's


@cache
def _all() -> dict[str, Answer]:
    return {a.name: a for a in (*_answers(), *_synthetic())}


def _answer_names() -> list[str]:
    return [*(n for n in capture_names() if "_err_" not in n), *_SYNTHETIC_NAMES]


# Each answer built from a recording (``_synthetic``), and that recording.
_SYNTHETIC_NAMES = {
    "synthetic_anthropic_cache_writes": "anthropic_json_cache_read",
    "synthetic_anthropic_sse_cache_writes": "anthropic_sse_text_basic",
    "synthetic_chat_reasoning": "chat_json_cached_tokens",
    "synthetic_gemini_long_cached": "gemini_json_thinking",
    "synthetic_responses_web_search": "responses_json_text_basic",
}


@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("name", _answer_names())
def test_a_recorded_answer_costs_its_hand_computed_price_through_every_client_protocol(
    name: str, transport: str, upstream_url: str
) -> None:
    path_of(_SYNTHETIC_NAMES.get(name, name))
    answer = _all()[name]
    FAKE.answer = answer
    model, expected = _provider_usage(answer)
    hand = _hand_cost(model, expected)
    costs = {}
    for client in (answer.protocol,) if name in SAME_PROTOCOL_ONLY else CLIENTS:
        r, rec = asyncio.run(_exchange(answer, client, transport, upstream_url))
        assert r.status_code == 200, (client, r.text)
        assert rec.served_model == model, client
        assert _tokens(rec) == expected, client
        if hand is None:
            assert rec.cost_usd is None, client
        else:
            assert rec.cost_usd == pytest.approx(hand, abs=1e-9), client
            assert rec.price_version
        costs[client] = rec.cost_usd
    assert len(set(costs.values())) == 1, costs  # the same answer costs the same


# ------------------------------------------------------------------ the cost header


def _with_cost_header(
    name: str, client: str, transport: str, url: str, *, on: bool = True
) -> httpx.Response:
    FAKE.answer = _all()[name]
    r, _ = asyncio.run(_exchange(FAKE.answer, client, transport, url, cost_header=on))
    return r


@pytest.mark.parametrize(
    ("transport", "client"),
    [("http", ANTHROPIC), ("http", CHAT), ("inner", CHAT), ("inner", GEMINI)],
)
def test_a_plain_answer_carries_its_cost_in_a_header(
    transport: str, client: str, upstream_url: str
) -> None:
    """Pass-through (an Anthropic client) and translated, over both transports."""
    r = _with_cost_header("anthropic_json_cache_read", client, transport, upstream_url)
    assert r.status_code == 200
    # 12 input, 4167 cache reads, 350 output at Claude Sonnet 4's prices
    assert r.headers["x-proxai-cost"] == "0.0065361"
    assert float(r.headers["x-proxai-cost"]) == pytest.approx(
        (12 * 3.0 + 4167 * 0.30 + 350 * 15.0) / 1e6
    )


def test_a_pass_through_to_a_wrapped_app_cannot_carry_the_header(upstream_url: str) -> None:
    """The wrapped app as the only target relays its headers before its body."""
    r = _with_cost_header("anthropic_json_cache_read", ANTHROPIC, "inner", upstream_url)
    assert r.status_code == 200 and "x-proxai-cost" not in r.headers


@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("client", [ANTHROPIC, CHAT])
def test_a_stream_never_carries_the_cost_header(
    transport: str, client: str, upstream_url: str
) -> None:
    r = _with_cost_header("anthropic_sse_text_basic", client, transport, upstream_url)
    assert r.status_code == 200 and "x-proxai-cost" not in r.headers


@pytest.mark.parametrize("transport", ["http", "inner"])
def test_the_cost_header_is_absent_when_off(transport: str, upstream_url: str) -> None:
    r = _with_cost_header("anthropic_json_cache_read", CHAT, transport, upstream_url, on=False)
    assert r.status_code == 200 and "x-proxai-cost" not in r.headers


@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("client", [ANTHROPIC, CHAT])
def test_an_error_answer_never_carries_the_cost_header(
    transport: str, client: str, upstream_url: str
) -> None:
    cap = load("anthropic_err_400_invalid_request")
    body = cap["response"]["body"]
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    FAKE.answer = Answer("err", ANTHROPIC, False, raw, "claude-sonnet-4-5", status=400)
    r, rec = asyncio.run(_exchange(FAKE.answer, client, transport, upstream_url, cost_header=True))
    assert r.status_code == 400 and "x-proxai-cost" not in r.headers
    assert rec.cost_usd is None and rec.status == 400


@pytest.mark.parametrize("transport", ["http", "inner"])
def test_a_relayed_chat_stream_without_usage_costs_none_not_zero(
    transport: str, upstream_url: str
) -> None:
    """A Chat client that did not ask for ``include_usage`` gets no usage chunk, so
    the relayed answer says nothing of its usage: its record is unpriced."""
    body = load("chat_sse_text_basic_include_usage")["response"]["body"]
    frames = [f for f in body.split("\n\n") if '"usage":{' not in f]
    answer = Answer("no_usage", CHAT, True, "\n\n".join(frames).encode(), "gpt-4o")
    FAKE.answer = answer
    r, rec = asyncio.run(_exchange(answer, CHAT, transport, upstream_url))
    assert r.status_code == 200 and rec.status == 200
    assert rec.input_tokens == rec.output_tokens == 0
    assert rec.cost_usd is None and rec.price_version is None
