"""Web search in Anthropic streams, both ways.

Upstream: a ``server_tool_use`` block (its input streamed as ``input_json_delta``) and
the ``web_search_tool_result`` block that answers it become one ``ServerTool`` event,
once the result is known. Client: a ``ServerTool`` becomes those two blocks.

Ordering (``SearchHold``): Claude Code expects the search blocks before the text that
cites them, but an upstream may only say what it searched once its text is out (Gemini
sends its grounding on the last chunk). So for a client that offered a search tool,
the encoder holds the answer's events until the first search (or the end): when the
held text cites a search it found only afterwards, the search blocks go first; else the
events keep their order. A request without a search tool streams as before; one with it
streams from its first search on (Anthropic, Responses and proxy-run searches come
before the text they ground, so only an answer's preamble waits).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ... import canonical as c
from .._kit.hosted_code import CODE
from . import code_exec, wire
from .response import search_blocks, search_result_in

_json = msgspec.json.Decoder()


class ServerBlocks:
    """An upstream's server tool blocks, by their upstream index, until each call's
    result arrives."""

    __slots__ = ("_calls", "_inputs")

    def __init__(self) -> None:
        self._calls: dict[str, c.ServerToolUse] = {}
        self._inputs: dict[int, tuple[c.ServerToolUse, list[str]]] = {}

    def start(self, upstream_index: int, block: wire.OutputBlock) -> c.ServerToolUse | None:
        """A ``server_tool_use`` is kept; a ``web_search_tool_result`` gives back its
        call, complete (None for any other block)."""
        if type(block) is wire.ServerToolUseBlock:
            use = c.ServerToolUse(id=block.id, name=block.name, input=block.input or {})
            self._calls[block.id] = use
            self._inputs[upstream_index] = (use, [])
            return None
        if type(block) is wire.WebSearchToolResultBlock:
            found = self._calls.pop(block.tool_use_id, None)
            use = found or c.ServerToolUse(id=block.tool_use_id, name="web_search")
            search_result_in(use, block.content)
            return use
        if code_exec.is_result(block):
            found = self._calls.pop(block.tool_use_id, None)  # type: ignore[union-attr]
            if found is not None:  # (a result without its call says nothing to run)
                code_exec.result_in(found, block.content)  # type: ignore[union-attr]
                return found if found.name == CODE else None
        return None

    def delta(self, upstream_index: int, delta: wire.Delta) -> None:
        held = self._inputs.get(upstream_index)
        if held is not None and type(delta) is wire.InputJsonDelta:
            held[1].append(delta.partial_json)

    def stop(self, upstream_index: int) -> None:
        held = self._inputs.pop(upstream_index, None)
        if held is None or not held[1]:
            return
        try:
            value: Any = _json.decode("".join(held[1]))
        except (msgspec.DecodeError, ValueError):
            return
        if isinstance(value, dict):
            held[0].input = value


def search_frames(use: c.ServerToolUse, first: int, frame: Any) -> bytes:
    """The two blocks of a search (or a code run) at wire indices ``first`` and
    ``first + 1``: the call (started with an empty input, then one ``input_json_delta``,
    as the API streams it) and its result (whole in its start)."""
    call, result = code_exec.blocks_out(use) if use.name == CODE else search_blocks(use)
    partial = msgspec.json.encode(call.input).decode()
    return b"".join(
        (
            frame(
                wire.ContentBlockStartEvent(
                    index=first,
                    content_block=wire.ServerToolUseBlock(id=call.id, name=call.name, input={}),
                )
            ),
            frame(
                wire.ContentBlockDeltaEvent(
                    index=first, delta=wire.InputJsonDelta(partial_json=partial)
                )
            ),
            frame(wire.ContentBlockStopEvent(index=first)),
            frame(wire.ContentBlockStartEvent(index=first + 1, content_block=result)),
            frame(wire.ContentBlockStopEvent(index=first + 1)),
        )
    )


class SearchHold:
    """The events of an answer held until its first search (see the module
    docstring). ``take`` returns the events to encode now, in order."""

    __slots__ = ("_events", "_searches", "holding")

    def __init__(self) -> None:
        self.holding = True
        self._events: list[c.StreamEvent] = []
        self._searches: list[c.StreamEvent] = []

    def take(self, event: c.StreamEvent) -> list[c.StreamEvent]:
        t = type(event)
        if t is c.MessageStart:
            return [event]
        if t is c.ServerTool:
            self._searches.append(event)  # a run of searches goes out together
            return []
        if not self._searches and t is not c.Finish and t is not c.StreamError:
            self._events.append(event)
            return []
        self.holding = False
        held, searches = self._events, self._searches
        self._events, self._searches = [], []
        cited = any(type(e) is c.Citations for e in held)
        return [*searches, *held, event] if cited else [*held, *searches, event]
