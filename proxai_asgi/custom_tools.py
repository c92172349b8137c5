"""Freeform (``custom``) tools toward upstreams that only have JSON function tools.

Codex's ``apply_patch`` is a Responses ``custom`` tool whose input is raw text under a
Lark grammar. Toward Anthropic (and Chat servers without custom tools) it becomes a
function tool with one string field, ``input``, whose description carries the grammar;
the upstream's calls of it are unwrapped on the way back, so the client sees its own
``custom_tool_call`` and never learns the difference. This is a canonical->canonical
step of the hub; no codec knows about it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from . import canonical as c

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()
FIELD = "input"
_NONE: frozenset[str] = frozenset()


def _wrapped_tool(tool: c.Tool) -> c.Tool:
    desc = tool.description or ""
    fmt = tool.format or {}
    if fmt.get("type") == "grammar":
        desc += (
            f"\n\nPass the tool's raw input as the string field `{FIELD}`. It must follow this "
            f"{fmt.get('syntax', '')} grammar:\n{fmt.get('definition', '')}"
        )
    else:
        desc += f"\n\nPass the tool's raw (freeform text) input as the string field `{FIELD}`."
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {FIELD: {"type": "string", "description": "The raw tool input."}},
        "required": [FIELD],
        "additionalProperties": False,
    }
    return c.Tool(name=tool.name, kind="function", description=desc.strip(), parameters=schema)


def wrap(request: c.Request) -> frozenset[str]:
    """Rewrite custom tools (and their calls, results and choice) as function tools,
    in place. Returns the names wrapped, which ``Unwrapper`` needs."""
    for t in request.tools:
        if t.kind == "custom":
            break
    else:  # none (the usual request): nothing to rewrite, no generator to run
        return _NONE
    names = frozenset(t.name for t in request.tools if t.kind == "custom")
    request.tools = [_wrapped_tool(t) if t.kind == "custom" else t for t in request.tools]
    for m in request.messages:
        for p in m.content:
            if isinstance(p, c.ToolCall) and p.kind == "custom":
                p.kind = "function"
                p.arguments = _enc.encode({FIELD: p.arguments}).decode()
            elif isinstance(p, c.ToolResult) and p.kind == "custom":
                p.kind = "function"
    tc = request.tool_choice
    if tc is not None and tc.kind == "custom":
        tc.kind = "function"
    return names


def unwrap_input(arguments: str) -> str:
    """The raw input from a wrapped call's JSON arguments (the arguments themselves
    when the model did not follow the wrapper schema, so nothing is lost)."""
    try:
        obj = _dec.decode(arguments)
    except msgspec.DecodeError:
        return arguments
    if isinstance(obj, dict) and isinstance(obj.get(FIELD), str):
        return str(obj[FIELD])
    return arguments


def unwrap_response(response: c.Response, names: frozenset[str]) -> None:
    for p in response.content:
        if isinstance(p, c.ToolCall) and p.name in names and p.kind == "function":
            p.kind = "custom"
            p.arguments = unwrap_input(p.arguments)


class StreamUnwrapper:
    """Stream filter: a wrapped call's JSON argument fragments are held until its
    block stops, then sent as one raw-input delta (the client reads custom tool
    input from the item's done event anyway)."""

    __slots__ = ("_held", "_names")

    def __init__(self, names: frozenset[str]) -> None:
        self._names = names
        self._held: dict[int, list[str]] = {}

    def feed(self, ev: c.StreamEvent) -> list[c.StreamEvent]:
        if isinstance(ev, c.BlockStart):
            if ev.kind == "tool_call" and ev.name in self._names:
                self._held[ev.index] = []
                ev.tool_kind = "custom"
            return [ev]
        if isinstance(ev, c.BlockDelta):
            held = self._held.get(ev.index)
            if held is not None:
                held.append(ev.text)
                return []
            return [ev]
        if isinstance(ev, c.BlockStop):
            held = self._held.pop(ev.index, None)
            if held is not None:
                raw = unwrap_input("".join(held))
                return [c.BlockDelta(index=ev.index, text=raw), ev] if raw else [ev]
        return [ev]
