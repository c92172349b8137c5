"""Anthropic ``Message`` bodies <-> canonical ``Response``, and the block/usage/stop
helpers the stream codec shares, so streamed and non-streamed answers agree.

Usage semantics: Anthropic's ``input_tokens`` excludes cache reads and writes; the
canonical figure includes them. ``usage_in`` adds, ``usage_out`` subtracts.

Client-side stop reason (``final_stop``): ``anthropic_stop`` of the canonical
stop, except that an ``end_turn`` answer carrying tool calls says ``tool_use`` (Chat
and Responses upstreams often say "stop"/"completed" there), and an answer carrying
refusal wording (a canonical ``Refusal`` part, from Chat ``message.refusal`` or a
Responses refusal part) says ``refusal`` with ``stop_details.explanation``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, get_args

import msgspec

from ... import canonical as c
from ... import ids, reasoning_carry
from ...errors import ProxyError
from ...lazy_decoder import LazyDecoder
from .._kit import hosted_code
from .._kit import search_results as sr
from . import code_exec, wire

if TYPE_CHECKING:
    from collections.abc import Iterable

_encoder = msgspec.json.Encoder()
_json = msgspec.json.Decoder()
_message_decoder: LazyDecoder[wire.UpstreamMessage] = LazyDecoder(wire.UpstreamMessage)
_raw_message_decoder: LazyDecoder[wire.RawMessage] = LazyDecoder(wire.RawMessage)
_block_decoder: LazyDecoder[wire.OutputBlock] = LazyDecoder(wire.OutputBlock)
_type_decoder: LazyDecoder[wire.TypeOnly] = LazyDecoder(wire.TypeOnly)

KNOWN_OUTPUT_TYPES = frozenset(cls.__struct_config__.tag for cls in get_args(wire.OutputBlock))


# ----------------------------------------------------------- shared: inbound


def usage_in(u: wire.Usage) -> c.Usage:
    cached = u.cache_read_input_tokens or 0
    creation = u.cache_creation_input_tokens or 0
    by_ttl, tools = u.cache_creation, u.server_tool_use
    return c.Usage(
        input_tokens=(u.input_tokens or 0) + cached + creation,
        output_tokens=u.output_tokens,
        cached_tokens=cached,
        cache_creation_tokens=creation,
        cache_creation_1h_tokens=by_ttl.ephemeral_1h_input_tokens if by_ttl else 0,
        # Web fetches have no price of their own: only searches are billed requests.
        server_tool_requests=tools.web_search_requests if tools else 0,
    )


def merge_usage(u: wire.Usage, new: wire.Usage) -> wire.Usage:
    """``message_delta``'s usage over ``message_start``'s: figures are cumulative, so
    present ones overwrite and absent ones keep message_start's."""
    return wire.Usage(
        input_tokens=new.input_tokens if new.input_tokens is not None else u.input_tokens,
        output_tokens=new.output_tokens,
        cache_creation_input_tokens=(
            new.cache_creation_input_tokens
            if new.cache_creation_input_tokens is not None
            else u.cache_creation_input_tokens
        ),
        cache_read_input_tokens=(
            new.cache_read_input_tokens
            if new.cache_read_input_tokens is not None
            else u.cache_read_input_tokens
        ),
        cache_creation=new.cache_creation if new.cache_creation else u.cache_creation,
        server_tool_use=new.server_tool_use if new.server_tool_use else u.server_tool_use,
    )


def citations_in(citations: Iterable[wire.Citation] | None) -> list[c.Citation] | None:
    """URL citations only: the one kind every protocol can carry."""
    if not citations:
        return None
    out = [
        c.Citation(url=x.url, title=x.title, cited_text=x.cited_text)
        for x in citations
        if x.url is not None
    ]
    return out or None


def text_in(text: str, citations: list[wire.Citation] | None) -> c.Text:
    """A text block; its URL citations span where their cited text is in it, else all
    of it (Anthropic splits the answer so that a cited block is the claim)."""
    cites = citations_in(citations) if citations else None
    return c.Text(text=text, citations=sr.with_spans(text, cites) if cites else None)


