"""The rounds of a proxy-run search spliced into the one answer the client sees."""

from __future__ import annotations

from proxai_asgi import canonical as c
from proxai_asgi.codec import fold
from proxai_asgi.search.rounds import Rounds, history_sources


def _round_with_search(query: str = "py") -> list[c.StreamEvent]:
    return [
        c.MessageStart(id="r1", model="m", usage=c.Usage(input_tokens=10)),
        c.BlockStart(index=0, kind="text"),
        c.BlockDelta(index=0, text="Let me look."),
        c.BlockStop(index=0),
        c.BlockStart(index=1, kind="tool_call", call_id="call_9", name="web_search"),
        c.BlockDelta(index=1, text='{"query": '),
        c.BlockDelta(index=1, text=f'"{query}"}}'),
        c.BlockStop(index=1),
        c.Finish(stop_reason="tool_use", usage=c.Usage(input_tokens=10, output_tokens=5)),
    ]


def _answer_round(text: str) -> list[c.StreamEvent]:
    return [
        c.MessageStart(id="r2", model="m"),
        c.BlockStart(index=0, kind="text"),
        c.BlockDelta(index=0, text=text[:5]),
        c.BlockDelta(index=0, text=text[5:]),
        c.BlockStop(index=0),
        c.Finish(
            stop_reason="end_turn", usage=c.Usage(input_tokens=30, output_tokens=7, cached_tokens=4)
        ),
    ]


HIT = c.SearchHit(url="https://a.example", title="A", snippet="alpha")


def test_the_rounds_become_one_answer_with_the_search_where_it_happened() -> None:
    rounds = Rounds("web_search")
    out = rounds.feed(_round_with_search())
    assert [type(e).__name__ for e in out] == [
        "MessageStart",
        "BlockStart",
        "BlockDelta",
        "BlockStop",
    ]
    calls = rounds.searches()
    assert [(k.id, k.arguments) for k in calls] == [("call_9", '{"query": "py"}')]
    assistant = rounds.assistant()  # what goes back to the model: its text and the call
    assert [type(p).__name__ for p in assistant.content] == ["Text", "ToolCall"]
    use = c.ServerToolUse(id="call_9", name="web_search", input={"query": "py"}, hits=[HIT])
    searched = rounds.searched_event(use)
    rounds.next_round()
    out2 = rounds.feed(_answer_round("Python 3.14 is out [1]."))
    fin = rounds.finish()
    events = [*out, searched, *out2, fin]
    # one message start, indexes never reused, the search between the blocks
    assert sum(type(e) is c.MessageStart for e in events) == 1
    starts = [e.index for e in events if isinstance(e, c.BlockStart)]
    assert starts == [0, 2] and searched.index == 1
    cites = [e for e in events if isinstance(e, c.Citations)]
    assert len(cites) == 1 and cites[0].index == 2
    assert cites[0].citations[0].url == "https://a.example"
    stop = next(i for i, e in enumerate(events) if isinstance(e, c.BlockStop) and e.index == 2)
    assert events.index(cites[0]) == stop - 1  # before its block stops
    # usage summed over the rounds, the search counted
    assert fin.stop_reason == "end_turn"
    assert (fin.usage.input_tokens, fin.usage.output_tokens, fin.usage.cached_tokens) == (40, 12, 4)
    assert fin.usage.server_tool_requests == 1
    whole = fold(events)
    assert [type(p).__name__ for p in whole.content] == ["Text", "ServerToolUse", "Text"]


def test_a_failed_search_is_shown_but_not_counted() -> None:
    rounds = Rounds("web_search")
    rounds.feed(_round_with_search())
    rounds.searched_event(c.ServerToolUse(id="x", name="web_search", error="unavailable"))
    rounds.next_round()
    rounds.feed(_answer_round("No luck [1]."))
    assert rounds.finish().usage.server_tool_requests == 0
    assert rounds.sources == []


def test_a_client_tool_called_beside_a_search_ends_the_answer() -> None:
    rounds = Rounds("web_search")
    events = _round_with_search()
    events[-1:-1] = [
        c.BlockStart(index=2, kind="tool_call", call_id="call_b", name="Bash"),
        c.BlockDelta(index=2, text="{}"),
        c.BlockStop(index=2),
    ]
    out = rounds.feed(events)
    assert rounds.searches() == []
    assert any(isinstance(e, c.BlockStart) and e.name == "Bash" for e in out)
    assert not any(isinstance(e, c.BlockStart) and e.name == "web_search" for e in out)


def test_an_answer_without_a_search_passes_as_it_came() -> None:
    rounds = Rounds("web_search")
    events = _answer_round("Plain [1].")
    out = rounds.feed(events)
    assert rounds.searches() == []
    assert out == [e for e in events if not isinstance(e, c.Finish)]  # no sources: no citations


def test_the_earlier_searches_sources_keep_their_numbers() -> None:
    use = c.ServerToolUse(id="s", name="web_search", hits=[HIT])
    messages = [c.Message(role="assistant", content=[use])]
    rounds = Rounds("web_search", history_sources(messages))
    out = rounds.feed(_answer_round("As found [1]."))
    assert any(isinstance(e, c.Citations) for e in out)


def test_a_loop_cut_short_says_pause_turn() -> None:
    rounds = Rounds("web_search")
    rounds.feed(_round_with_search())
    assert rounds.finish("pause_turn").stop_reason == "pause_turn"
