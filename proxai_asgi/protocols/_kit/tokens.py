"""A cheap local token estimate, for figures a client needs before the upstream has
told us (Anthropic ``message_start.usage.input_tokens``) and for count_tokens toward
upstreams that cannot count. Documented as about four characters per token."""

from __future__ import annotations

from typing import Any

import msgspec

from ... import canonical as c
from . import tool_schemas


def _part_chars(p: c.Part) -> int:
    if isinstance(p, (c.Text, c.Refusal, c.Reasoning)):
        return len(p.text)
    if isinstance(p, c.ToolCall):
        return len(p.name) + len(p.arguments)
    if isinstance(p, c.ToolResult):
        return sum(_part_chars(x) for x in p.content)
    if isinstance(p, (c.Image, c.File)):
        return 1600 * 4 // 4  # images and documents: a flat allowance of ~1,600 tokens
    return 0


def _schema_chars(schema: dict[str, Any] | msgspec.Raw | None) -> int:
    """The length of the schema dict's ``str`` (counted so since the first estimate)."""
    if type(schema) is msgspec.Raw:
        return tool_schemas.facts(schema).text_length
    return len(str(schema or ""))


def estimate_input_tokens(request: c.Request) -> int:
    chars = sum(len(t.text) for t in request.system)
    for m in request.messages:
        chars += 4 + sum(_part_chars(p) for p in m.content)
    for t in request.tools:
        chars += len(t.name) + len(t.description or "") + _schema_chars(t.parameters)
    return max(1, (chars + 3) // 4)