def search_result_in(use: c.ServerToolUse, content: Any) -> None:
    """A ``web_search_tool_result``'s content onto its call: the pages, or the error."""
    use.result = content
    if isinstance(content, dict):
        if content.get("type") == "web_search_tool_result_error":
            code = content.get("error_code")
            use.error = code if isinstance(code, str) else "unavailable"
        return
    if not isinstance(content, list):
        return
    use.hits = [
        c.SearchHit(
            url=x["url"],
            title=x.get("title") if isinstance(x.get("title"), str) else None,
            page_age=x.get("page_age") if isinstance(x.get("page_age"), str) else None,
            encrypted_content=(
                x.get("encrypted_content") if isinstance(x.get("encrypted_content"), str) else None
            ),
        )
        for x in content
        if isinstance(x, dict)
        and x.get("type") == "web_search_result"
        and isinstance(x.get("url"), str)
    ]


def reasoning_from_thinking(thinking: str, signature: str) -> c.Reasoning:
    """A thinking block; a signature that is a carrier we packed for this client earlier
    gives back the tokens it holds."""
    carried = reasoning_carry.restore(signature, thinking, False)
    if carried is not None:
        return carried
    return c.Reasoning(text=thinking, signature=signature or None)


def arguments_json(value: object) -> str:
    return _encoder.encode(value).decode()


# ---------------------------------------------------------- shared: outbound


def usage_out(u: c.Usage, searches: int = 0) -> wire.Usage:
    """``searches``: the searches the answer shows, counted when the upstream's usage
    did not count them (Claude Code's "Did N searches" reads this figure)."""
    out = wire.Usage(
        input_tokens=max(0, u.input_tokens - u.cached_tokens - u.cache_creation_tokens),
        output_tokens=u.output_tokens,
        cache_creation_input_tokens=u.cache_creation_tokens,
        cache_read_input_tokens=u.cached_tokens,
    )
    if u.cache_creation_tokens:
        write_1h = min(u.cache_creation_1h_tokens, u.cache_creation_tokens)
        out.cache_creation = wire.CacheCreation(
            ephemeral_5m_input_tokens=u.cache_creation_tokens - write_1h,
            ephemeral_1h_input_tokens=write_1h,
        )
    made = sr.search_requests(u, searches)
    if made:
        out.server_tool_use = wire.ServerToolUsage(web_search_requests=made)
    return out


def citation_out(x: c.Citation, text: str | None = None) -> wire.Citation:
    """A URL citation as a ``web_search_result_location``: its cited text is what it
    covers in ``text`` (the block's) when the upstream gave a span and no quote."""
    cited = x.cited_text
    if not cited and text is not None:
        start, end = sr.span_of(text, x)
        cited = text[start:end]
    return wire.Citation(
        type="web_search_result_location",
        cited_text=cited or "",
        url=x.url,
        title=x.title or x.url,
        encrypted_index=sr.index_placeholder(x),
    )


def search_id(use: c.ServerToolUse) -> str:
    return use.id if use.id.startswith("srvtoolu_") else ids.derive("srvtoolu_", use.id)


def search_result_content(use: c.ServerToolUse) -> Any:
    """A search's ``web_search_tool_result`` content: the error, or the pages with an
    ``encrypted_content`` the client can replay (the upstream's, else a placeholder)."""
    if use.error is not None:
        return {"type": "web_search_tool_result_error", "error_code": use.error}
    if use.hits is None and isinstance(use.result, list):
        return use.result  # an Anthropic upstream's own, undecoded
    out: list[dict[str, Any]] = []
    for h in use.hits or ():
        hit = {
            "type": "web_search_result",
            "url": h.url,
            "title": h.title or h.url,
            "encrypted_content": sr.encrypted_content(h),
        }
        if h.page_age is not None:
            hit["page_age"] = h.page_age
        out.append(hit)
    return out


def search_blocks(
    use: c.ServerToolUse,
) -> tuple[wire.ServerToolUseBlock, wire.WebSearchToolResultBlock]:
    sid = search_id(use)
    return (
        wire.ServerToolUseBlock(id=sid, name="web_search", input={"query": sr.query_of(use)}),
        wire.WebSearchToolResultBlock(tool_use_id=sid, content=search_result_content(use)),
    )


# The tokens an Anthropic client has fields for: a thinking block's signature and a
# redacted_thinking block's data. Any other rides in the signature, packed.
OWN_TOKENS = ("signature", "redacted")


