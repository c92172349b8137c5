"""Checks a Messages request the way Anthropic does before we translate it.

A translated request must fail where Anthropic would fail it, with the same 400; the
proxy never passes on a request it quietly changed. Cheap by design: a few field reads
per request (image blocks are checked while they are decoded).

``role: "system"`` inside ``messages`` is accepted where Anthropic takes it (Claude 4.8
and later; Claude Code sends it): ``system_placement`` checks its place, and the
translation keeps it there (a ``system`` turn of the canonical conversation).
"""

from __future__ import annotations

from typing import Any, NoReturn

from ...errors import ProxyError
from . import wire

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
# Anthropic's tool types besides client tools (``custom`` or no type); versioned ones
# (``bash_20250124``) share a prefix.
TOOL_TYPES = (
    "custom",
    "bash_",
    "text_editor_",
    "computer_",
    "web_search_",
    "web_fetch_",
    "code_execution_",
    "memory_",
    "tool_search_tool_",
    "mcp_toolset",
)


def validate(req: wire.ClientMessagesRequest, tools: list[Any] | None = None) -> None:
    """Raise the 400 Anthropic gives for the cases the translation would otherwise alter.
    The messages' tool_use / tool_result pairing is checked while they are converted
    (``request._messages_in``), which calls ``tool_results_follow`` for the error."""
    if req.max_tokens < 0:  # (0 is valid: it writes the prompt cache, answering nothing)
        raise ProxyError.invalid(
            "max_tokens: Input should be greater than or equal to 0", "max_tokens"
        )
    t = req.temperature
    if t is not None and not 0 <= t <= 1:
        raise ProxyError.invalid(
            f"temperature: Input should be less than or equal to 1 (got {t})", "temperature"
        )
    th = req.thinking
    if th is not None and th.type == "enabled":
        if th.budget_tokens is None:
            raise ProxyError.invalid(
                "thinking.enabled.budget_tokens: Field required", "thinking.budget_tokens"
            )
        if th.budget_tokens < 1024:
            raise ProxyError.invalid(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
                "thinking.budget_tokens",
            )
    for i, tool in enumerate(tools or ()):  # (the usual declarations: canonical tools)
        if type(tool) is not dict:
            continue
        kind = tool.get("type")
        if kind is not None and not (isinstance(kind, str) and kind.startswith(TOOL_TYPES)):
            raise ProxyError.invalid(
                f"tools.{i}.type: Input tag {kind!r} found using 'type' does not match any "
                "of the expected tags",
                f"tools.{i}.type",
            )


def tool_results_follow(messages: list[wire.ClientInputMessage]) -> None:
    """Every ``tool_use`` is answered by a ``tool_result`` in the next message (a
    trailing assistant turn, a prefill, is left alone: nothing follows it yet).
    Plain loops, and the usual turn (one call, answered by the next message's first
    block) needs no set: this runs over every turn of a resent conversation."""
    tool_use, tool_result = wire.ClientToolUseBlock, wire.ToolResultBlock
    for i in range(len(messages) - 1):
        m = messages[i]
        content = m.content
        if m.role != "assistant" or type(content) is str:
            continue
        ids: list[str] = []
        for b in content:
            if type(b) is tool_use:
                ids.append(b.id)
        if not ids:
            continue
        after = messages[i + 1].content
        if type(after) is str:
            _unanswered(i + 1, ids)
        first = after[0] if after else None
        if len(ids) == 1 and type(first) is tool_result and first.tool_use_id == ids[0]:
            continue
        answered: set[str] = set()
        for b in after:
            if type(b) is tool_result:
                answered.add(b.tool_use_id)
        if not answered.issuperset(ids):
            _unanswered(i + 1, [x for x in ids if x not in answered])


def _unanswered(at: int, missing: list[str]) -> NoReturn:
    raise ProxyError.invalid(
        f"messages.{at}: `tool_use` ids were found without `tool_result` blocks "
        f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
        "corresponding `tool_result` block in the next message.",
        f"messages.{at}",
    )


def image_media_type(media_type: str, path: str) -> None:
    if media_type not in IMAGE_TYPES:
        raise ProxyError.invalid(
            f"{path}.source.base64.media_type: Input should be 'image/jpeg', 'image/png', "
            "'image/gif' or 'image/webp'",
            f"{path}.source.media_type",
        )


# The assistant blocks after which a system message may come: a server tool's call
# (the server runs it and the turn goes on, as after a user turn).
_SERVER_CALLS = (wire.ServerToolUseBlock, wire.McpToolUseBlock)


def system_placement(messages: list[wire.ClientInputMessage], i: int) -> None:
    """Anthropic's rules for a mid-conversation system message (``messages[i]``): it
    comes right after a user message (or an assistant message that ends in a server
    tool call), and is the last message or comes before an assistant message. First in
    ``messages`` (where OpenAI's protocols put the system prompt) it follows nothing."""
    path = f"messages.{i}.role"
    if i == 0:
        raise ProxyError.invalid(
            f'{path}: a "system" message cannot be the first message. Put the system '
            "prompt in the top-level `system` parameter; a mid-conversation system message "
            "must immediately follow a user message.",
            path,
        )
    before = messages[i - 1]
    if before.role != "user" and not _ends_in_server_call(before):
        raise ProxyError.invalid(
            f'{path}: a "system" message must immediately follow a user message (or an '
            f"assistant message that ends in server tool use), not {_a(before.role)} message.",
            path,
        )
    if i + 1 < len(messages) and (after := messages[i + 1]).role != "assistant":
        raise ProxyError.invalid(
            f'{path}: a "system" message must be the last message or be followed by an '
            f"assistant message, not {_a(after.role)} message.",
            path,
        )


def _ends_in_server_call(m: wire.ClientInputMessage) -> bool:
    content = m.content
    return (
        m.role == "assistant"
        and type(content) is list
        and bool(content)
        and (isinstance(content[-1], _SERVER_CALLS))
    )


def _a(role: str) -> str:
    return f"an {role}" if role == "assistant" else f"a {role}"
