"""What the Chat Completions API rejects with a 400, checked before translation.

A client written against OpenAI relies on these 400s to find its own bugs; a proxy that
accepts such a request and quietly changes it (a clamped temperature, a dropped tool, a
deleted message) hides them and answers a different question. One pass over the
decoded request, no second parse; pass-through requests are the upstream's to judge.
"""

from __future__ import annotations

from msgspec import UNSET

from .._kit.openai_checks import check_at_least, check_effort, check_image_url, check_range
from .._kit.openai_checks import invalid as _invalid
from . import wire as w

TOOL_TYPES = frozenset({"function", "custom"})


def _empty(content: object) -> bool:
    return content is None or content == "" or content == [] or content is UNSET


def check_params(req: w.ChatRequest) -> None:
    """Everything but the messages and the tools (``check_tool_types``, next).
    (``request.decode_request`` checks the usual messages in its own walk over them and
    asks ``check_messages`` only when that walk sees something it would reject, or
    fails.)"""
    # (each check called only for a value it rejects: this runs on every request)
    t = req.temperature
    if t is not None and not 0 <= t <= 2:
        check_range("temperature", t, 0, 2)
    p = req.top_p
    if p is not None and not 0 <= p <= 1:
        check_range("top_p", p, 0, 1)
    if req.n is not None and req.n < 1:
        raise _invalid(
            f"Invalid 'n': integer below minimum value. Expected a value >= 1, but got "
            f"{req.n} instead.",
            "n",
        )
    if req.max_tokens is not None and req.max_tokens < 1:
        check_at_least("max_tokens", req.max_tokens, 1)
    if req.max_completion_tokens is not None and req.max_completion_tokens < 1:
        check_at_least("max_completion_tokens", req.max_completion_tokens, 1)
    if req.reasoning_effort is not None:
        check_effort(req.reasoning_effort, "reasoning_effort")


def check_tool_types(tools: list[w.ToolDef]) -> None:
    """The tools' types, after ``check_params``. (Not run for a set that
    ``request.py`` found by its bytes: it keeps sets of function tools only.)"""
    for i, t in enumerate(tools):
        kind = "function" if t.type is UNSET else t.type
        if kind not in TOOL_TYPES:
            raise _invalid(
                f"Invalid value: '{kind}'. Supported values are: 'function' and 'custom'.",
                f"tools[{i}].type",
            )


def check_messages(messages: list[w.Message]) -> None:
    conversation = False
    pending: dict[str, int] = {}  # tool call ids awaiting their tool message -> position
    tool, user, assistant = w.ToolMessage, w.UserMessage, w.AssistantMessage
    for i, m in enumerate(messages):
        if type(m) is tool:  # type(), not isinstance: see request.py
            conversation = True  # (a result answering nothing is reported by checks.py)
            if pending:
                pending.pop(m.tool_call_id, None)
            continue
        if pending:
            _unanswered(pending)
        if type(m) is assistant:
            conversation = True
            if m.tool_calls:
                for call in m.tool_calls:
                    pending[call.id] = i
            elif (m.content is None or m.content is UNSET) and not (
                m.refusal or m.function_call or m.audio
            ):
                # (``content: ""`` is accepted: real clients send it after a tool turn)
                raise _invalid(
                    f"Invalid 'messages[{i}]': an assistant message must have 'content' "
                    "or 'tool_calls'.",
                    f"messages[{i}]",
                )
        elif type(m) is user:
            conversation = True
            if _empty(m.content):
                raise _invalid(
                    f"Invalid 'messages[{i}].content': a user message must not be empty.",
                    f"messages[{i}].content",
                )
            if type(m.content) is list:
                for j, part in enumerate(m.content):
                    if type(part) is w.ImagePart:
                        check_image_url(part.image_url.url, f"messages[{i}].content[{j}]")
    if pending:
        _unanswered(pending)
    if not conversation:
        raise _invalid(
            "Invalid 'messages': at least one user or assistant message is required "
            "besides system and developer messages.",
            "messages",
        )


def _unanswered(pending: dict[str, int]) -> None:
    at = min(pending.values())
    raise _invalid(
        "An assistant message with 'tool_calls' must be followed by tool messages "
        "responding to each 'tool_call_id'. The following tool_call_ids did not have "
        f"response messages: {', '.join(pending)}",
        f"messages.[{at}].role",
    )
