"""Gemini ``GenerateContentResponse`` bodies <-> canonical ``Response``, and the
finish-reason, usage and part helpers the stream codec shares, so streamed and
non-streamed answers agree.

Finish reasons (``FINISH_IN``; the table in docs/gemini-spec.md): Gemini has no
tool-call reason, a function-call turn ends with ``STOP``, so a ``STOP`` answer with a
function call is ``tool_use``. Content blocks (SAFETY, RECITATION, BLOCKLIST,
PROHIBITED_CONTENT, SPII, IMAGE_SAFETY, ...) are ``content_filter``; a blocked prompt
(no candidates, ``promptFeedback.blockReason``) is a ``refusal`` whose explanation
names the reason: never an empty success. ``MALFORMED_FUNCTION_CALL`` and its kin mean
the model produced no usable answer: a 502 in the client's shape.

Usage: canonical figures follow OpenAI semantics. ``promptTokenCount`` already
includes cached tokens; tool-use prompt tokens are prompt tokens too; output is
``candidatesTokenCount + thoughtsTokenCount``.

Toward a Gemini client (``encode_response``): one candidate; ``refusal`` and
``content_filter`` say ``SAFETY`` with the refusal wording (or the explanation) as the
text and the explanation as ``finishMessage``; function calls carry their id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ... import canonical as c
from ... import ids, reasoning_carry
from ...errors import ProxyError
from ...lazy_decoder import LazyDecoder
from .._kit import hosted_code
from .._kit import search_results as sr
from . import code_run, grounding, signatures, wire

_encoder = msgspec.json.Encoder()
_json = msgspec.json.Decoder()
_response_decoder: LazyDecoder[wire.GenerateContentResponse] = LazyDecoder(
    wire.GenerateContentResponse
)

# Canonical stop (None: the model produced no usable answer) for each finishReason.
FINISH_IN: dict[str, c.StopReason | None] = {
    "STOP": "end_turn",
    "FINISH_REASON_UNSPECIFIED": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "LANGUAGE": "refusal",
    "OTHER": "end_turn",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
    "IMAGE_OTHER": "content_filter",
    "NO_IMAGE": "end_turn",
    "MALFORMED_FUNCTION_CALL": None,
    "UNEXPECTED_TOOL_CALL": None,
    "TOO_MANY_TOOL_CALLS": None,
    "MISSING_THOUGHT_SIGNATURE": None,
}

FINISH_OUT: dict[c.StopReason, str] = {
    "end_turn": "STOP",
    "stop_sequence": "STOP",
    "tool_use": "STOP",
    "pause_turn": "STOP",
    "max_tokens": "MAX_TOKENS",
    "content_filter": "SAFETY",
    "refusal": "SAFETY",
}


def stop_in(finish_reason: str | None, has_tool: bool) -> c.StopReason | None:
    """The canonical stop of a finishReason; a 502 for a turn with no usable answer."""
    if finish_reason is None:
        return None
    stop = FINISH_IN.get(finish_reason, "end_turn")
    if stop is None:
        raise ProxyError.bad_gateway(
            f"upstream model ended without a usable answer ({finish_reason})"
        )
    if stop == "end_turn" and has_tool:
        return "tool_use"
    return stop


def block_explanation(feedback: wire.PromptFeedback) -> str:
    reason = feedback.block_reason or "OTHER"
    text = f"The prompt was blocked by Gemini ({reason})."
    if feedback.block_reason_message:
        text += f" {feedback.block_reason_message}"
    return text


def filter_explanation(finish_reason: str, message: str | None) -> str:
    return message or f"The answer was blocked by Gemini ({finish_reason})."


def usage_in(u: wire.UsageMetadata | None) -> c.Usage:
    if u is None:
        return c.Usage()
    thoughts = u.thoughts_token_count or 0
    return c.Usage(
        input_tokens=(u.prompt_token_count or 0) + (u.tool_use_prompt_token_count or 0),
        output_tokens=(u.candidates_token_count or 0) + thoughts,
        cached_tokens=u.cached_content_token_count or 0,
        reasoning_tokens=thoughts,
    )


def usage_out(u: c.Usage) -> wire.UsageMetadata:
    visible = max(0, u.output_tokens - u.reasoning_tokens)
    return wire.UsageMetadata(
        prompt_token_count=u.input_tokens,
        cached_content_token_count=u.cached_tokens or None,
        candidates_token_count=visible,
        thoughts_token_count=u.reasoning_tokens or None,
        total_token_count=u.input_tokens + u.output_tokens,
    )


def call_id(fc: wire.FunctionCall, response_id: str, n: int) -> str:
    """The n-th function call's id: Gemini's own, or one derived from the response id
    (the same in streamed and non-streamed answers)."""
    return fc.id or ids.item_id("gcall_", response_id, n)


def arguments_json(args: object) -> str:
    return _encoder.encode(args if args is not None else {}).decode()


# --------------------------------------------------------- upstream -> canonical


def decode_body(body: bytes) -> wire.GenerateContentResponse:
    try:
        return _response_decoder.decode(body)
    except (msgspec.DecodeError, ValueError) as e:
        raise ProxyError.bad_gateway(
            f"upstream returned an invalid generateContent body: {e}"
        ) from None


def parts_in(
    parts: list[wire.Part],
    out: list[c.Part],
    call_id_of: Callable[[wire.FunctionCall, int], str],
    other: Callable[[wire.Part], c.Part | None] | None = None,
) -> int:
    """Gemini parts appended to ``out`` as canonical parts; returns the call count.
    Adjacent plain texts (and adjacent unsigned thoughts) merge, as a stream's do; a
    signature on a non-thought part is a bare reasoning part before it. ``other`` maps
    any other part (media in history); without it they are skipped (answers)."""
    calls = 0
    for p in parts:
        if p.thought and p.text is not None:
            last = out[-1] if out else None
            if type(last) is c.Reasoning and last.summary and not reasoning_carry.holds_token(last):
                last.text += p.text
                if p.thought_signature:
                    signatures.seal(last, p.thought_signature)
            else:
                out.append(signatures.reasoning_in(p.text, p.thought_signature))
            continue
        if p.thought_signature:
            bare = signatures.reasoning_in("", p.thought_signature)
            if not signatures.merge_carrier(out, bare):
                out.append(bare)
        if p.function_call is not None:
            fc = p.function_call
            out.append(
                c.ToolCall(
                    id=call_id_of(fc, calls), name=fc.name, arguments=arguments_json(fc.args)
                )
            )
            calls += 1
        elif p.text is not None:
            last = out[-1] if out else None
            if not p.text:
                continue
            if type(last) is c.Text:
                last.text += p.text
            else:
                out.append(c.Text(text=p.text))
        elif p.executable_code is not None:
            out.append(code_run.use_in(p.executable_code))
        elif p.code_execution_result is not None:
            code_run.attach(out, p.code_execution_result)
        elif other is not None:
            part = other(p)
            if part is not None:
                out.append(part)
    return calls


def decode_response(body: bytes) -> c.Response:
    r = decode_body(body)
    response_id = r.response_id or ""
    model = r.model_version or ""
    usage = usage_in(r.usage_metadata)
    if not r.candidates:
        if r.prompt_feedback is not None and r.prompt_feedback.block_reason:
            return c.Response(
                id=response_id,
                model=model,
                content=[],
                stop_reason="refusal",
                refusal_explanation=block_explanation(r.prompt_feedback),
                usage=usage,
            )
        raise ProxyError.bad_gateway("upstream returned no candidates")
    cand = r.candidates[0]
    content: list[c.Part] = []
    calls = parts_in(
        cand.content.parts if cand.content else [],
        content,
        lambda fc, n: call_id(fc, response_id, n),
    )
    if cand.grounding_metadata:
        _grounded(content, cand.grounding_metadata, response_id, usage)
    stop = stop_in(cand.finish_reason, calls > 0)
    explanation = None
    if stop in ("content_filter", "refusal"):
        explanation = filter_explanation(cand.finish_reason or "", cand.finish_message)
    return c.Response(
        id=response_id,
        model=model,
        content=content,
        stop_reason=stop,
        refusal_explanation=explanation,
        usage=usage,
    )


def _grounded(
    content: list[c.Part], meta: dict[str, Any], response_id: str, usage: c.Usage
) -> None:
    """The grounding's citations onto the text parts, and its searches before the
    first of them (Gemini searched before it wrote)."""
    texts = [p for p in content if type(p) is c.Text]
    for part, cites in zip(
        texts, grounding.citations_in(meta, [t.text for t in texts]), strict=True
    ):
        if cites:
            part.citations = cites
    at = next((i for i, p in enumerate(content) if type(p) is c.Text), len(content))
    content[at:at] = grounding.searches_in(meta, response_id)
    usage.server_tool_requests = usage.server_tool_requests or grounding.search_count(meta)


# ----------------------------------------------------------- canonical -> client


def args_out(call: c.ToolCall) -> dict[str, object]:
    if call.kind == "custom":
        return {"input": call.arguments}
    if not call.arguments:
        return {}
    try:
        value = _json.decode(call.arguments)
    except (msgspec.DecodeError, ValueError):
        value = None
    if not isinstance(value, dict):
        raise ProxyError.bad_gateway(
            f"upstream tool call {call.name!r} has arguments that are not a JSON object"
        )
    return value


def cut_args_out(call: c.ToolCall, stop: c.StopReason | None) -> dict[str, object] | None:
    """``args_out``; None for a call the token limit cut inside its arguments (Gemini's
    ``args`` is an object: a half-built call is left out, as the other clients never get
    one handed over as whole). Any other call whose arguments are not an object is a 502."""
    try:
        return args_out(call)
    except ProxyError:
        if stop == "max_tokens":
            return None
        raise


def finish_out(
    stop: c.StopReason | None, has_text: bool, explanation: str | None
) -> tuple[str, str | None, str | None]:
    """finishReason, finishMessage, and the text to add when the answer has none."""
    reason = FINISH_OUT.get(stop, "STOP") if stop is not None else "STOP"
    if reason != "SAFETY":
        return reason, None, None
    return reason, explanation, (explanation if not has_text and explanation else None)


def candidate(parts: list[wire.Part], finish: str | None, message: str | None) -> wire.Candidate:
    return wire.Candidate(
        content=wire.Content(role="model", parts=parts),
        finish_reason=finish,
        finish_message=message,
        index=0,
    )


def encode_response(response: c.Response, request: c.Request) -> bytes:
    parts: list[wire.Part] = []
    pending: str | None = None  # a signature for the next non-thought part
    has_text = False
    texts: list[tuple[str, list[c.Citation] | None]] = []  # what grounding cites
    for p in response.content:
        part: wire.Part
        if type(p) is c.Reasoning:
            own = p.thought_signature
            if own is not None and p.text:  # Gemini's own, where Gemini put it
                parts.append(wire.Part(text=p.text, thought=True, thought_signature=own))
                continue
            if p.text:
                parts.append(wire.Part(text=p.text, thought=True))
            carrier = own or signatures.client_signature(p)
            if carrier is not None:
                if pending is not None:
                    parts.append(wire.Part(text="", thought_signature=pending))
                pending = carrier
            continue
        if type(p) is c.Text or type(p) is c.Refusal:
            if not p.text:
                continue
            has_text = True
            part = wire.Part(text=p.text)
            texts.append((p.text, p.citations if type(p) is c.Text else None))
        elif type(p) is c.ToolCall:
            args = cut_args_out(p, response.stop_reason)
            if args is None:
                continue
            part = wire.Part(function_call=wire.FunctionCall(id=p.id, name=p.name, args=args))
        elif hosted_code.is_code(p):
            *head, part = code_run.parts_out(p)  # type: ignore[arg-type]
            parts.extend(head)
        else:
            continue  # a search is grounding (below); other server tools have no shape
        if pending is not None:
            part.thought_signature, pending = pending, None
        parts.append(part)
    if pending is not None:
        parts.append(wire.Part(text="", thought_signature=pending))
    finish, message, extra = finish_out(
        response.stop_reason, has_text, response.refusal_explanation
    )
    if extra:
        parts.append(wire.Part(text=extra))
    cand = candidate(parts, finish, message)
    cand.grounding_metadata = grounding.grounding_out(sr.searches(response.content), texts)
    body = wire.GenerateContentResponse(
        candidates=[cand],
        usage_metadata=usage_out(response.usage),
        model_version=response.model or request.model,
        response_id=response.id,
    )
    return _encoder.encode(body)
