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


def search_in(tools: list[dict[str, Any]], report: TranslationReport) -> c.WebSearch | None:
    """The client's search tool among its ``tools`` (None without one), with the 400
    Google gives for a malformed one; its options without a counterpart reported."""
    for i, tool in enumerate(tools):
        for key, value in tool.items():
            name = camel(key)
            if name in ("googleSearch", "googleSearchRetrieval"):
                return _tool_in(name, value, f"tools[{i}].{_SNAKE[name]}", report)
    return None


_SNAKE = {"googleSearch": "google_search", "googleSearchRetrieval": "google_search_retrieval"}


def _tool_in(name: str, value: Any, path: str, report: TranslationReport) -> c.WebSearch:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        kind = "GoogleSearch" if name == "googleSearch" else "GoogleSearchRetrieval"
        raise invalid(
            f"Invalid value at '{path}' (type.googleapis.com/google.ai.generativelanguage."
            f"v1beta.Tool.{kind}), {value!r}",
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