def client_signature(r: c.Reasoning) -> str:
    """The signature an Anthropic client sees for ``r`` ("" for none)."""
    return reasoning_carry.client_token(r, OWN_TOKENS, "signature") or ""


def client_tool_id(call_id: str, upstream_id: str, n: int) -> str:
    """The n-th tool call's id (fallback derived from the message id when unusable,
    minted only then)."""
    return ids.safe_tool_id(call_id, "") or ids.item_id("toolu_", upstream_id, n)


def custom_tool_input(raw: str) -> dict[str, Any]:
    """A freeform (custom) tool call as a JSON object: ``{"input": <text>}``."""
    return {"input": raw}


# stop_reason (the canonical vocabulary is Anthropic's plus content_filter)

_ANTHROPIC_STOPS: frozenset[str] = frozenset(
    {"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"}
)


def stop_from_anthropic(stop_reason: str | None) -> c.StopReason | None:
    if stop_reason is None:
        return None
    if stop_reason in _ANTHROPIC_STOPS:
        return stop_reason  # type: ignore[return-value]
    # "model_context_window_exceeded" and future values: truncation is the closest.
    return "max_tokens" if "exceeded" in stop_reason else "end_turn"


def anthropic_stop(stop: c.StopReason | None) -> str | None:
    if stop == "content_filter":
        return "refusal"
    return stop


def final_stop(
    stop: c.StopReason | None, has_tool: bool, refusal: str | None, explanation: str | None
) -> tuple[str, wire.StopDetails | None]:
    """stop_reason and stop_details for the client (see the module docstring)."""
    out = anthropic_stop(stop) or "end_turn"
    if out == "end_turn" and has_tool:
        out = "tool_use"
    elif refusal is not None and out in ("end_turn", "stop_sequence"):
        out = "refusal"
    if out != "refusal":
        return out, None
    return out, wire.StopDetails(explanation=explanation or refusal or None)


# --------------------------------------------------------- upstream -> canonical


def _decode_message(body: bytes) -> wire.Message:
    try:
        return _message_decoder.decode(body)
    except msgspec.ValidationError:
        pass  # an unknown block type, or a malformed message: look closer
    except (msgspec.DecodeError, ValueError) as e:
        raise ProxyError.bad_gateway(f"upstream returned an invalid Messages body: {e}") from None
    try:
        raw = _raw_message_decoder.decode(body)
    except (msgspec.DecodeError, ValueError) as e:
        raise ProxyError.bad_gateway(f"upstream returned an invalid Messages body: {e}") from None
    blocks: list[wire.OutputBlock] = []
    for i, item in enumerate(raw.content):
        try:
            blocks.append(_block_decoder.decode(item))
        except (msgspec.DecodeError, ValueError) as e:
            try:
                kind = _type_decoder.decode(item).type
            except (msgspec.DecodeError, ValueError):
                kind = ""
            if kind in KNOWN_OUTPUT_TYPES or not kind:
                raise ProxyError.bad_gateway(
                    f"upstream returned an invalid content[{i}]: {e}"
                ) from None
            # a block type this codec does not know: skipped
    return wire.Message(
        id=raw.id,
        model=raw.model,
        content=blocks,
        stop_reason=raw.stop_reason,
        stop_sequence=raw.stop_sequence,
        stop_details=raw.stop_details,
        usage=raw.usage,
    )


def decode_response(body: bytes) -> c.Response:
    msg = _decode_message(body)
    parts: list[c.Part] = []
    servers: dict[str, c.ServerToolUse] = {}
    # Blocks and parts are dispatched on ``type(x)``: a failed ``isinstance`` against a
    # msgspec Struct class costs ~70 ns (its metaclass takes CPython's slow path), this
    # ~15 ns.
    for b in msg.content:
        if type(b) is wire.TextBlock:
            parts.append(text_in(b.text, b.citations) if b.citations else c.Text(text=b.text))
        elif type(b) is wire.ToolUseBlock:
            parts.append(c.ToolCall(id=b.id, name=b.name, arguments=arguments_json(b.input)))
        elif type(b) is wire.ThinkingBlock:
            parts.append(reasoning_from_thinking(b.thinking, b.signature))
        elif type(b) is wire.RedactedThinkingBlock:
            parts.append(c.Reasoning(redacted=b.data))
        elif type(b) is wire.ServerToolUseBlock:
            server = c.ServerToolUse(id=b.id, name=b.name, input=b.input or {})
            servers[b.id] = server
            parts.append(server)
        elif type(b) is wire.WebSearchToolResultBlock:
            found = servers.get(b.tool_use_id)
            if found is None:
                found = c.ServerToolUse(id=b.tool_use_id, name="web_search")
                parts.append(found)
            search_result_in(found, b.content)
        elif code_exec.is_result(b):
            found = servers.get(b.tool_use_id)  # type: ignore[union-attr]
            if found is not None:  # (a result without its call says nothing to run)
                code_exec.result_in(found, b.content)  # type: ignore[union-attr]
    return c.Response(
        id=msg.id,
        model=msg.model,
        content=parts,
        stop_reason=stop_from_anthropic(msg.stop_reason),
        stop_sequence=msg.stop_sequence,
        refusal_explanation=msg.stop_details.explanation if msg.stop_details else None,
        usage=usage_in(msg.usage),
    )


