"""What every codec shares about the hosted web search: which hosted tool is the
search (its options are in ``Request.web_search``, so its raw form is written only to
an upstream of its own protocol), the report of the options an upstream cannot
express, and a replayed search as text a model of another provider can read."""

from __future__ import annotations

from typing import Any

from ... import canonical as c
from ...errors import ProxyError, TranslationReport

# The canonical name of the search tool (``ServerToolUse.name``, the name the
# Anthropic tool must have, a tool choice that names the search).
SEARCH = "web_search"

# Each protocol's hosted search tool: Anthropic ``web_search_20250305`` and later
# versions, Responses ``web_search``/``web_search_preview`` and their dated forms,
# Gemini ``googleSearch`` and its legacy ``googleSearchRetrieval`` (either case).
_SEARCH_TYPES: dict[str, tuple[str, ...]] = {
    "anthropic_messages": ("web_search_",),
    "openai_responses": ("web_search",),
    "gemini_generate_content": (
        "googleSearch",
        "google_search",
    ),
}


def is_search_tool(h: c.HostedTool) -> bool:
    """``h`` is its protocol's hosted web search (mapped through ``web_search``)."""
    prefixes = _SEARCH_TYPES.get(h.protocol)
    return prefixes is not None and h.type.startswith(prefixes)


# The canonical options, by the name a report gives them.
_OPTIONS = ("max_uses", "allowed_domains", "blocked_domains", "user_location", "context_size")


def report_unmapped(ws: c.WebSearch, mapped: tuple[str, ...], report: TranslationReport) -> None:
    """Report each option the client set that the upstream's search cannot express."""
    for name in _OPTIONS:
        if name not in mapped and getattr(ws, name) is not None:
            report.drop(f"tools.web_search.{name}")


_LOCATION_FIELDS = ("city", "region", "country", "timezone")


def location_in(raw: Any, path: str) -> dict[str, Any] | None:
    """An approximate user location as the canonical dict (None when it says nothing);
    400 for a location that is not an object of strings."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ProxyError.invalid(f"{path}: expected an object", path)
    kind = raw.get("type", "approximate")
    if kind != "approximate":
        raise ProxyError.invalid(f"{path}.type: Input should be 'approximate'", f"{path}.type")
    out: dict[str, Any] = {"type": "approximate"}
    for key, value in raw.items():
        if key == "type":
            continue
        if key not in _LOCATION_FIELDS:
            raise ProxyError.invalid(
                f"{path}.{key}: Extra inputs are not permitted", f"{path}.{key}"
            )
        if value is None:
            continue
        if not isinstance(value, str):
            raise ProxyError.invalid(
                f"{path}.{key}: Input should be a valid string", f"{path}.{key}"
            )
        out[key] = value
    return out if len(out) > 1 else None


def location_out(loc: dict[str, Any]) -> dict[str, Any]:
    """The canonical location as Anthropic's and Responses' ``user_location``."""
    return {"type": "approximate", **{k: loc[k] for k in _LOCATION_FIELDS if k in loc}}


def domains_in(raw: Any, path: str) -> list[str] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(d, str) for d in raw):
        raise ProxyError.invalid(f"{path}: Input should be a valid list of strings", path)
    return list(raw)


def as_text(use: c.ServerToolUse) -> str:
    """A replayed search (its query and what it found) as assistant text, for an
    upstream that cannot take the search itself in history: the model keeps what it
    learned, and nothing in it is an id or blob that upstream would have to know."""
    query = use.input.get("query")
    head = f"[{use.name}" + (f": {query}]" if isinstance(query, str) and query else "]")
    lines = [head]
    if use.error:
        lines.append(f"(the search failed: {use.error})")
    for hit in use.hits or ():
        line = f"- {hit.title} <{hit.url}>" if hit.title else f"- <{hit.url}>"
        if hit.page_age:
            line += f" ({hit.page_age})"
        lines.append(line)
        if hit.snippet:
            lines.append(f"  {hit.snippet}")
    return "\n".join(lines)
