"""Codex's standalone web search, ``POST /v1/alpha/search`` (Codex with
``web_search = "live"``): ``{id, model, input?, commands: {search_query: [{q, recency?,
domains?}], ...}, settings: {filters, user_location, search_context_size, ...},
max_output_tokens?}`` answered with ``{"output": text, "encrypted_output": null}``.

Served as the routed upstream would search: an upstream that runs web search itself
gets a small Responses request with the ``web_search`` tool (translated like any
request) and the output is its answer with the sources it found; for one that has
none (``proxy_search``, Chat Completions) the proxy's search backend runs each query
and the output is the numbered results. Errors are the OpenAI error shape Codex reads,
with their status: a bad body 400, no way to search 501, every search failed 502."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from .. import canonical as c
from .. import pipeline
from ..codec import PathCall
from ..errors import ProxyError
from ..protocols import get_codec
from ..search import offer
from .exchange import admit

if TYPE_CHECKING:
    from ..routing import Upstream
    from .exchange import Exchange

MAX_ERROR_BODY = 1024 * 1024
MAX_JSON_BODY = 64 * 1024 * 1024
MAX_QUERIES = 8  # search_query entries served per request


class _Query(msgspec.Struct):
    q: str
    recency: int | None = None
    domains: list[str] | None = None


class _Commands(msgspec.Struct):  # (open, click, find... are the hosted search's own)
    search_query: list[_Query] | None = None


class _Filters(msgspec.Struct):
    allowed_domains: list[str] | None = None
    blocked_domains: list[str] | None = None


class _Settings(msgspec.Struct):
    filters: _Filters | None = None
    user_location: dict[str, Any] | None = None
    search_context_size: str | None = None


class _SearchRequest(msgspec.Struct):
    model: str
    id: str | None = None
    input: str | list[Any] | None = None
    commands: _Commands | None = None
    settings: _Settings | None = None
    max_output_tokens: int | None = None


class _SearchResponse(msgspec.Struct, omit_defaults=False):
    output: str
    encrypted_output: str | None = None


_decode = msgspec.json.Decoder(_SearchRequest)
_encode = msgspec.json.Encoder()


def _parse(body: bytes) -> tuple[_SearchRequest, list[str]]:
    try:
        req = _decode.decode(body)
    except msgspec.ValidationError as exc:
        raise ProxyError.invalid(f"invalid search request: {exc}") from None
    except msgspec.DecodeError:
        raise ProxyError.invalid("request body is not valid JSON") from None
    queries = (
        [q.q.strip() for q in (req.commands.search_query or []) if q.q.strip()]
        if req.commands
        else []
    )
    if not queries and isinstance(req.input, str) and req.input.strip():
        queries = [req.input.strip()]
    if not queries:
        raise ProxyError.invalid(
            "commands.search_query: no query to search for", param="commands.search_query"
        )
    return req, queries[:MAX_QUERIES]


async def search(ex: Exchange, body: bytes) -> None:
    """``POST /v1/alpha/search``."""
    head = ex.head(body)
    req, queries = _parse(body)
    route = ex.route(head)
    await admit(ex, route, body)
    up = route.upstream
    target = get_codec(up.protocol)
    if target.hosts_web_search(up):
        output = await _hosted(ex, up, req, queries)
    else:
        output = await _backend(ex, queries)
    await ex.json(200, _encode.encode(_SearchResponse(output=output)), [])


async def _backend(ex: Exchange, queries: list[str]) -> str:
    searcher = ex.mw.search
    if searcher.backend is None:
        raise ProxyError(
            501,
            "web search is unavailable: the routed upstream has no web search and the "
            "proxy has no search backend configured",
            kind="not_implemented",
            code="web_search_unavailable",
        )
    texts: list[str] = []
    first = 1
    failed = 0
    for n, query in enumerate(queries):
        use = await searcher.search(f"search_{n}", query)
        failed += use.error is not None
        texts.append(offer.results_text(use, first))
        first += len(use.hits or ())
    ex.usage = c.Usage(server_tool_requests=len(queries) - failed)  # (the ledger's count)
    if failed == len(queries):
        raise ProxyError(
            502, "web search failed: the search backend did not answer", kind="bad_gateway"
        )
    return "\n\n".join(texts)


async def _hosted(ex: Exchange, up: Upstream, req: _SearchRequest, queries: list[str]) -> str:
    """The upstream's own search, asked through a small Responses request."""
    tool: dict[str, Any] = {"type": "web_search"}
    settings = req.settings
    if settings is not None:
        if settings.filters is not None and settings.filters.allowed_domains:
            tool["filters"] = {"allowed_domains": settings.filters.allowed_domains}
        if settings.user_location:
            tool["user_location"] = settings.user_location
        if settings.search_context_size in ("low", "medium", "high"):
            tool["search_context_size"] = settings.search_context_size
    prompt = (
        "Search the web for each of these queries and report what you find, citing "
        "the sources' URLs:\n" + "\n".join(f"- {q}" for q in queries)
    )
    small: dict[str, Any] = {"model": ex.model, "input": prompt, "tools": [tool], "store": False}
    if req.max_output_tokens:
        small["max_output_tokens"] = req.max_output_tokens
    target = get_codec(up.protocol)
    model = ex.model or ""
    translation = pipeline.prepare(
        ex.client, target, _encode.encode(small), up, model=model, stream=False
    )
    ex.stream = False
    call = PathCall(model=model, stream=False)
    async with ex.open(up, translation.body, passthrough=False, call=call) as resp:
        if not 200 <= resp.status < 300:
            err = target.decode_error(resp.status, await resp.read(MAX_ERROR_BODY))
            raise err
        answer = target.decode_response(await resp.read(MAX_JSON_BODY))
    ex.upstream = up
    ex.usage, ex.response_model = answer.usage, answer.model
    return _output(answer)


def _output(answer: c.Response) -> str:
    """The upstream's answer and the sources its searches found (or it cited)."""
    text = "".join(p.text for p in answer.content if type(p) is c.Text).strip()
    seen: dict[str, str] = {}
    for p in answer.content:
        if type(p) is c.ServerToolUse:
            for hit in p.hits or ():
                seen.setdefault(hit.url, hit.title or hit.url)
        elif type(p) is c.Text:
            for cite in p.citations or ():
                seen.setdefault(cite.url, cite.title or cite.url)
    if seen:
        lines = [f"[{n}] {title}\nURL: {url}" for n, (url, title) in enumerate(seen.items(), 1)]
        text += "\n\nSources:\n" + "\n".join(lines)
    return text
