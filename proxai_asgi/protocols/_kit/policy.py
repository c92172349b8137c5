"""Rules that hold across protocols: system prompts toward OpenAI upstreams, output-token
limits toward upstreams with another minimum.

Each protocol's stop table (spec: refusal-and-status) lives in its codec's
``response.py``, which its streamed and non-streamed code both call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import msgspec

from ...canonical import Message, Request, Text
from ...errors import ProxyError, TranslationReport

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
