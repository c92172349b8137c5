"""Single source of truth for stop/status mapping (spec: refusal-and-status).

Streaming and non-streaming code in every codec calls these functions; none of them
re-implements a mapping table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import msgspec

from ...canonical import Message, Request, StopReason, Text
from ...errors import ProxyError, TranslationReport

# ---- OpenAI Chat finish_reason

_CHAT_FINISH_IN: dict[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "content_filter",
}


def stop_from_chat(finish_reason: str | None) -> StopReason | None:
    if finish_reason is None:
        return None
    return _CHAT_FINISH_IN.get(finish_reason, "end_turn")


_CHAT_FINISH_OUT: dict[StopReason, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "refusal": "stop",  # a refusal is a terminal assistant turn, not a tool call
    "pause_turn": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
}


def chat_finish(stop: StopReason | None) -> str:
    return _CHAT_FINISH_OUT.get(stop, "stop") if stop is not None else "stop"


# ---- Anthropic stop_reason (the canonical vocabulary is Anthropic's plus content_filter)

_ANTHROPIC_STOPS: frozenset[str] = frozenset(
    {"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"}
)


def stop_from_anthropic(stop_reason: str | None) -> StopReason | None:
    if stop_reason is None:
        return None
    if stop_reason in _ANTHROPIC_STOPS:
        return stop_reason  # type: ignore[return-value]
    # "model_context_window_exceeded" and future values: truncation is the closest.
    return "max_tokens" if "exceeded" in stop_reason else "end_turn"


def anthropic_stop(stop: StopReason | None) -> str | None:
    if stop == "content_filter":
        return "refusal"
    return stop


# ---- Responses status

_RESPONSES_STATUS_OUT: dict[StopReason, str] = {
    "end_turn": "completed",
    "stop_sequence": "completed",
    "tool_use": "completed",
    "pause_turn": "completed",
    "max_tokens": "incomplete",
    "content_filter": "incomplete",
    "refusal": "failed",
}


def responses_status(stop: StopReason | None) -> str:
    """Terminal Responses status for a stop reason; None means still in progress."""
    if stop is None:
        return "in_progress"
    return _RESPONSES_STATUS_OUT[stop]


def responses_incomplete_reason(stop: StopReason | None) -> str | None:
    if stop == "max_tokens":
        return "max_output_tokens"
    if stop == "content_filter":
        return "content_filter"
    return None


def stop_from_responses(
    status: str | None, incomplete_reason: str | None, has_tool_calls: bool, has_refusal: bool
) -> StopReason | None:
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


# ---- system prompts toward OpenAI upstreams


def joined_system(parts: Sequence[Text]) -> str | None:
    """Several system / developer parts as the one string OpenAI upstreams take (Chat
    ``system`` content, Responses ``instructions``): many Chat-compatible servers reject
    a content array there. Parts are kept apart by a blank line; None when all empty."""
    return "\n\n".join([t.text for t in parts if t.text]) or None


def hoist_system_turns(request: Request, report: TranslationReport) -> Request:
    """``request`` for an upstream with no system turn inside the conversation (Gemini:
    only ``systemInstruction``): its system turns appended to the system prompt, in
    order, reported as ``messages.system`` since they lose their place. Their text
    keeps its authority (a user turn holding it would not); what the model reads
    before its answer is the same, but an instruction given late now stands first."""
    if not request.system_turns:
        return request
    system = list(request.system)
    messages: list[Message] = []
    for m in request.messages:
        if m.role == "system":
            system.extend(p for p in m.content if type(p) is Text)
        else:
            messages.append(m)
    report.drop("messages.system")
    return msgspec.structs.replace(request, system=system, messages=messages, system_turns=False)


# ---- output-token limits toward upstreams with another minimum


def token_limit(
    limit: int | None, minimum: int, report: TranslationReport, target: str
) -> int | None:
    """A client's output-token limit (valid for its own API) for an upstream that takes
    nothing below ``minimum``. Never changed silently:
    - below 0: a 400 (every client codec rejects it first; this guards the rest);
    - 0, Anthropic's "write the prompt cache, answer nothing": no such request exists
      upstream, so a 400 naming ``max_tokens`` (lossy mode: the minimum, reported);
    - between 1 and the minimum (the Responses API's 16; Claude Code's quota probe sends
      1): the minimum, reported as ``max_tokens``. A few more tokens allowed is the
      same kind of answer, and a 400 would break the clients that probe with 1.
    """
    if limit is None or limit >= minimum:
        return limit
    if limit < 0:
        negative_limit(limit)
    if limit == 0:
        report.reject(
            "max_tokens",
            f"0 (writing the prompt cache without an answer) has no equivalent in {target}, "
            f"which takes at least {minimum}",
        )
    report.drop("max_tokens")
    return minimum


def negative_limit(limit: int) -> NoReturn:
    """The 400 for a negative output-token limit, which no API takes."""
    raise ProxyError.invalid(
        f"max_tokens: Input should be greater than or equal to 0 (got {limit})", "max_tokens"
    )
