"""Web search results between protocols: the placeholders a client replays, citation
spans, and the counts every codec shares.

Canonical contract (what decoders produce and encoders read):
- a search is a ``ServerToolUse(name="web_search", input={"query": q}, hits=[...])``
  (``hits`` None when the upstream named no pages; ``error`` an Anthropic error code);
  in a stream one ``ServerTool`` event, whole, between blocks;
- a ``Citation``'s ``start_index``/``end_index`` are *character* (code point) offsets
  into the text of the ``Text`` part (stream: the block) that carries it, ``cited_text``
  the answer's text it covers when the upstream said which (Anthropic's is the page's
  quote); both None: the citation covers the whole part.

Placeholders. Anthropic clients replay ``encrypted_content`` (per result) and
``encrypted_index`` (per citation) verbatim; an upstream that is not Anthropic gave none,
so the client gets ``proxai.ws1.<base64url JSON {"u": url, "t": title, "s": snippet}>``
and ``proxai.wsi1.<base64url JSON {"u": url}>``. The request side recognises them with
``is_placeholder`` and reads back the hit with ``hit_from_placeholder`` (an Anthropic
upstream must not receive them: it would reject a token it did not mint).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import msgspec

from ... import canonical as c

if TYPE_CHECKING:
    from collections.abc import Iterable

CONTENT_PREFIX = "proxai.ws1."
INDEX_PREFIX = "proxai.wsi1."
_MAX_SNIPPET = 2000  # a placeholder carries the page's text only this far

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(dict[str, Any]).decode


def _pack(prefix: str, value: dict[str, Any]) -> str:
    return prefix + base64.urlsafe_b64encode(_encode(value)).decode().rstrip("=")


def _unpack(prefix: str, value: str | None) -> dict[str, Any] | None:
    if not value or not value.startswith(prefix):
        return None
    body = value[len(prefix) :]
    try:
        return _decode(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, msgspec.DecodeError):
        return None


def is_placeholder(value: str | None) -> bool:
    """Whether an ``encrypted_content``/``encrypted_index`` is one the proxy minted."""
    return bool(value) and (
        value.startswith(CONTENT_PREFIX) or value.startswith(INDEX_PREFIX)  # type: ignore[union-attr]
    )


def content_placeholder(hit: c.SearchHit) -> str:
    packed: dict[str, Any] = {"u": hit.url}
    if hit.title:
        packed["t"] = hit.title
    if hit.snippet:
        packed["s"] = hit.snippet[:_MAX_SNIPPET]
    return _pack(CONTENT_PREFIX, packed)


def hit_from_placeholder(value: str | None) -> c.SearchHit | None:
    """The hit a ``content_placeholder`` holds (None: not one of ours, or damaged)."""
    got = _unpack(CONTENT_PREFIX, value)
    if got is None or not isinstance(got.get("u"), str):
        return None
    title, snippet = got.get("t"), got.get("s")
    return c.SearchHit(
        url=got["u"],
        title=title if isinstance(title, str) else None,
        snippet=snippet if isinstance(snippet, str) else None,
    )


def index_placeholder(cite: c.Citation) -> str:
    return _pack(INDEX_PREFIX, {"u": cite.url})


def encrypted_content(hit: c.SearchHit) -> str:
    """What an Anthropic client gets for a hit: the upstream's own token, else ours."""
    return hit.encrypted_content or content_placeholder(hit)


# ------------------------------------------------------------------ searches


def query_of(use: c.ServerToolUse) -> str:
    q = use.input.get("query")
    return q if isinstance(q, str) else ""


def is_search(part: object) -> bool:
    return type(part) is c.ServerToolUse and part.name == "web_search"


def searches(parts: Iterable[object]) -> list[c.ServerToolUse]:
    return [p for p in parts if type(p) is c.ServerToolUse and p.name == "web_search"]


def search_requests(usage: c.Usage, made: int) -> int:
    """The searches an answer reports: the upstream's own count, else the ones it shows."""
    return usage.server_tool_requests or made


def hits_of(uses: Iterable[c.ServerToolUse]) -> list[c.SearchHit]:
    """Every page the searches found, each URL once, in order."""
    seen: dict[str, c.SearchHit] = {}
    for use in uses:
        for hit in use.hits or ():
            seen.setdefault(hit.url, hit)
    return list(seen.values())


def searches_first(parts: list[c.Part]) -> list[c.Part]:
    """``parts`` with searches that came after the text citing them (a Gemini answer
    folded from its stream: grounding last) moved before the first cited text, where
    Anthropic clients expect them; any other order is kept."""
    first_cited = next((i for i, p in enumerate(parts) if type(p) is c.Text and p.citations), None)
    if first_cited is None or not any(is_search(p) for p in parts[first_cited:]):
        return parts
    late = [p for p in parts[first_cited:] if is_search(p)]
    rest = [p for p in parts[first_cited:] if not is_search(p)]
    return [*parts[:first_cited], *late, *rest]


# ------------------------------------------------------------------- spans


def span_of(text: str, cite: c.Citation) -> tuple[int, int]:
    """A citation's character span in ``text``: its own, else where its cited text
    occurs, else the whole text."""
    n = len(text)
    if cite.start_index is not None and cite.end_index is not None:
        start = min(max(cite.start_index, 0), n)
        return start, min(max(cite.end_index, start), n)
    if cite.cited_text:
        at = text.find(cite.cited_text)
        if at >= 0:
            return at, at + len(cite.cited_text)
    return 0, n


def with_spans(text: str, cites: Iterable[c.Citation]) -> list[c.Citation]:
    """The citations with their spans in ``text`` made explicit (``span_of``) and
    ``cited_text`` the text they cover when the upstream gave none."""
    out: list[c.Citation] = []
    for x in cites:
        start, end = span_of(text, x)
        cited = x.cited_text if x.cited_text else text[start:end]
        out.append(
            c.Citation(url=x.url, title=x.title, cited_text=cited, start_index=start, end_index=end)
        )
    return out


def byte_offset(text: str, index: int) -> int:
    """The UTF-8 byte offset of character ``index`` of ``text`` (Gemini's segments)."""
    return len(text[:index].encode())


def char_offset(data: bytes, index: int) -> int:
    """The character offset of byte ``index`` of UTF-8 ``data`` (a cut inside a
    character counts the characters before it)."""
    return len(data[:index].decode(errors="ignore"))


_MARKS = (CONTENT_PREFIX.encode(), INDEX_PREFIX.encode())


def holds_placeholder(body: bytes) -> bool:
    """A request body carries one of the placeholders somewhere (a byte search: such a
    body is translated, never relayed, so its provider never sees a token it did not
    mint)."""
    return any(mark in body for mark in _MARKS)
