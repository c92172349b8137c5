"""Google Search grounding (``candidate.groundingMetadata``) <-> canonical searches and
citations.

Upstream: each ``webSearchQueries`` entry is one search (``ServerToolUse``); Gemini
does not say which query found which page, so the first search holds every
``groundingChunks[].web`` page and keeps the raw metadata (``result``). Each
``groundingSupports`` entry cites its chunks over its segment, whose offsets are UTF-8
*byte* offsets into the answer's text (its text parts joined, thoughts left out): they
become character spans in the canonical text part that holds them.

Client: the searches' queries and pages (and any page a citation names that no search
listed) become ``webSearchQueries`` and ``groundingChunks``; each citation a support
whose segment is the cited span in bytes, its chunk the cited page (citations of the
same span share one support); ``searchEntryPoint`` a small static rendering of the
queries (Google's is a styled search chip; clients show it as HTML).

Billing: Gemini 3 models bill grounding per search query and Gemini 2 per grounded
prompt; ``server_tool_requests`` counts queries (a grounded answer without queries: 1).
"""

from __future__ import annotations

import html
from typing import Any

from ... import canonical as c
from .._kit import search_results as sr


def search_count(meta: dict[str, Any] | None) -> int:
    if not meta:
        return 0
    queries = meta.get("webSearchQueries")
    n = len(queries) if isinstance(queries, list) else 0
    return n or (1 if meta.get("groundingChunks") else 0)


def _chunks(meta: dict[str, Any]) -> list[c.SearchHit | None]:
    out: list[c.SearchHit | None] = []
    chunks = meta.get("groundingChunks")
    for ch in chunks if isinstance(chunks, list) else ():
        web = ch.get("web") if isinstance(ch, dict) else None
        uri = web.get("uri") if isinstance(web, dict) else None
        if isinstance(uri, str):
            title = web.get("title")  # type: ignore[union-attr]
            out.append(c.SearchHit(url=uri, title=title if isinstance(title, str) else None))
        else:
            out.append(None)  # (a retrieved-context chunk: no page)
    return out


def searches_in(meta: dict[str, Any] | None, response_id: str) -> list[c.ServerToolUse]:
    if not meta:
        return []
    queries = meta.get("webSearchQueries")
    names = [q for q in queries if isinstance(q, str)] if isinstance(queries, list) else []
    hits = [h for h in _chunks(meta) if h is not None]
    if not names and hits:
        names = [""]
    base = response_id or "gemini"
    return [
        c.ServerToolUse(
            id=f"{base}_search_{n}",
            name="web_search",
            input={"query": q},
            hits=hits if n == 0 else [],
            result=meta if n == 0 else None,
        )
        for n, q in enumerate(names)
    ]


def citations_in(meta: dict[str, Any] | None, texts: list[str]) -> list[list[c.Citation]]:
    """The citations of each of ``texts`` (the answer's text parts in order)."""
    out: list[list[c.Citation]] = [[] for _ in texts]
    supports = meta.get("groundingSupports") if meta else None
    if not isinstance(supports, list) or not texts:
        return out
    chunks = _chunks(meta)  # type: ignore[arg-type]
    encoded = [t.encode() for t in texts]
    bases: list[int] = []
    total = 0
    for b in encoded:
        bases.append(total)
        total += len(b)
    for s in supports:
        seg = s.get("segment") if isinstance(s, dict) else None
        indices = s.get("groundingChunkIndices") if isinstance(s, dict) else None
        if not isinstance(seg, dict) or not isinstance(indices, list):
            continue
        start, end = seg.get("startIndex", 0), seg.get("endIndex")
        if not isinstance(start, int) or not isinstance(end, int) or end < start:
            continue
        part = max((i for i, b in enumerate(bases) if b <= start), default=0)
        data, base = encoded[part], bases[part]
        first = sr.char_offset(data, start - base)
        last = sr.char_offset(data, min(end - base, len(data)))
        for k in indices:
            hit = chunks[k] if isinstance(k, int) and 0 <= k < len(chunks) else None
            if hit is not None:
                out[part].append(
                    c.Citation(
                        url=hit.url,
                        title=hit.title,
                        cited_text=texts[part][first:last],
                        start_index=first,
                        end_index=last,
                    )
                )
    return out


def grounding_out(
    uses: list[c.ServerToolUse], texts: list[tuple[str, list[c.Citation] | None]]
) -> dict[str, Any] | None:
    """``groundingMetadata`` for the searches and the cited text parts (in order)."""
    searches = [u for u in uses if sr.is_search(u)]
    if not searches and not any(cites for _, cites in texts):
        return None
    pages = sr.hits_of(searches)
    where = {h.url: i for i, h in enumerate(pages)}
    supports: dict[tuple[int, int], dict[str, Any]] = {}
    base = 0
    for text, cites in texts:
        for x in cites or ():
            k = where.get(x.url)
            if k is None:
                k = where[x.url] = len(pages)
                pages.append(c.SearchHit(url=x.url, title=x.title))
            first, last = sr.span_of(text, x)
            key = (base + sr.byte_offset(text, first), base + sr.byte_offset(text, last))
            got = supports.get(key)
            if got is None:
                segment = {"startIndex": key[0], "endIndex": key[1], "text": text[first:last]}
                supports[key] = {"segment": segment, "groundingChunkIndices": [k]}
            elif k not in got["groundingChunkIndices"]:
                got["groundingChunkIndices"].append(k)
        base += len(text.encode())
    queries = [sr.query_of(u) for u in searches if sr.query_of(u)]
    meta: dict[str, Any] = {
        "webSearchQueries": queries,
        "groundingChunks": [{"web": {"uri": h.url, "title": h.title or h.url}} for h in pages],
        "groundingSupports": list(supports.values()),
    }
    if queries:
        chips = "".join(f'<a class="chip">{html.escape(q)}</a>' for q in queries)
        meta["searchEntryPoint"] = {"renderedContent": f'<div class="container">{chips}</div>'}
    return meta
