"""A cheap local token estimate, for figures a client needs before the upstream has
told us (Anthropic ``message_start.usage.input_tokens``) and for count_tokens toward
upstreams that cannot count. Documented as about four characters per token."""

from __future__ import annotations

from . import canonical as c


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


def estimate_input_tokens(request: c.Request) -> int:
    chars = sum(len(t.text) for t in request.system)
    for m in request.messages:
        chars += 4 + sum(_part_chars(p) for p in m.content)
    for t in request.tools:
        chars += len(t.name) + len(t.description or "") + len(str(t.parameters or ""))
    return max(1, (chars + 3) // 4)
