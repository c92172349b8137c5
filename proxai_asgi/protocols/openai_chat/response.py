"""Chat Completions responses: upstream JSON -> canonical, canonical -> client JSON.

The client encoding mirrors the stream encoder rule for rule (ids, ``created``,
finish_reason, reasoning separators, citation offsets), so a non-streamed answer is the
fold of the streamed one. The one deliberate difference is the spec's refusal rule: a
non-streamed answer with ``stop_reason == "refusal"`` and plain text moves that text into
``message.refusal``; a stream has already sent it as content and cannot take it back.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import msgspec

from ... import canonical as c
from ... import ids
from ...errors import ProxyError
from ...lazy_decoder import LazyDecoder
from . import wire as w

_COMPLETION_DEC: LazyDecoder[w.CompletionIn] = LazyDecoder(w.CompletionIn)
_ENC = msgspec.json.Encoder()
_ANY_ENC = msgspec.json.Encoder()

REASONING_SEPARATOR = "\n\n"


# ======================================================================== shared


def usage_from_wire(u: w.Usage | None) -> c.Usage:
    if u is None:
        return c.Usage()
    ptd, ctd = u.prompt_tokens_details, u.completion_tokens_details
    written = ptd.cache_write_tokens if ptd is not None else None
    return c.Usage(
        input_tokens=u.prompt_tokens,
        output_tokens=u.completion_tokens,
        cached_tokens=(ptd.cached_tokens or 0) if ptd is not None else 0,
        cache_creation_tokens=written if isinstance(written, int) else 0,
        reasoning_tokens=(ctd.reasoning_tokens or 0) if ctd is not None else 0,
    )


def usage_to_wire(u: c.Usage) -> w.Usage:
    return w.Usage(
        prompt_tokens=u.input_tokens,
        completion_tokens=u.output_tokens,
        total_tokens=u.input_tokens + u.output_tokens,
        prompt_tokens_details=w.PromptTokensDetails(
            cached_tokens=u.cached_tokens,
            cache_write_tokens=u.cache_creation_tokens or msgspec.UNSET,
        ),
        completion_tokens_details=w.CompletionTokensDetails(reasoning_tokens=u.reasoning_tokens),
    )


# finish_reason (the stop table of Chat Completions)

_CHAT_FINISH_IN: dict[str, c.StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "content_filter",
}


def stop_from_chat(finish_reason: str | None) -> c.StopReason | None:
    if finish_reason is None:
        return None
    return _CHAT_FINISH_IN.get(finish_reason, "end_turn")


_CHAT_FINISH_OUT: dict[c.StopReason, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "refusal": "stop",  # a refusal is a terminal assistant turn, not a tool call
    "pause_turn": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
}


def chat_finish(stop: c.StopReason | None) -> str:
    return _CHAT_FINISH_OUT.get(stop, "stop") if stop is not None else "stop"


def stop_from_finish(finish_reason: str | None, saw_refusal: bool) -> c.StopReason | None:
    """finish_reason via the table; a refusal that ended normally is a refusal."""
    stop = stop_from_chat(finish_reason)
    if stop == "end_turn" and saw_refusal:
        return "refusal"
    return stop


def finish_reason_for(stop: c.StopReason | None, has_tool_calls: bool, legacy: bool) -> str:
    """The client finish_reason: the table, except that an ordinary end with tool calls
    says ``tool_calls`` (what Chat clients loop on), ``function_call`` to a client of
    the legacy ``functions``."""
    finish = "tool_calls" if has_tool_calls and stop in (None, "end_turn") else chat_finish(stop)
    return "function_call" if legacy and finish == "tool_calls" else finish


# finish_reasons whose empty answer is still a representable stop: truncated before any
# text (max_tokens / incomplete), or withheld by the provider's filter (Azure answers
# content null + content_filter: an Anthropic refusal, a Responses content_filter stop).
EMPTY_ANSWER_FINISHES = frozenset({"length", "content_filter"})


def fallback_tool_id(response_id: str, n: int) -> str:
    """The id of the n-th tool call when the upstream gave none."""
    return ids.item_id("call_", response_id, n)


def annotations_for(citations: Iterable[c.Citation], start: int, end: int) -> list[w.AnnotationOut]:
    """Citations of a text span ``[start, end)`` of the message content as url_citation
    annotations; a citation without its own offsets covers the whole span."""
    out: list[w.AnnotationOut] = []
    for ci in citations:
        if not ci.url:
            continue
        s = start + ci.start_index if ci.start_index is not None else start
        e = start + ci.end_index if ci.end_index is not None else end
        out.append(
            w.AnnotationOut(
                url_citation=w.URLCitationOut(
                    url=ci.url, title=ci.title or "", start_index=s, end_index=e
                )
            )
        )
    return out


# ================================================================= upstream side


def _arguments(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    try:
        return _ANY_ENC.encode(v).decode()
    except (TypeError, msgspec.EncodeError):
        return ""


def _content_text(content: str | list[object] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    # A few servers (Mistral) answer with a list of parts: keep the text ones.
    texts: list[str] = []
    for p in content:
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
            texts.append(p["text"])
    return "".join(texts)


def _citations(annotations: list[w.AnnotationIn] | None) -> list[c.Citation] | None:
    out: list[c.Citation] = []
    for a in annotations or ():
        u = a.url_citation
        if a.type == "url_citation" and u is not None and u.url:
            out.append(
                c.Citation(
                    url=u.url, title=u.title, start_index=u.start_index, end_index=u.end_index
                )
            )
    return out or None


def decode_response(body: bytes) -> c.Response:
    """An upstream Chat completion (2xx) as a canonical response. Exactly one choice
    is required: choices are alternative answers, never merged and never truncated."""
    try:
        resp = _COMPLETION_DEC.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError) as e:
        raise ProxyError.bad_gateway(f"upstream sent an invalid Chat completion: {e}") from None
    choices = resp.choices or []
    if len(choices) != 1:
        raise ProxyError.bad_gateway(
            f"upstream Chat completion has {len(choices)} choices; exactly one is required "
            "(choices are alternative answers and cannot be merged or truncated)"
        )
    choice = choices[0]
    msg = choice.message
    if msg is None:
        raise ProxyError.bad_gateway("upstream Chat completion choices[0] has no message")
    response_id = resp.id or ""

    content: list[c.Part] = []
    reasoning = msg.reasoning_content
    if reasoning is None and isinstance(msg.reasoning, str):
        reasoning = msg.reasoning
    if reasoning:
        content.append(c.Reasoning(text=reasoning))
    text = msg.content if isinstance(msg.content, str) else _content_text(msg.content)
    if text:
        cites = _citations(msg.annotations) if msg.annotations else None
        content.append(c.Text(text=text, citations=cites))
    if msg.refusal:
        content.append(c.Refusal(text=msg.refusal))
    n = 0
    for tc in msg.tool_calls or ():
        if tc.type == "custom" or (tc.function is None and tc.custom is not None):
            cu = tc.custom
            if cu is None:
                continue
            content.append(
                c.ToolCall(
                    id=tc.id or fallback_tool_id(response_id, n),
                    name=cu.name or "",
                    arguments=cu.input or "",
                    kind="custom",
                )
            )
        elif tc.function is not None:
            content.append(
                c.ToolCall(
                    id=tc.id or fallback_tool_id(response_id, n),
                    name=tc.function.name or "",
                    arguments=_arguments(tc.function.arguments),
                )
            )
        else:
            continue  # an unknown tool call type: skipped
        n += 1
    if msg.function_call is not None and msg.function_call.name:  # legacy
        content.append(
            c.ToolCall(
                id=fallback_tool_id(response_id, n),
                name=msg.function_call.name,
                arguments=_arguments(msg.function_call.arguments),
            )
        )
        n += 1
    if not content and msg.audio is not None:
        raise ProxyError.bad_gateway(
            "upstream Chat completion holds only audio, which cannot be carried"
        )
    # Spec message-placement: an answer needs something a client can be given, text, a
    # refusal or a tool call (reasoning alone is not an answer), unless it is an empty
    # answer that is a stop of its own (``EMPTY_ANSWER_FINISHES``).
    if not (text or msg.refusal or n) and choice.finish_reason not in EMPTY_ANSWER_FINISHES:
        raise ProxyError.bad_gateway(
            "upstream Chat completion has no representable answer: no content, no refusal "
            f"and no tool calls (finish_reason {choice.finish_reason!r})"
        )

    return c.Response(
        id=response_id,
        model=resp.model or "",
        content=content,
        stop_reason=stop_from_finish(choice.finish_reason, bool(msg.refusal)),
        usage=usage_from_wire(resp.usage),
        created=int(resp.created or 0),
    )


# =================================================================== client side


def encode_response(response: c.Response, request: c.Request) -> bytes:
    """A canonical response as the Chat completion a client receives.

    ``created`` is the canonical ``created``; when the upstream had none (0) it is the
    encode time (the stream encoder does the same at ``MessageStart``)."""
    response_id = ids.derive("chatcmpl-", response.id)
    texts: list[str] = []
    annotations: list[w.AnnotationOut] = []
    refusals: list[str] = []
    reasoning: list[str] = []
    calls: list[w.ToolCallOut] = []
    offset = 0
    # Parts are dispatched on ``type(p)``: a failed ``isinstance`` against a msgspec
    # Struct class costs ~70 ns (its metaclass takes CPython's slow path), this ~15 ns.
    for p in response.content:
        if type(p) is c.Text:
            if p.citations and p.text:
                annotations.extend(annotations_for(p.citations, offset, offset + len(p.text)))
            texts.append(p.text)
            offset += len(p.text)
        elif type(p) is c.ToolCall:
            call_id = p.id or fallback_tool_id(response.id, len(calls))
            if p.kind == "custom":
                calls.append(
                    w.CustomToolCallOut(
                        id=call_id, custom=w.CustomOut(name=p.name, input=p.arguments)
                    )
                )
            else:
                calls.append(
                    w.FunctionToolCallOut(
                        id=call_id,
                        # No arguments is an empty object: OpenAI always sends JSON.
                        function=w.FunctionOut(name=p.name, arguments=p.arguments or "{}"),
                    )
                )
        elif type(p) is c.Refusal:
            refusals.append(p.text)
        elif type(p) is c.Reasoning and p.redacted is None and p.text:
            reasoning.append(p.text)
        # ServerToolUse and others: Chat has no shape for them.

    content: str | None = "".join(texts) or None
    refusal: str | None = "".join(refusals) or None
    if response.stop_reason == "refusal" and refusal is None:
        # Spec (refusal-and-status): the visible wording of a refused turn is the
        # refusal; without any, the upstream's explanation is.
        refusal = content or response.refusal_explanation or None
        content = None
    if content is not None and content == refusal:
        content = None  # never the same text in both fields
    message = w.MessageOut(content=content, refusal=refusal)
    if calls and request.legacy_functions:
        # One call per legacy answer (the upstream was asked for one): the first.
        first = calls[0]
        if isinstance(first, w.FunctionToolCallOut):
            message.function_call = first.function
    elif calls:
        message.tool_calls = calls
    if annotations and content is not None:
        message.annotations = annotations
    if reasoning:
        message.reasoning_content = REASONING_SEPARATOR.join(reasoning)
    out = w.CompletionOut(
        id=response_id,
        created=response.created or int(time.time()),
        model=response.model or request.model,
        choices=[
            w.ChoiceOut(
                message=message,
                finish_reason=finish_reason_for(
                    response.stop_reason, bool(calls), request.legacy_functions
                ),
            )
        ],
        usage=usage_to_wire(response.usage),
    )
    return _ENC.encode(out)
