"""Gemini's Google Search grounding on the request side: the client's ``googleSearch``
tool (or the legacy ``googleSearchRetrieval``, taken as a search too: the models that
had it are retired) as the canonical ``WebSearch``, checked as Google checks it, and
the tool written for a Gemini upstream from another client's search."""

from __future__ import annotations

from typing import Any

from ... import canonical as c
from ...errors import TranslationReport
from .._kit import hosted_search
from .validate import _unknown, camel, invalid

# The Gemini API's search takes no option the others have: ``excludeDomains`` exists
# on Vertex AI only (the Gemini API refuses it), so nothing is mapped outward.
_MAPPED: tuple[str, ...] = ()
_SEARCH_FIELDS = frozenset(
    {"timeRangeFilter", "excludeDomains", "blockingConfidence", "searchTypes"}
)
_RETRIEVAL_FIELDS = frozenset({"dynamicRetrievalConfig"})


def search_in(hosted: list[c.HostedTool], report: TranslationReport) -> c.WebSearch | None:
    """The client's search tool among its hosted tools (None without one), with the
    400 Google gives for a malformed one; its options without a counterpart reported."""
    for h in hosted:
        if hosted_search.is_search_tool(h):
            return _tool_in(h.type, h.raw[h.type], report)
    return None


def _tool_in(key: str, value: Any, report: TranslationReport) -> c.WebSearch:
    name = camel(key)
    path = f"tools[0].{'google_search' if name == 'googleSearch' else 'google_search_retrieval'}"
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise invalid(
            f"Invalid value at '{path}' (type.googleapis.com/google.ai.generativelanguage."
            f"v1beta.{'GoogleSearch' if name == 'googleSearch' else 'GoogleSearchRetrieval'}), "
            f"{value!r}",
            path,
        )
    fields = _SEARCH_FIELDS if name == "googleSearch" else _RETRIEVAL_FIELDS
    out = c.WebSearch()
    for k, v in value.items():
        field = camel(k)
        if field not in fields:
            raise _unknown(k, path)
        if field == "excludeDomains":
            out.blocked_domains = hosted_search.domains_in(v, f"{path}.exclude_domains")
        else:
            report.drop(f"tools.{name}.{field}")  # no counterpart elsewhere
    return out


def tool_out(ws: c.WebSearch, report: TranslationReport) -> dict[str, Any]:
    """Another client's search as Gemini's tool; its options are reported."""
    hosted_search.report_unmapped(ws, _MAPPED, report)
    return {"googleSearch": {}}
