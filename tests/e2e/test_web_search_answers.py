"""A web search answer from each provider with hosted search (Anthropic, Responses,
Gemini; ``tests/helpers/search_answers.py``, as they send it) reaches every client in
the client's own shape, over both transports, streamed and not: the strict validators
pass, the client's SDK parses it, every client sees the same search (query and pages,
where its protocol can say so) and the same cited text with the same page — the spans
mapped between character offsets (Responses, Chat), byte offsets (Gemini) and cited
blocks (Anthropic). A same-protocol answer passes through byte for byte."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types

from tests.helpers import search_answers as sa
from tests.helpers.servers import FakeUpstream, Reply, Seen, sse_frames
from tests.helpers.validate_anthropic import validate_anthropic_message, validate_anthropic_stream
from tests.helpers.validate_chat import validate_chat_stream
from tests.helpers.validate_gemini import (
    grounding_of,
    validate_gemini_response,
    validate_gemini_stream,
)
from tests.helpers.validate_responses import (
    check_annotations,
    check_search_item,
    validate_responses_stream,
)

from .conftest import Stack

UPSTREAMS = list(sa.ANSWERS)
CLIENTS = [
    "openai_chat_completions",
    "openai_responses",
    "anthropic_messages",
    "gemini_generate_content",
]
URLS = [url for url, _ in sa.PAGES]
CITED = [(sa.CITED, URLS[0])]
SEARCHES = [(sa.QUERY, URLS)]
PROMPT = "Do sea otters hold hands?"


def provider_answer(protocol: str) -> Any:
    plain, streamed = sa.ANSWERS[protocol]

    def answer(seen: Seen) -> Reply:
        if "streamGenerateContent" in seen.path or b'"stream":true' in seen.body.replace(b" ", b""):
            return Reply(200, sa.SSE, sse_frames(streamed()))
        return Reply(200, sa.JSON, [plain()])

    return answer


# ------------------------------------------------------------- raw exchanges


def raw_call(client: str, base: str, stream: bool) -> bytes:
    headers: dict[str, str] = {}
    if client == "openai_chat_completions":
        path = "/v1/chat/completions"
        body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": PROMPT}]}
    elif client == "openai_responses":
        path, body = "/v1/responses", {"model": "m", "input": PROMPT}
    elif client == "anthropic_messages":
        path = "/v1/messages"
        body = {"model": "m", "max_tokens": 256, "messages": [{"role": "user", "content": PROMPT}]}
        headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    else:
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        path = f"/v1beta/models/m:{method}"
        body = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]}
        headers = {"x-goog-api-key": "k"}
    if stream and client != "gemini_generate_content":
        body["stream"] = True
    r = httpx.post(base + path, json=body, headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    return r.content


def _anthropic_view(content: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    searches, cited = [], []
    queries = {b["id"]: b["input"]["query"] for b in content if b["type"] == "server_tool_use"}
    for b in content:
        if b["type"] == "web_search_tool_result":
            searches.append((queries[b["tool_use_id"]], [r["url"] for r in b["content"]]))
        elif b["type"] == "text":
            for x in b.get("citations") or ():
                # The cited span: the quote when it is the claim's text, else the block.
                span = x["cited_text"] if x["cited_text"] in b["text"] else b["text"]
                cited.append((span, x["url"]))
    return searches, cited


def _responses_view(output: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    searches, cited = [], []
    for item in output:
        if item["type"] == "web_search_call":
            check_search_item("item", item)
            action = item["action"]
            searches.append((action["query"], [s["url"] for s in action["sources"]]))
        for part in item.get("content") or ():
            check_annotations("part", part.get("text", ""), part.get("annotations") or [])
            for a in part.get("annotations") or ():
                assert 0 <= a["start_index"] <= a["end_index"] <= len(part["text"]), a
                cited.append((part["text"][a["start_index"] : a["end_index"]], a["url"]))
    return searches, cited


def _chat_view(content: str, annotations: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    cites = [a["url_citation"] for a in annotations]
    return [], [(content[x["start_index"] : x["end_index"]], x["url"]) for x in cites]


def _gemini_view(text: str, meta: dict[str, Any] | None) -> tuple[list[Any], list[Any]]:
    assert meta is not None, "no groundingMetadata"
    uris = [ch["web"]["uri"] for ch in meta["groundingChunks"]]
    data = text.encode()
    cited = [
        (data[s["segment"].get("startIndex", 0) : s["segment"]["endIndex"]].decode(), uris[k])
        for s in meta["groundingSupports"]
        for k in s["groundingChunkIndices"]
    ]
    return [(q, uris) for q in meta["webSearchQueries"]], cited


def client_view(client: str, body: bytes, stream: bool) -> tuple[list[Any], list[Any], Any]:
    """(searches, cited spans, search count) as the client's strict validator reads them."""
    if client == "anthropic_messages":
        if stream:
            s = validate_anthropic_stream(body)
            content = []
            for b in s.blocks:
                block = dict(b.start)
                if b.type == "server_tool_use":
                    block["input"] = json.loads(b.partial_json)
                elif b.type == "text":
                    block.update(text=b.text, citations=b.citations)
                content.append(block)
            usage = s.usage
        else:
            m = validate_anthropic_message(body)
            content, usage = m["content"], m["usage"]
        assert usage is not None
        return (*_anthropic_view(content), usage["server_tool_use"]["web_search_requests"])
    if client == "openai_responses":
        output = validate_responses_stream(body).items if stream else json.loads(body)["output"]
        return (*_responses_view(output), None)
    if client == "openai_chat_completions":
        if stream:
            c = validate_chat_stream(body)
            return (*_chat_view(c.content or "", c.annotations), None)
        msg = json.loads(body)["choices"][0]["message"]
        return (*_chat_view(msg["content"], msg.get("annotations") or []), None)
    if stream:
        g = validate_gemini_stream(body)
        return (*_gemini_view(g.gist["text"], grounding_of(g.frames)), None)
    gist = validate_gemini_response(body)
    return (*_gemini_view(gist["text"], grounding_of([json.loads(body)])), None)


