"""The Responses hosted web search on the request side: the client's ``web_search`` /
``web_search_preview`` tool as the canonical ``WebSearch`` (checked as OpenAI checks
it), the tool and tool choice written for a Responses upstream from another client's
search, and a replayed ``web_search_call`` item as the canonical search."""

from __future__ import annotations

from typing import Any

import msgspec

from ... import canonical as c
from ...errors import ProxyError, TranslationReport
from .._kit import hosted_search
from .._kit.hosted_search import SEARCH

_FIELDS = frozenset(
    {"type", "filters", "user_location", "search_context_size", "external_web_access"}
)
_SIZES = ("low", "medium", "high")
_MAPPED = ("allowed_domains", "user_location", "context_size")


def _invalid(message: str, param: str) -> ProxyError:
    return ProxyError.invalid(message, param=param)


def search_in(hosted: list[c.HostedTool], report: TranslationReport) -> c.WebSearch | None:
    """The client's search tool among its hosted tools (None without one), with the
    400 OpenAI gives for a malformed option; an option we do not know (the API adds
    them) is reported, as one without a counterpart is."""
    for i, h in enumerate(hosted):
        if hosted_search.is_search_tool(h):
            return _tool_in(h.raw, f"tools[{i}]", report)
    return None


def _tool_in(raw: dict[str, Any], path: str, report: TranslationReport) -> c.WebSearch:
    for key in raw:
        if key not in _FIELDS:
            report.drop(f"tools.web_search.{key}")
    if raw.get("external_web_access") is False:  # cached pages only: no counterpart
        report.drop("tools.web_search.external_web_access")
    size = raw.get("search_context_size")
    if size is not None and size not in _SIZES:
        raise _invalid(
            f"Invalid value: '{size}'. Supported values are: 'low', 'medium', and 'high'.",
            f"{path}.search_context_size",
        )
    allowed = None
    filters = raw.get("filters")
    if filters is not None:
        if str(raw["type"]).startswith("web_search_preview"):
            raise _invalid(f"Unknown parameter: '{path}.filters'.", f"{path}.filters")
        if not isinstance(filters, dict):
            raise _invalid(
                f"Invalid type for '{path}.filters': expected an object.", f"{path}.filters"
            )
        for key in filters:
            if key != "allowed_domains":
                raise _invalid(
                    f"Unknown parameter: '{path}.filters.{key}'.", f"{path}.filters.{key}"
                )
        allowed = hosted_search.domains_in(
            filters.get("allowed_domains"), f"{path}.filters.allowed_domains"
        )
    return c.WebSearch(
        allowed_domains=allowed,
        user_location=hosted_search.location_in(raw.get("user_location"), f"{path}.user_location"),
        context_size=size,
    )


def tool_out(ws: c.WebSearch, report: TranslationReport) -> dict[str, Any]:
    """Another client's search as the Responses tool; what it cannot say is reported."""
    out: dict[str, Any] = {"type": SEARCH}
    if ws.allowed_domains:
        out["filters"] = {"allowed_domains": ws.allowed_domains}
    if ws.user_location:
        out["user_location"] = hosted_search.location_out(ws.user_location)
    if ws.context_size is not None:
        out["search_context_size"] = ws.context_size
    hosted_search.report_unmapped(ws, _MAPPED, report)
    return out


def is_search_choice(kind: str) -> bool:
    """A hosted tool choice (``{"type": ...}``) that names the search."""
    return kind.startswith(SEARCH)


# ------------------------------------------------------------------ replayed searches


class CallItem(msgspec.Struct, tag_field="type", tag="web_search_call", gc=False):
    """A replayed ``web_search_call`` input item (its id is the provider's own)."""

    id: str = ""
    action: dict[str, Any] | None = None
    status: str | None = None


def replay_in(item: CallItem) -> c.ServerToolUse:
    """The item as the canonical search: its action (the query) as the input, the
    sources the action names as its hits."""
    action = dict(item.action or {})
    sources = action.pop("sources", None)
    hits = [
        c.SearchHit(url=s["url"], title=s.get("title"))
        for s in sources or ()
        if isinstance(s, dict) and isinstance(s.get("url"), str)
    ]
    return c.ServerToolUse(
        id=item.id,
        name=SEARCH,
        input=action,
        hits=hits or None,
        error="unavailable" if item.status == "failed" else None,
    )


def own_call(use: c.ServerToolUse) -> bool:
    """The search was a Responses ``web_search_call`` (an id of OpenAI's form): it goes
    back as the item, which the API takes without having stored it (Codex replays them
    with ``store: false``). Another provider's search goes as text."""
    return use.id.startswith("ws_")


def call_out(use: c.ServerToolUse) -> dict[str, Any]:
    action: dict[str, Any] = {"type": "search", **use.input}
    if use.hits:
        action["sources"] = [{"type": "url", "url": h.url} for h in use.hits]
    return {
        "type": "web_search_call",
        "id": use.id,
        "status": "failed" if use.error else "completed",
        "action": action,
    }
