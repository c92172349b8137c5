"""Responses response bodies: upstream JSON -> canonical, canonical -> client JSON.

The item builders here are shared with the stream encoder, so a streamed answer's
items and final snapshot are the same objects a non-streamed answer carries.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import msgspec
from msgspec import Raw

from ... import canonical as c
from ... import ids, reasoning_carry
from ...errors import ProxyError
from ...lazy_decoder import LazyDecoder
from .._kit import hosted_code
from .._kit import search_results as sr
from . import code_run
from . import wire as w

_up_response: LazyDecoder[w.UpResponse] = LazyDecoder(w.UpResponse)
_up_response_typed: LazyDecoder[w.UpResponseTyped] = LazyDecoder(w.UpResponseTyped)
_up_item: LazyDecoder[w.UpItem] = LazyDecoder(w.UpItem)
_up_head: LazyDecoder[w.UpTypeHead] = LazyDecoder(w.UpTypeHead)


# ===================================================================== upstream -> canonical


def error_status(code: str | int | None, type_: str | None, default: int) -> int:
    """The HTTP status an upstream error code/type implies."""
    text = f"{code or ''} {type_ or ''}"
    if "rate_limit" in text:
        return 429
    if "overloaded" in text or "slow_down" in text:
        return 529
    if "server_error" in text:
        return 500
    if "invalid_request" in text:
        return 400
    return default


def decode_up_item(raw: Raw) -> w.UpItem | None:
    """One upstream output item; None for item types we do not carry."""
    try:
        item: w.UpItem = _up_item.decode(raw)
    except msgspec.ValidationError as e:
        try:
            kind = _up_head.decode(raw).type
        except msgspec.ValidationError:
            kind = None
        if kind is not None and kind not in w.UP_ITEM_TYPES:
            return None
        raise ProxyError.bad_gateway(f"upstream sent a malformed output item: {e}") from None
    return item


def citations_in(annotations: list[w.UpAnnotation] | None) -> list[c.Citation]:
    return [
        c.Citation(url=a.url, title=a.title, start_index=a.start_index, end_index=a.end_index)
        for a in annotations or ()
        if a.type == "url_citation" and a.url
    ]


def reasoning_in(
    text: str, summary: bool, encrypted: str | None, item_id: str | None
) -> c.Reasoning:
    """A Responses reasoning item as a canonical part; an ``encrypted_content`` that is
    a carrier we packed for this client earlier gives back the tokens it holds."""
    carried = reasoning_carry.restore(encrypted, text, summary, item_id)
    if carried is not None:
        return carried
    return c.Reasoning(text=text, summary=summary, encrypted_content=encrypted, item_id=item_id)


def usage_in(u: w.UpUsage | None, searches: int = 0) -> c.Usage:
    """``searches``: the answer's ``web_search_call`` items, each a billed tool call
    that the usage block does not count."""
    if u is None:
        return c.Usage(server_tool_requests=searches)
    inp, out = u.input_tokens_details, u.output_tokens_details
    return c.Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cached_tokens=(inp.cached_tokens or 0) if inp else 0,
        cache_creation_tokens=(inp.cache_write_tokens or 0) if inp else 0,
        reasoning_tokens=(out.reasoning_tokens or 0) if out else 0,
        server_tool_requests=searches,
    )


_UNFINISHED = frozenset({"cancelled", "queued", "in_progress"})


def decode_response(body: bytes) -> c.Response:
    r: w.UpResponse
    items: Iterable[w.UpItem | None]
    try:
        # One pass when every output item is of a type we carry (the usual answer).
        r = typed = _up_response_typed.decode(body)
        items = typed.output or ()
    except msgspec.DecodeError:  # ValidationError is a DecodeError
        # An item type we skip, or a malformed answer: the items one by one, each
        # decoded only when the loop reaches it (errors keep their order).
        try:
            r = _up_response.decode(body)
        except (msgspec.ValidationError, msgspec.DecodeError) as e:
            raise ProxyError.bad_gateway(
                f"upstream answer is not a Responses object: {e}"
            ) from None
        items = (decode_up_item(raw) for raw in r.output or ())
    if r.object != "response" or not r.id or (r.output is None and r.status is None):
        # Some other JSON with a 2xx (a list, a misrouted path's page): not an answer.
        raise ProxyError.bad_gateway(
            "upstream answer is not a Responses object (no id, status or output)"
        )
    if r.status in _UNFINISHED:
        # RS-19: no stop reason exists for these; passing the answer on would let an
        # encoder give it a normal one, and a cut-short answer would look complete.
        raise ProxyError.bad_gateway(
            f"upstream response has status {r.status!r}: it is not a finished answer"
        )
    explanation = refused_prompt(r.status, r.error)
    if r.status == "failed" and r.error is not None and explanation is None:
        raise ProxyError(
            error_status(r.error.code, r.error.type, 502),
            r.error.message or "the upstream response failed",
        )
    content: list[c.Part] = []
    has_tool_calls = has_refusal = False
    # Items are dispatched on ``type(item)``: a failed ``isinstance`` against a msgspec
    # Struct class costs ~70 ns (its metaclass takes CPython's slow path), this ~15 ns.
    for item in items:
        if type(item) is w.UpMessage:
            for part in item.content:
                if part.type == "output_text":
                    cites = citations_in(part.annotations) if part.annotations else None
                    content.append(c.Text(text=part.text, citations=cites or None))
                elif part.type == "refusal":
                    has_refusal = True
                    content.append(c.Refusal(text=part.refusal))
        elif type(item) is w.UpReasoning:
            if item.summary:
                text, summary = "\n\n".join(p.text for p in item.summary), True
            elif item.content:
                text, summary = "\n\n".join(p.text for p in item.content), False
            else:
                text, summary = "", True
            content.append(reasoning_in(text, summary, item.encrypted_content, item.id))
        elif type(item) is w.UpFunctionCall:
            has_tool_calls = True
            content.append(
                c.ToolCall(
                    id=_call_id(item), name=item.name, arguments=item.arguments, item_id=item.id
                )
            )
        elif type(item) is w.UpCustomToolCall:
            has_tool_calls = True
            content.append(
                c.ToolCall(
                    id=_call_id(item),
                    name=item.name,
                    arguments=item.input,
                    kind="custom",
                    item_id=item.id,
                )
            )
        elif type(item) is w.UpWebSearchCall:
            content.append(search_in(item))
        elif type(item) is w.UpCodeInterpreterCall:
            content.append(code_run.use_in(item))
    reason = r.incomplete_details.reason if r.incomplete_details else None
    return c.Response(
        id=r.id,
        model=r.model,
        content=content,
        stop_reason=stop_from_responses(r.status, reason, has_tool_calls, has_refusal),
        refusal_explanation=explanation,
        usage=usage_in(r.usage, len(sr.searches(content))),  # (code runs are billed apart)
        created=int(r.created_at),
    )


def refused_prompt(status: str | None, error: w.UpError | None) -> str | None:
    """A ``failed`` answer whose error is ``invalid_prompt`` is a prompt the model will
    not answer: a refusal (RS-15 read back, as ``refusal_error`` writes it, and as
    OpenAI's own policy checks answer), its message the explanation; None otherwise."""
    if status != "failed" or error is None or error.code != REFUSAL_ERROR_CODE:
        return None
    return error.message or ""


def _call_id(item: w.UpFunctionCall | w.UpCustomToolCall) -> str:
    call_id = item.call_id or item.id
    if not call_id or not item.name:
        raise ProxyError.bad_gateway("upstream sent a tool call without call_id or name")
    return call_id


# ====================================================================== canonical -> client


# status (the stop table of Responses)

_RESPONSES_STATUS_OUT: dict[c.StopReason, str] = {
    "end_turn": "completed",
    "stop_sequence": "completed",
    "tool_use": "completed",
    "pause_turn": "completed",
    "max_tokens": "incomplete",
    "content_filter": "incomplete",
    "refusal": "failed",
}


def responses_status(stop: c.StopReason | None) -> str:
    """Terminal Responses status for a stop reason; None means still in progress."""
    if stop is None:
        return "in_progress"
    return _RESPONSES_STATUS_OUT[stop]


def responses_incomplete_reason(stop: c.StopReason | None) -> str | None:
    if stop == "max_tokens":
        return "max_output_tokens"
    if stop == "content_filter":
        return "content_filter"
    return None


def stop_from_responses(
    status: str | None, incomplete_reason: str | None, has_tool_calls: bool, has_refusal: bool
) -> c.StopReason | None:
    """Responses status -> canonical stop. Finer than the spec's table where the
    response itself says more: tool calls -> tool_use, a refusal part -> refusal."""
    if status == "completed":
        if has_refusal:
            return "refusal"
        return "tool_use" if has_tool_calls else "end_turn"
    if status == "incomplete":
        return "content_filter" if incomplete_reason == "content_filter" else "max_tokens"
    if status == "failed":
        return "refusal"
    return None  # cancelled / queued / in_progress have no stop reason


def terminal_status(stop: c.StopReason | None) -> str:
    """The terminal status of a finished answer (a finish without a reason completed)."""
    return responses_status(stop) if stop is not None else "completed"


def citation_out(cite: c.Citation, text: str) -> w.UrlCitation:
    """A citation as a url_citation annotation of the text part ``text``: its own
    offsets, else where its cited text is in the part, else the whole part."""
    if cite.end_index is not None:  # (a stream announces it at once: ``spans_whole_part``)
        start, end = cite.start_index or 0, cite.end_index
    else:
        start, end = sr.span_of(text, cite)
    return w.UrlCitation(url=cite.url, title=cite.title or "", start_index=start, end_index=end)


def search_in(item: w.UpWebSearchCall) -> c.ServerToolUse:
    """A ``web_search_call`` item as a search: its query, and its pages when the
    request asked for them (``include: web_search_call.action.sources``)."""
    action = item.action or {}
    query = action.get("query")
    queries = action.get("queries")
    if not isinstance(query, str) and isinstance(queries, list) and queries:
        query = queries[0]
    sources = action.get("sources")
    hits = None
    if isinstance(sources, list):
        hits = [
            c.SearchHit(
                url=s["url"], title=s.get("title") if isinstance(s.get("title"), str) else None
            )
            for s in sources
            if isinstance(s, dict) and isinstance(s.get("url"), str)
        ]
    return c.ServerToolUse(
        id=item.id,
        name="web_search",
        input={"query": query} if isinstance(query, str) else {},
        result=action or None,
        hits=hits,
        error="unavailable" if item.status == "failed" else None,
    )


def search_item(use: c.ServerToolUse, item_id: str, done: bool) -> w.OutputWebSearchCall:
    """A search as a ``web_search_call`` item: as announced (in progress, no sources
    yet) or done."""
    action: dict[str, Any] = {"type": "search", "query": sr.query_of(use)}
    if not done:
        return w.OutputWebSearchCall(id=item_id, status="in_progress", action=action)
    action["sources"] = [{"type": "url", "url": h.url} for h in use.hits or ()]
    status = "failed" if use.error is not None else "completed"
    return w.OutputWebSearchCall(id=item_id, status=status, action=action)


def search_item_id(use: c.ServerToolUse, rid: str, n: int) -> str:
    return use.id if use.id.startswith("ws_") else ids.item_id("ws_", rid, n)


def spans_whole_part(cite: c.Citation) -> bool:
    """A citation whose span is the whole text part, known only once the part ends: a
    stream announces it then, after the citations that carry their own offsets."""
    return cite.end_index is None


def text_part(text: str, citations: list[c.Citation] | None) -> w.OutputText:
    if not citations:
        return w.OutputText(text=text)
    ordered = sorted(citations, key=spans_whole_part)  # the stream's order
    return w.OutputText(text=text, annotations=[citation_out(x, text) for x in ordered])


def refusal_message(response_id: str, n: int, explanation: str) -> w.OutputMessage:
    """A refusal with no wording of its own (Anthropic ``stop_reason: refusal`` with only
    ``stop_details.explanation``): a message item whose refusal part is the explanation."""
    return message_item(response_id, n, [w.OutputRefusal(refusal=explanation)], "completed")


REFUSAL_ERROR_CODE = "invalid_prompt"


def refusal_error(output: list[w.OutputItem]) -> w.ResponseErrorObject:
    """RS-15 keeps a refusal ``failed``, and Responses clients (Codex) treat ``failed`` as
    an error to show: so ``error`` says why, in the refusal's own words (its refusal
    parts, else its text, which a stream sent before it knew). ``invalid_prompt`` is the
    API's code for a prompt the model will not answer: clients show it and do not retry
    (``server_error`` would be retried). Read from the output items, so the streamed and
    the non-streamed answer carry the same error."""
    parts = [p for item in output if type(item) is w.OutputMessage for p in item.content]
    message = "".join(p.refusal for p in parts if type(p) is w.OutputRefusal) or "".join(
        p.text for p in parts if type(p) is w.OutputText
    )
    return w.ResponseErrorObject(
        code=REFUSAL_ERROR_CODE, message=message or "The model declined to answer."
    )


def shows_explanation(stop: c.StopReason | None, explanation: str | None, shown: bool) -> bool:
    """Whether a refusal's explanation becomes the answer: the answer is a refusal, it
    has an explanation, and no text or refusal part was shown."""
    return stop == "refusal" and bool(explanation) and not shown


def reasoning_item_id(item_id: str | None, response_id: str, n: int) -> str:
    return item_id or ids.item_id("rs_", response_id, n)


def tool_item_id(kind: c.ToolKind, item_id: str | None, response_id: str, n: int) -> str:
    prefix = "ctc_" if kind == "custom" else "fc_"
    if item_id and item_id.startswith(prefix):
        return item_id
    return ids.item_id(prefix, response_id, n)


# The tokens a Responses client has fields for: a reasoning item's encrypted_content
# and its id. Any other rides in encrypted_content, packed.
OWN_TOKENS = ("encrypted_content", "item_id")


def encrypted_out(r: c.Reasoning) -> str | None:
    """The ``encrypted_content`` a Responses client replays for ``r``."""
    return reasoning_carry.client_token(r, OWN_TOKENS, "encrypted_content")


def reasoning_item(
    item_id: str, text: str, summary: bool, encrypted: str | None
) -> w.OutputReasoning:
    if text and summary:
        return w.OutputReasoning(
            id=item_id, summary=[w.SummaryText(text=text)], encrypted_content=encrypted
        )
    if text:
        return w.OutputReasoning(
            id=item_id,
            summary=[],
            content=[w.ReasoningText(text=text)],
            encrypted_content=encrypted,
        )
    return w.OutputReasoning(id=item_id, summary=[], encrypted_content=encrypted)


def tool_item(
    kind: c.ToolKind, item_id: str, call_id: str, name: str, arguments: str, status: str
) -> w.OutputFunctionCall | w.OutputCustomToolCall:
    if kind == "custom":
        return w.OutputCustomToolCall(id=item_id, call_id=call_id, name=name, input=arguments)
    return w.OutputFunctionCall(
        id=item_id, call_id=call_id, name=name, arguments=arguments, status=status
    )


def usage_out(u: c.Usage) -> w.ResponseUsage:
    return w.ResponseUsage(
        input_tokens=u.input_tokens,
        input_tokens_details=w.InputTokensDetails(
            cached_tokens=u.cached_tokens, cache_write_tokens=u.cache_creation_tokens
        ),
        output_tokens=u.output_tokens,
        output_tokens_details=w.OutputTokensDetails(reasoning_tokens=u.reasoning_tokens),
        total_tokens=u.total_tokens,
    )


def error_code(kind: str) -> str:
    """``response.failed`` error codes come from a closed vocabulary."""
    return "rate_limit_exceeded" if kind == "rate_limit" else "server_error"


class ResponseShell:
    """The request-derived fields every Response object of one exchange repeats."""

    __slots__ = (
        "max_output_tokens",
        "metadata",
        "model",
        "parallel_tool_calls",
        "previous_response_id",
        "reasoning",
        "temperature",
        "text",
        "tool_choice",
        "top_p",
    )

    def __init__(self, request: c.Request) -> None:
        self.model = request.model
        self.max_output_tokens = request.max_tokens
        self.metadata = dict(request.metadata or {})
        self.parallel_tool_calls = (
            True if request.parallel_tool_calls is None else request.parallel_tool_calls
        )
        self.previous_response_id = request.previous_response_id
        rc = request.reasoning
        self.reasoning = (
            w.ReasoningParam(effort=rc.effort, summary=rc.summary) if rc is not None else None
        )
        self.temperature = request.temperature
        self.top_p = request.top_p
        self.text = w.TextConfig(
            format=_format_out(request.response_format), verbosity=request.verbosity
        )
        self.tool_choice = _tool_choice_out(request.tool_choice)

    def build(
        self,
        *,
        id: str,
        created_at: int,
        model: str,
        status: str,
        output: list[w.OutputItem],
        usage: c.Usage | None,
        stop: c.StopReason | None = None,
        error: w.ResponseErrorObject | None = None,
    ) -> w.ResponseObject:
        reason = responses_incomplete_reason(stop) if status == "incomplete" else None
        if error is None and stop == "refusal":
            error = refusal_error(output)
        # At most 15 keywords: CPython builds a call with more through a dict, which
        # makes the Struct 3x slower to build (~0.7 µs per answer and stream snapshot).
        response = w.ResponseObject(
            id=id,
            created_at=created_at,
            status=status,
            error=error,
            incomplete_details=w.IncompleteDetails(reason=reason) if reason else None,
            max_output_tokens=self.max_output_tokens,
            model=model or self.model,
            output=output,
            parallel_tool_calls=self.parallel_tool_calls,
            previous_response_id=self.previous_response_id,
            reasoning=self.reasoning,
            temperature=self.temperature,
            text=self.text,
            tool_choice=self.tool_choice,
            top_p=self.top_p,
        )
        if usage is not None:
            response.usage = usage_out(usage)
        response.metadata = self.metadata
        return response


def _format_out(rf: c.ResponseFormat | None) -> w.TextFormat:
    if rf is None or rf.type == "text":
        return w.TextFormat(type="text")
    if rf.type == "json_object":
        return w.TextFormat(type="json_object")
    return w.TextFormat(
        type="json_schema",
        name=rf.name or "response",
        schema=rf.schema or {},
        strict=rf.strict,
        description=rf.description,
    )


def _tool_choice_out(tc: c.ToolChoice | None) -> Any:
    if tc is None:
        return "auto"
    if tc.mode == "tool":
        return w.NamedToolChoice(type=tc.kind, name=tc.name or "")
    return tc.mode


def _join_or_open(
    message: w.OutputMessage | None, part: w.OutputContent, items: list[w.OutputItem], rid: str
) -> w.OutputMessage | None:
    """``part`` as the second part of ``message`` (then None: nothing more joins it), or
    as a message item of its own, returned so that the next part may join it."""
    if message is not None:
        message.content.append(part)
        return None
    opened = message_item(rid, len(items), [part], "completed")
    items.append(opened)
    return opened


def output_items(response: c.Response, rid: str | None = None) -> list[w.OutputItem]:
    """The canonical content as Responses output items, exactly as the stream encoder
    emits them (spec streaming-identifiers: one canonical block, one item):

    - each text part is its own message item with one ``output_text`` part, an empty
      text included (the stream opens the item at the block's start, before knowing
      whether any text follows; an empty ``output_text`` part is valid Responses);
    - a refusal part directly after a text part is that message item's second part
      (Chat ``content`` + ``refusal`` are one message), and so is a text part directly
      after a refusal part that opened its own item; any other text or refusal is a
      message item of its own;
    - reasoning and tool calls are sibling items, in content order.

    Every item is ``completed``: a part is done once its block stopped, and a truncated
    answer says so in the response status and ``incomplete_details``. Item ids derive
    from ``rid``, the response's id (the upstream's when None).
    """
    rid = rid or response.id
    items: list[w.OutputItem] = []
    joinable: w.OutputMessage | None = None  # a text's message a refusal may join
    refused: w.OutputMessage | None = None  # a refusal's message a text may join
    shown = False  # a text or refusal part with text
    wording_refuses = refused_wording(response)
    # Parts are dispatched on ``type(p)``: a failed ``isinstance`` against a msgspec
    # Struct class costs ~70 ns (its metaclass takes CPython's slow path), this ~15 ns.
    for p in response.content:
        if type(p) is c.Text:
            shown = shown or bool(p.text)
            part: w.OutputContent = (
                w.OutputRefusal(refusal=p.text)
                if wording_refuses and p.text
                else text_part(p.text, p.citations)
            )
            joinable, refused = _join_or_open(refused, part, items, rid), None
        elif type(p) is c.ToolCall:
            joinable = refused = None
            item_id = tool_item_id(p.kind, p.item_id, rid, len(items))
            # No arguments is an empty object: OpenAI always sends JSON, clients parse it.
            args = p.arguments or ("{}" if p.kind != "custom" else "")
            items.append(tool_item(p.kind, item_id, p.id, p.name, args, "completed"))
        elif type(p) is c.Refusal:
            shown = shown or bool(p.text)
            refusal = w.OutputRefusal(refusal=p.text)
            refused, joinable = _join_or_open(joinable, refusal, items, rid), None
        elif type(p) is c.Reasoning:
            joinable = refused = None
            items.append(
                reasoning_item(
                    reasoning_item_id(p.item_id, rid, len(items)),
                    p.text,
                    p.summary,
                    encrypted_out(p),
                )
            )
        elif sr.is_search(p):
            joinable = refused = None
            item_id = search_item_id(p, rid, len(items))  # type: ignore[arg-type]
            items.append(search_item(p, item_id, True))  # type: ignore[arg-type]
        elif hosted_code.is_code(p):
            joinable = refused = None
            items.append(code_run.item_out(p))  # type: ignore[arg-type]
        # Other server tools have no Responses shape: dropped in both paths alike.
    if shows_explanation(response.stop_reason, response.refusal_explanation, shown):
        items.append(refusal_message(rid, len(items), response.refusal_explanation or ""))
    return items


def refused_wording(response: c.Response) -> bool:
    """A refused turn (Anthropic ``stop_reason: refusal``) whose visible wording came as
    plain text: that wording is its refusal (spec refusal-and-status), so a non-streamed
    answer shows it as ``refusal`` parts, as Chat clients get it in ``message.refusal``.
    A stream has sent the text as ``output_text`` before the stop reason is known; its
    terminal ``error`` carries the refusal instead (RS-15)."""
    if response.stop_reason != "refusal":
        return False
    return not any(type(p) is c.Refusal for p in response.content)


def message_status(response_status: str) -> str:
    """Status of a message item still open when the answer ends."""
    return "incomplete" if response_status == "incomplete" else "completed"


def message_item(
    response_id: str, n: int, parts: list[w.OutputContent], status: str
) -> w.OutputMessage:
    return w.OutputMessage(id=ids.item_id("msg_", response_id, n), status=status, content=parts)


def encode_response(response: c.Response, request: c.Request) -> bytes:
    status = terminal_status(response.stop_reason)
    rid = request.response_id or response.id  # minted when the answer is stored
    obj = ResponseShell(request).build(
        id=ids.derive("resp_", rid),
        created_at=response.created or int(time.time()),
        model=response.model,
        status=status,
        output=output_items(response, rid),
        usage=response.usage,
        stop=response.stop_reason,
    )
    return w.json_encoder.encode(obj)
