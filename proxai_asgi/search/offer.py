"""The web search the proxy runs itself, as the model sees it: a function tool
offered beside the client's own, the results given back as numbered sources, and the
answer's ``[n]`` references read back as citations of those sources (sans-IO)."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from .. import canonical as c
from ..protocols._kit.hosted_search import is_search_tool

TOOL_NAME = "web_search"
_DESCRIPTION = (
    "Search the web. Use it when the answer needs information you do not have or that "
    "may have changed: recent events, current versions, prices, documentation, facts "
    "to check. Returns numbered sources (title, URL, an excerpt). Cite the sources you "
    "use in your answer as [1], [2], ... by their numbers."
)
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "The search query."}},
    "required": ["query"],
    "additionalProperties": False,
}
_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()


def tool_name(request: c.Request) -> str:
    """The function's name: ``web_search``, unless a client tool already has it."""
    taken = {t.name for t in request.tools}
    name = TOOL_NAME
    while name in taken:
        name = "proxy_" + name
    return name


def function_tool(name: str, ws: c.WebSearch) -> c.Tool:
    desc = _DESCRIPTION
    if ws.allowed_domains:
        desc += " Only these sites are searched: " + ", ".join(ws.allowed_domains) + "."
    return c.Tool(name=name, description=desc, parameters=_SCHEMA)


# ----------------------------------------------------------- the client's tool


def web_search_of(request: c.Request) -> c.WebSearch | None:
    """The client's web search tool (each client codec's decoder sets it), if any."""
    return request.web_search


# --------------------------------------------------------- the upstream's request


def upstream_request(request: c.Request, name: str, ws: c.WebSearch) -> c.Request:
    """``request`` as the upstream gets it: the search offered as the function
    ``name`` (the client's tools kept), earlier searches of the conversation as
    calls of it with their results."""
    tools = [*request.tools, function_tool(name, ws)]
    hosted = [h for h in request.hosted_tools if not is_search_tool(h)]
    choice = request.tool_choice
    if choice is not None and choice.mode == "none":
        tools = request.tools  # the client forbade tools: nothing is offered
    return msgspec.structs.replace(
        request,
        tools=tools,
        hosted_tools=hosted,
        web_search=None,
        messages=replayed(request.messages, name),
    )


def replayed(messages: list[c.Message], name: str) -> list[c.Message]:
    """The conversation with each earlier search (a ``ServerToolUse`` the client
    replays) as a call of the function and its result, so the model sees what it
    searched and found; other server tools are left to the encoder (dropped)."""
    if not any(type(p) is c.ServerToolUse for m in messages for p in m.content):
        return messages
    out: list[c.Message] = []
    number = 1
    for m in messages:
        uses = [p for p in m.content if type(p) is c.ServerToolUse and p.name == TOOL_NAME]
        if m.role != "assistant" or not uses:
            out.append(m)
            continue
        content: list[c.Part] = []
        for p in m.content:
            if type(p) is c.ServerToolUse and p.name == TOOL_NAME:
                content.append(call_of(p, name))
                out.append(c.Message(role="assistant", content=content))
                out.append(c.Message(role="tool", content=[result_of(p, number)]))
                number += len(p.hits or ())
                content = []
            else:
                content.append(p)
        if content:
            out.append(c.Message(role="assistant", content=content))
    return out


def call_of(use: c.ServerToolUse, name: str) -> c.ToolCall:
    query = str(use.input.get("query", ""))
    return c.ToolCall(id=use.id, name=name, arguments=_enc.encode({"query": query}).decode())


def query_of(call: c.ToolCall) -> str | None:
    """The query of a call of the function (None when its arguments have none)."""
    try:
        args = _dec.decode(call.arguments or "{}")
    except msgspec.DecodeError:
        return None
    query = args.get("query") if isinstance(args, dict) else None
    return query.strip() if isinstance(query, str) and query.strip() else None


def result_of(use: c.ServerToolUse, first: int) -> c.ToolResult:
    """A search's outcome as the function's result (``results_text``)."""
    text = results_text(use, first)
    return c.ToolResult(call_id=use.id, content=[c.Text(text=text)], is_error=use.error is not None)


def results_text(use: c.ServerToolUse, first: int) -> str:
    """A search's hits numbered from ``first`` (numbers run on across the searches of
    a conversation), or why there are none."""
    query = use.input.get("query", "")
    if use.error is not None:
        return _ERRORS.get(use.error, _ERRORS["unavailable"])
    hits = use.hits or []
    if not hits:
        return f"No results for {query!r}."
    lines = [f"Search results for {query!r}:"]
    for n, hit in enumerate(hits, first):
        lines.append(f"\n[{n}] {hit.title or hit.url}\nURL: {hit.url}")
        if hit.page_age:
            lines.append(f"Published: {hit.page_age}")
        if hit.snippet:
            lines.append(hit.snippet)
    lines.append("\nCite these sources by their numbers, like [1].")
    return "\n".join(lines)


_ERRORS = {
    "unavailable": "Web search is unavailable right now. Answer without it, and say so "
    "if the answer needed it.",
    "max_uses_exceeded": "No more web searches are allowed for this answer. Answer with "
    "the results you have.",
    "invalid_tool_input": "The search needs a non-empty string field `query`.",
}


# ---------------------------------------------------------------- citations

_MARK = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")
CITED_TEXT_CHARS = 150


def citations(text: str, sources: list[c.SearchHit], offset: int = 0) -> list[c.Citation]:
    """The ``[n]`` (and ``[n, m]``) references of ``text`` to numbered sources, each
    a citation of that source spanning its marker (``offset``: where ``text`` starts
    in its block). A number no source has is left as text."""
    out: list[c.Citation] = []
    for match in _MARK.finditer(text):
        for number in match.group(1).split(","):
            n = int(number)
            if 1 <= n <= len(sources):
                hit = sources[n - 1]
                out.append(
                    c.Citation(
                        url=hit.url,
                        title=hit.title,
                        cited_text=(hit.snippet or "")[:CITED_TEXT_CHARS] or None,
                        start_index=offset + match.start(),
                        end_index=offset + match.end(),
                    )
                )
    return out
