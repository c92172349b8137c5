"""Prompt-cache breakpoints for clients whose protocol caches prefixes by itself.

OpenAI caches every prompt prefix automatically; Anthropic caches only up to blocks
marked ``cache_control`` (at most four per request, read in the order tools, system,
messages; a hit needs the prefix byte for byte, found within 20 blocks before a
breakpoint). Without markers a Chat or Responses client in front of Anthropic pays
the full input price on every turn of an agent loop, which resends the whole
conversation. ``place`` marks, on a request built for Anthropic:

1. the last tool definition (tools rarely change within a session);
2. the last system block;
3. the end of the previous turn: the last block before the latest assistant message,
   where the previous request ended and so where its tail breakpoint wrote a cache
   entry. It is read back however many blocks the new turn added;
4. the end of the request (the tail), which writes the entry the next turn reads.

A request that already carries a breakpoint is left as it is: the client chose its
own, and adding more could exceed the limit of four. Thinking blocks cannot carry a
marker; the nearest earlier block of the same message takes it. Messages in the short
form (a string) are all written as one text block, marked or not, so that a message
has the same shape on every turn whether or not it carries the marker that turn.
"""

from __future__ import annotations

from typing import Any

import msgspec

from . import wire

MAX_BREAKPOINTS = 4  # Anthropic rejects a request with more

# The message blocks that may carry ``cache_control`` (not thinking blocks).
_MARKABLE = (
    wire.TextBlock,
    wire.ImageBlock,
    wire.DocumentBlock,
    wire.ToolUseBlock,
    wire.ToolResultBlock,
)

_MARKABLE_TYPES: frozenset[type] = frozenset(_MARKABLE)


# The marker (the default five-minute lifetime), encoded: one shared object that the
# encoder writes as it is, in place of a dict made and encoded for every breakpoint.
# Nothing reads a body's markers back but ``has_breakpoint``, which asks only whether
# one is there. (Typed as the dict it encodes as.)
MARKER: dict[str, Any] = msgspec.Raw(b'{"type":"ephemeral"}')  # type: ignore[assignment]


def has_breakpoint(body: wire.UpstreamRequest, messages_marked: bool | None = None) -> bool:
    """Whether ``body`` carries a marker; ``messages_marked``, when given, says whether
    its messages do (the encoder that built them knows, and a long conversation has
    hundreds of blocks to look at otherwise). Tools held encoded (a tuple) carry none
    (``request.ToolSet``)."""
    tools = body.tools
    if isinstance(tools, list):
        for tool in tools:
            mark = tool.get("cache_control") if isinstance(tool, dict) else tool.cache_control
            if mark is not None:
                return True
    if isinstance(body.system, list) and any(b.cache_control is not None for b in body.system):
        return True
    if messages_marked is not None:
        return messages_marked
    markable = _MARKABLE_TYPES
    for m in body.messages:
        content: Any = m.content  # blocks are told apart by type() (cheap on long bodies)
        if type(content) is not str:
            for b in content:
                if type(b) in markable and b.cache_control is not None:
                    return True
    return False


def place(
    body: wire.UpstreamRequest,
    messages_marked: bool | None = None,
    short_turns: list[wire.InputMessage] | None = None,
    marked_tools: tuple[msgspec.Raw, ...] | None = None,
) -> int:
    """Mark ``body`` in place (see the module docstring); returns how many were placed.
    ``messages_marked``: as for ``has_breakpoint``; ``short_turns``, when given, holds
    every message whose content is a string (others may be in it too), so the rest
    need not be looked at; ``marked_tools``: with tools held encoded (a tuple), the same
    with the last one marked (``request.ToolSet``).

    Plain loops and ``type()`` tests: this runs on every request of an OpenAI client
    to Anthropic, most of them a short turn, where a generator or an ``isinstance``
    against Struct classes was most of its time."""
    if has_breakpoint(body, messages_marked):
        return 0
    placed = 0
    tools = body.tools
    if isinstance(tools, tuple):
        assert marked_tools is not None, "tools held encoded come with their marked form"
        body.tools = marked_tools
        placed += 1
    elif tools:
        last = tools[-1]
        if isinstance(last, dict):  # a typed server tool, kept raw
            tools[-1] = {**last, "cache_control": MARKER}
        else:
            last.cache_control = MARKER
        placed += 1
    system = body.system
    if isinstance(system, str):
        body.system = [wire.TextBlock(text=system, cache_control=MARKER)]
        placed += 1
    elif system:
        system[-1].cache_control = MARKER
        placed += 1
    messages = body.messages
    tail = len(messages) - 1
    previous = -1  # the end of the previous turn: before the latest assistant message
    for i in range(tail, 0, -1):
        if messages[i].role == "assistant":
            previous = i - 1
            break
    text_block = wire.TextBlock
    for m in messages if short_turns is None else short_turns:
        content = m.content
        if type(content) is str and content:
            m.content = [text_block(text=content)]
    if previous >= 0 and placed < MAX_BREAKPOINTS and _mark_message(messages[previous]):
        placed += 1
    if tail >= 0 and placed < MAX_BREAKPOINTS and _mark_message(messages[tail]):
        placed += 1
    return placed


def _mark_message(message: wire.InputMessage) -> bool:
    """Mark the last markable block of ``message``; False when it has none."""
    content: Any = message.content  # (blocks told apart by type(), as in has_breakpoint)
    if type(content) is str:  # empty: nothing to mark
        return False
    markable = _MARKABLE_TYPES
    for b in reversed(content):
        if type(b) in markable:
            b.cache_control = MARKER
            return True
    return False
