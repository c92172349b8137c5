"""Anthropic's hosted web search on the request side: the client's ``web_search_*``
tool as the canonical ``WebSearch`` (checked as Anthropic checks it), the tool written
for an Anthropic upstream from another client's search, and a replayed search (the
``server_tool_use`` + ``web_search_tool_result`` pair) in and out."""

from __future__ import annotations

from typing import Any

from ... import canonical as c
from ...errors import ProxyError, TranslationReport
from .._kit import hosted_search
from .._kit.hosted_search import SEARCH
from .._kit.search_results import is_placeholder
from . import wire

# The tool version written for another client's search (every current model has it).
TOOL_TYPE = "web_search_20250305"
_MAPPED = ("max_uses", "allowed_domains", "blocked_domains", "user_location")


def search_in(hosted: list[c.HostedTool], report: TranslationReport) -> c.WebSearch | None:
    """The client's search tool among its hosted tools (None without one), with the
    400 Anthropic gives for a malformed option; the tool's fields that only Anthropic
    has, or that we do not know (later versions add some), are reported."""
    for i, h in enumerate(hosted):
        if hosted_search.is_search_tool(h):
            return _tool_in(h.raw, f"tools.{i}", report)
    return None


def _tool_in(raw: dict[str, Any], path: str, report: TranslationReport) -> c.WebSearch:
    for key in raw:
        if key not in _MAPPED and key not in ("type", "name"):
            report.drop(f"tools.web_search.{key}")  # cache_control, defer_loading, ...
    if raw.get("name") != SEARCH:
        raise ProxyError.invalid(
            f"{path}.{raw['type']}.name: Input should be 'web_search'", f"{path}.name"
        )
    max_uses = raw.get("max_uses")
    if max_uses is not None and (type(max_uses) is not int or max_uses < 1):
        raise ProxyError.invalid(
            f"{path}.{raw['type']}.max_uses: Input should be greater than 0", f"{path}.max_uses"
        )
    allowed = hosted_search.domains_in(raw.get("allowed_domains"), f"{path}.allowed_domains")
    blocked = hosted_search.domains_in(raw.get("blocked_domains"), f"{path}.blocked_domains")
    if allowed is not None and blocked is not None:
        raise ProxyError.invalid(
            f"{path}: Cannot specify both allowed_domains and blocked_domains", path
        )
    return c.WebSearch(
        max_uses=max_uses,
        allowed_domains=allowed,
        blocked_domains=blocked,
        user_location=hosted_search.location_in(raw.get("user_location"), f"{path}.user_location"),
    )


def tool_out(ws: c.WebSearch, report: TranslationReport) -> dict[str, Any]:
    """Another client's search as Anthropic's tool; what it cannot say is reported."""
    out: dict[str, Any] = {"type": TOOL_TYPE, "name": SEARCH}
    if ws.max_uses is not None:
        out["max_uses"] = ws.max_uses
    if ws.allowed_domains:
        out["allowed_domains"] = ws.allowed_domains
    if ws.blocked_domains:
        if ws.allowed_domains:
            report.drop("tools.web_search.blocked_domains")  # Anthropic takes one of the two
        else:
            out["blocked_domains"] = ws.blocked_domains
    if ws.user_location:
        out["user_location"] = hosted_search.location_out(ws.user_location)
    hosted_search.report_unmapped(ws, _MAPPED, report)
    return out


# ------------------------------------------------------------------ replayed searches


def replay_in(
    use: wire.ServerToolUseBlock, result: wire.WebSearchToolResultBlock | None
) -> c.ServerToolUse:
    """A replayed ``server_tool_use`` (and the ``web_search_tool_result`` that answered
    it) as one canonical search: its query, its hits (or error), the raw pair kept for
    an Anthropic upstream."""
    out = c.ServerToolUse(id=use.id, name=use.name, input=dict(use.input or {}))
    if result is None:
        return out
    out.result = result.content
    content = result.content
    if isinstance(content, dict):  # web_search_tool_result_error
        code = content.get("error_code")
        out.error = code if isinstance(code, str) else "unavailable"
    elif isinstance(content, list):
        out.hits = [
            c.SearchHit(
                url=r["url"],
                title=r.get("title"),
                page_age=r.get("page_age"),
                encrypted_content=r.get("encrypted_content"),
            )
            for r in content
            if isinstance(r, dict) and isinstance(r.get("url"), str)
        ]
    return out


def replayable(use: c.ServerToolUse) -> bool:
    """The search can go back to Anthropic as the blocks it came in: it was Anthropic's
    own (an id of Anthropic's form, a raw result) and holds none of the proxy's
    placeholders, which Anthropic would refuse as encrypted content."""
    if use.name != SEARCH or not use.id.startswith("srvtoolu_") or use.result is None:
        return False
    if isinstance(use.result, list):
        return not any(
            isinstance(r, dict) and is_placeholder(r.get("encrypted_content")) for r in use.result
        )
    return isinstance(use.result, dict)


def replay_out(use: c.ServerToolUse) -> list[wire.InputBlock]:
    """A replayed search for an Anthropic upstream: the two blocks it came in when they
    can go back (``replayable``), else its query and findings as text."""
    if not replayable(use):
        return [wire.TextBlock(text=hosted_search.as_text(use))]
    return [
        wire.ServerToolUseBlock(id=use.id, name=use.name, input=use.input),
        wire.WebSearchToolResultBlock(tool_use_id=use.id, content=use.result),
    ]