# ----------------------------------------------------------- canonical -> client


def _tool_input(call: c.ToolCall, truncated: bool) -> dict[str, Any]:
    """The call's arguments as ``tool_use.input``. An answer cut off by the token limit
    (``truncated``) may end inside them: then the input is ``{}`` and the ``max_tokens``
    stop tells the client the call is incomplete, as the streamed answer does — a cut
    value (``rm -rf ./build/x`` of ``./build/xyz``) is never handed over as if whole.
    Otherwise arguments that are no JSON object are the upstream's fault."""
    if call.kind == "custom":
        return custom_tool_input(call.arguments)
    if not call.arguments:
        return {}
    try:
        value = _json.decode(call.arguments)
    except (msgspec.DecodeError, ValueError):
        value = None
    if not isinstance(value, dict):
        if truncated:
            return {}
        raise ProxyError.bad_gateway(
            f"upstream tool call {call.name!r} has arguments that are not a JSON object"
        )
    return value


def encode_response(response: c.Response, request: c.Request) -> bytes:
    blocks: list[wire.OutputBlock] = []
    has_text = False
    refusal: str | None = None
    tools = searches = 0
    # A client that offered search gets a search before the text citing it, as its
    # stream does (``search_stream.SearchHold``); without one, the order is kept.
    parts = sr.searches_first(response.content) if request.web_search else response.content
    for p in parts:
        if type(p) is c.Text:
            if not p.text:
                continue  # never an empty text block
            has_text = True
            cites = [citation_out(x, p.text) for x in p.citations] if p.citations else None
            blocks.append(wire.TextBlock(text=p.text, citations=cites))
        elif type(p) is c.ToolCall:
            blocks.append(
                wire.ToolUseBlock(
                    id=client_tool_id(p.id, response.id, tools),
                    name=p.name,
                    input=_tool_input(p, response.stop_reason == "max_tokens"),
                )
            )
            tools += 1
        elif type(p) is c.Refusal:
            if not p.text:
                continue  # never an empty text block
            has_text = True
            refusal = p.text if refusal is None else refusal + p.text
            blocks.append(wire.TextBlock(text=p.text))
        elif type(p) is c.Reasoning:
            if p.redacted is not None:
                blocks.append(wire.RedactedThinkingBlock(data=p.redacted))
            else:
                sig = client_signature(p)
                blocks.append(wire.ThinkingBlock(thinking=p.text, signature=sig))
        elif sr.is_search(p):
            blocks.extend(search_blocks(p))  # type: ignore[arg-type]
            searches += p.error is None  # type: ignore[union-attr]  # a failed one is not billed
        elif hosted_code.is_code(p):
            blocks.extend(code_exec.blocks_out(p))  # type: ignore[arg-type]
        # Other server tools (and request-only parts) have no client shape here: skipped.
    stop, details = final_stop(
        response.stop_reason, tools > 0, refusal, response.refusal_explanation
    )
    if stop == "refusal" and response.refusal_explanation and not has_text:
        blocks.append(wire.TextBlock(text=response.refusal_explanation))
    msg = wire.Message(
        id=ids.derive("msg_", response.id),
        model=response.model or request.model,
        content=blocks,
        stop_reason=stop,
        stop_sequence=response.stop_sequence,
        stop_details=details,
        usage=usage_out(response.usage, searches),
    )
    return _encoder.encode(msg)