# ----------------------------------------------------------------- SDK turns


def sdk_view(client: str, base: str, stream: bool) -> tuple[list[Any], list[Any]] | None:
    """The same through the client's SDK (its accumulator, when streamed): what the
    SDK built. Chat and Gemini SDKs keep no search shape of their own: parsed only."""
    if client == "anthropic_messages":
        a = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
        args: dict[str, Any] = {
            "model": "m",
            "max_tokens": 256,
            "messages": [{"role": "user", "content": PROMPT}],
        }
        if stream:
            with a.messages.stream(**args) as s:
                msg = s.get_final_message()
        else:
            msg = a.messages.create(**args)
        return _anthropic_view(msg.model_dump(mode="json")["content"])
    if client == "gemini_generate_content":
        g = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=base))
        if stream:
            chunks = list(g.models.generate_content_stream(model="m", contents=PROMPT))
        else:
            chunks = [g.models.generate_content(model="m", contents=PROMPT)]
        assert chunks[-1].candidates[0].grounding_metadata is not None  # type: ignore[index]
        return None
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    if client == "openai_chat_completions":
        msgs: Any = [{"role": "user", "content": PROMPT}]
        if stream:
            for _ in o.chat.completions.create(model="m", messages=msgs, stream=True):
                pass
        else:
            o.chat.completions.create(model="m", messages=msgs)
        return None
    if stream:
        with o.responses.stream(model="m", input=PROMPT) as s:
            response = s.get_final_response()
    else:
        response = o.responses.create(model="m", input=PROMPT)
    return _responses_view(response.model_dump(mode="json")["output"])


CASES = [(u, c) for u in UPSTREAMS for c in CLIENTS if u != c]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize(("upstream", "client"), CASES, ids=[f"{u}-to-{c}" for u, c in CASES])
def test_a_search_answer_reaches_every_client_with_its_search_and_cited_span(
    stack: Stack, fake: FakeUpstream, upstream: str, client: str, inner: bool, stream: bool
) -> None:
    fake.push(provider_answer(upstream))
    base = stack.proxy(fake, upstream, inner=inner)  # type: ignore[arg-type]
    searches, cited, count = client_view(client, raw_call(client, base, stream), stream)
    assert cited == CITED
    if client != "openai_chat_completions":  # (Chat has no shape for a search)
        assert searches == SEARCHES
    if client == "anthropic_messages":
        assert count == 1  # Claude Code's "Did 1 search"
    via_sdk = sdk_view(client, base, stream)
    if via_sdk is not None:
        assert via_sdk == (searches, cited)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
def test_a_same_protocol_search_answer_passes_through_unchanged(
    stack: Stack, fake: FakeUpstream, upstream: str, stream: bool
) -> None:
    fake.push(provider_answer(upstream))
    base = stack.proxy(fake, upstream)  # type: ignore[arg-type]
    plain, streamed = sa.ANSWERS[upstream]
    got = raw_call(upstream, base, stream)
    want = streamed() if stream else plain()
    assert got == want
