"""The rounds of a proxy-run search spliced into one answer (sans-IO).

Each round is one upstream answer: text the client sees, and calls of the search
function it does not. ``Rounds`` takes each round's canonical events and gives the
client's: one ``MessageStart`` (the first round's), block indexes that never repeat
across rounds, the function's calls held back (their search goes to the client as a
``ServerTool`` once it ran), citations of the numbered sources before each text block
stops, and, at the end, one ``Finish`` whose usage sums the rounds' and counts the
searches. What a round said goes back to the model with the search results
(``assistant``)."""

from __future__ import annotations

from typing import cast

import msgspec

from .. import canonical as c
from ..codec import fold
from . import offer


class Rounds:
    """One answer's rounds; ``feed`` each round's events, then ``searches`` says
    what it asked for, ``next_round`` starts the next one, ``finish`` ends it all."""

    def __init__(self, name: str, sources: list[c.SearchHit] | None = None) -> None:
        self.name = name
        self.sources: list[c.SearchHit] = list(sources or ())  # numbered from 1
        self.usage = c.Usage()
        self.searched = 0  # searches run (with results) over all rounds
        self.stop: c.StopReason | None = None
        self.finish_event: c.Finish | None = None
        self.started = False
        self.model = ""  # the model the first round names
        self._offset = 0  # added to this round's indexes
        self._next = 0  # the first index no round used yet
        self._events: list[c.StreamEvent] = []  # this round's own, as the upstream gave them
        self._calls: dict[int, c.ToolCall] = {}  # the function's calls, by local index
        self._client_calls = 0  # calls of the client's tools this round
        self._texts: dict[int, list[str]] = {}  # text blocks' text, by local index

    # ------------------------------------------------------------------ feeding

    def feed(self, events: list[c.StreamEvent]) -> list[c.StreamEvent]:
        """This round's events -> the client's."""
        out: list[c.StreamEvent] = []
        for ev in events:
            kind = type(ev)
            if kind is c.MessageStart:
                self._events.append(ev)
                if not self.started:
                    self.started = True
                    self.model = cast(c.MessageStart, ev).model
                    out.append(ev)
                continue
            if kind is c.Finish:
                fin = cast(c.Finish, ev)
                self.finish_event = fin
                self.stop = fin.stop_reason
                _add(self.usage, fin.usage)
                continue
            if kind is c.StreamError:
                out.append(ev)
                continue
            self._events.append(ev)
            index = cast(c.BlockStop, ev).index  # every other event has one
            if kind is c.BlockStart:
                start = cast(c.BlockStart, ev)
                if start.kind == "tool_call" and start.name == self.name:
                    self._calls[index] = c.ToolCall(id=start.call_id or "", name=self.name)
                    continue
                if start.kind == "tool_call":
                    self._client_calls += 1
                elif start.kind == "text":
                    self._texts[index] = []
                self._next = max(self._next, self._offset + index + 1)
            elif index in self._calls:
                if kind is c.BlockDelta:
                    self._calls[index].arguments += cast(c.BlockDelta, ev).text
                continue
            elif kind is c.BlockDelta and index in self._texts:
                self._texts[index].append(cast(c.BlockDelta, ev).text)
            elif kind is c.BlockStop and index in self._texts:
                cites = self._cite(index)
                if cites is not None:
                    out.append(cites)
            out.append(msgspec.structs.replace(ev, index=self._offset + index))
        return out

    def _cite(self, index: int) -> c.Citations | None:
        if not self.sources:
            return None
        found = offer.citations("".join(self._texts[index]), self.sources)
        return c.Citations(index=self._offset + index, citations=found) if found else None

    # ------------------------------------------------------------------ between

    def searches(self) -> list[c.ToolCall]:
        """The function's calls of the round that just ended, when the loop goes on
        for them: none when the round also called a client tool (that ends the
        answer: the client runs its tool) or ended otherwise."""
        if self._client_calls or not self._calls:
            return []
        return list(self._calls.values())

    def assistant(self) -> c.Message:
        """What the round said, as the conversation's next assistant turn."""
        start = c.MessageStart(id="", model="")
        fin = c.Finish(stop_reason="tool_use", usage=c.Usage())
        return c.Message(role="assistant", content=fold([start, *self._events, fin]).content)

    def searched_event(self, use: c.ServerToolUse) -> c.ServerTool:
        """A search that ran, for the client, its hits numbered after the others."""
        event = c.ServerTool(index=self._next, use=use)
        self._next += 1
        if use.hits is not None:
            self.searched += 1
            self.sources.extend(use.hits)
        return event

    def next_round(self) -> None:
        self._offset = self._next
        self._events = []
        self._calls = {}
        self._client_calls = 0
        self._texts = {}
        self.finish_event = None

    # ------------------------------------------------------------------ the end

    def finish(self, stop: c.StopReason | None = None) -> c.Finish:
        """The answer's one terminal event: the last round's stop (or ``stop``),
        the rounds' usage summed, the searches counted."""
        usage = msgspec.structs.replace(self.usage)
        usage.server_tool_requests += self.searched
        last = self.finish_event
        return c.Finish(
            stop_reason=stop or self.stop,
            usage=usage,
            stop_sequence=last.stop_sequence if last is not None else None,
            refusal_explanation=last.refusal_explanation if last is not None else None,
        )


def _add(total: c.Usage, usage: c.Usage) -> None:
    total.input_tokens += usage.input_tokens
    total.output_tokens += usage.output_tokens
    total.cached_tokens += usage.cached_tokens
    total.cache_creation_tokens += usage.cache_creation_tokens
    total.cache_creation_1h_tokens += usage.cache_creation_1h_tokens
    total.reasoning_tokens += usage.reasoning_tokens
    total.server_tool_requests += usage.server_tool_requests


def history_sources(messages: list[c.Message]) -> list[c.SearchHit]:
    """The hits of the conversation's earlier searches, in order: the numbers the
    model saw them under (``offer.replayed``) go on being theirs."""
    return [
        h
        for m in messages
        for p in m.content
        if type(p) is c.ServerToolUse and p.name == offer.TOOL_NAME
        for h in p.hits or ()
    ]
