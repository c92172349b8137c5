"""``_messages_out`` builds an agent loop's usual turns whole (a tool turn of one
plain-text result; an assistant turn of a text and one call, a Gemini thought
signature between them or not; a turn of one text) instead of going part by part.
A shortcut only: every conversation here is encoded as production does and with the
general loop forced (an empty text part appended to every turn, which that loop skips
and which the whole-turn paths do not take), and both must give the same bytes, the
same report and the same error."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols._kit import json_objects
from proxai_asgi.protocols.anthropic_messages import cache_breakpoints, request, wire

from ._strategies import JSON_VALUES

_IDS = st.sampled_from(["call_1", "call_2", "bad id!"])
_CACHE = st.none() | st.just({"type": "ephemeral"})
_KIND = st.sampled_from(["function", "function", "custom"])
_TEXT = st.builds(
    c.Text,
    text=st.sampled_from(["", "said"]),
    cache_control=_CACHE,
    citations=st.none() | st.just([c.Citation(url="https://example.com")]),
)
_RESULT = st.builds(
    c.ToolResult,
    call_id=_IDS,
    content=st.just([c.Text(text="out")]) | st.lists(_TEXT, max_size=2),
    is_error=st.booleans(),
    kind=_KIND,
    cache_control=_CACHE,
)
_CALL = st.builds(
    c.ToolCall,
    id=_IDS,
    name=st.just("sh"),
    arguments=st.sampled_from(["", "{}", '{"a": [1, 2.5]}', "[1]", "nope"]),
    kind=_KIND,
)
_THOUGHT = st.sampled_from(
    [
        c.Reasoning(thought_signature="gem"),
        c.Reasoning(text="t", signature="anthropic-signature"),
        c.Reasoning(redacted="r"),
    ]
)
_TOOL_TURN = st.builds(lambda r: c.Message(role="tool", content=[r]), _RESULT)


def _assistant_turn(
    said: c.Text | None, thought: c.Reasoning | None, call: c.ToolCall
) -> c.Message:
    parts: list[c.Part] = [call] if thought is None else [thought, call]
    return c.Message(role="assistant", content=parts if said is None else [said, *parts])


_ASSISTANT_TURN = st.builds(_assistant_turn, st.none() | _TEXT, st.none() | _THOUGHT, _CALL)
_USER_TEXT = st.just(c.Message(role="user", content=[c.Text(text="hi")]))
_OTHER_TURN = _USER_TEXT | st.builds(
    c.Message,
    role=st.sampled_from(["user", "assistant", "tool"]),
    content=st.lists(_TEXT | _RESULT | _CALL, max_size=2),
)
_CONVERSATION = st.lists(_TOOL_TURN | _ASSISTANT_TURN | _OTHER_TURN, min_size=1, max_size=6)


def _outcome(messages: list[c.Message], lossy: bool) -> tuple[Any, ...]:
    report = TranslationReport(lossy)
    try:
        out, marked, _short = request._messages_out(messages, report)
    except ProxyError as e:
        return ("error", e.status, e.message, e.param)
    return ("ok", msgspec.json.encode(out), marked, report.dropped)


def _general(messages: list[c.Message]) -> list[c.Message]:
    return [c.Message(role=m.role, content=[*m.content, c.Text(text="")]) for m in messages]


@settings(max_examples=500, deadline=None)
@given(_CONVERSATION, st.booleans())
def test_whole_turns_encode_as_the_general_loop_does(
    messages: list[c.Message], lossy: bool
) -> None:
    assert _outcome(messages, lossy) == _outcome(_general(messages), lossy)


def test_an_agent_loop_takes_the_whole_turn_paths_and_merges_results() -> None:
    said = c.Text(text="reading")
    call = c.ToolCall(id="call_1", name="sh", arguments='{"a":1}')
    result = c.ToolResult(call_id="call_1", content=[c.Text(text="out")])
    messages = [
        c.Message(role="user", content=[c.Text(text="go")]),
        c.Message(role="assistant", content=[said, c.Reasoning(thought_signature="g"), call]),
        c.Message(role="tool", content=[result]),
        c.Message(role="tool", content=[c.ToolResult(call_id="call_2", is_error=True)]),
    ]
    outcome = _outcome(messages, False)
    assert outcome == _outcome(_general(messages), False)
    assert outcome[1] == (
        b'[{"role":"user","content":"go"},{"role":"assistant","content":['
        b'{"type":"text","text":"reading"},'
        b'{"type":"tool_use","id":"call_1","name":"sh","input":{"a":1}}]},'
        b'{"role":"user","content":['
        b'{"type":"tool_result","tool_use_id":"call_1","content":"out"},'
        b'{"type":"tool_result","tool_use_id":"call_2","is_error":true}]}]'
    )
    assert outcome[3] == ["reasoning"]


def test_a_result_after_a_user_text_is_moved_before_it() -> None:
    result = c.ToolResult(call_id="call_1", content=[c.Text(text="out")])
    messages = [
        c.Message(
            role="assistant", content=[c.Text(text="reading"), c.ToolCall(id="call_1", name="sh")]
        ),
        c.Message(role="user", content=[c.Text(text="hi")]),
        c.Message(role="tool", content=[result]),
    ]
    outcome = _outcome(messages, False)
    assert outcome == _outcome(_general(messages), False)
    assert outcome[1].endswith(
        b'{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"out"},'
        b'{"type":"text","text":"hi"}]}]'
    )


def test_the_result_of_a_dropped_custom_call_is_dropped_too() -> None:
    call = c.ToolCall(id="call_1", name="patch", arguments="raw", kind="custom")
    messages = [
        c.Message(role="assistant", content=[c.Text(text="patching"), call]),
        c.Message(
            role="tool", content=[c.ToolResult(call_id="call_1", content=[c.Text(text="ok")])]
        ),
        c.Message(role="user", content=[c.Text(text="next")]),
    ]
    outcome = _outcome(messages, True)
    assert outcome == _outcome(_general(messages), True)
    assert b"tool_result" not in outcome[1]


def _placed(messages: list[c.Message], told: bool) -> tuple[int, bytes]:
    out, marked, short = request._messages_out(messages, TranslationReport(True))
    body = wire.UpstreamRequest(model="m", messages=out, max_tokens=1)
    if told:
        placed = cache_breakpoints.place(body, messages_marked=marked, short_turns=short)
    else:
        placed = cache_breakpoints.place(body)
    return placed, msgspec.json.encode(body)


@settings(max_examples=150, deadline=None)
@given(_CONVERSATION)
def test_breakpoints_placed_with_the_short_turns_named_are_placed_as_when_searched(
    messages: list[c.Message],
) -> None:
    try:
        out, _marked, short = request._messages_out(messages, TranslationReport(True))
    except ProxyError:
        return  # (a call's arguments that are not JSON: no body to mark)
    assert [m for m in out if isinstance(m.content, str)] == [
        m for m in short if isinstance(m.content, str)
    ]
    assert _placed(messages, told=True) == _placed(messages, told=False)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.text(max_size=4), JSON_VALUES),
    st.sampled_from([None, 1]),
    st.booleans(),
    st.booleans(),
)
def test_a_calls_input_is_the_encoded_object_of_its_arguments_however_written(
    value: dict[str, Any], indent: int | None, ascii_only: bool, long: bool
) -> None:
    if long:  # arguments too long to be kept for the next turn
        value = {**value, "pad": "x" * 600}
    args = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    messages = [
        c.Message(
            role="assistant",
            content=[c.Text(text="t"), c.ToolCall(id="call_1", name="sh", arguments=args)],
        ),
        c.Message(
            role="assistant",  # the general loop's call (a second call in a turn)
            content=[c.ToolCall(id="call_2", name="sh", arguments=args)] * 2,
        ),
    ]
    decoded = msgspec.json.decode(args)
    use = {"type": "tool_use", "id": "call_1", "name": "sh", "input": decoded}
    other = {**use, "id": "call_2"}
    want = msgspec.json.encode(
        [
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "t"}, use, other, other],
            }
        ]
    )
    for _ in range(2):  # the second time, from what the first kept
        assert _outcome(messages, False)[1] == want


@pytest.mark.parametrize(
    ("arguments", "error"),
    [("nope", "are not valid JSON"), ("[1]", "must be a JSON object")],
)
def test_arguments_that_are_not_an_object_are_400_every_time(arguments: str, error: str) -> None:
    call = c.ToolCall(id="call_1", name="sh", arguments=arguments)
    for _ in range(2):  # (nothing is kept from a failure)
        outcome = _outcome([c.Message(role="assistant", content=[c.Text(text="t"), call])], False)
        assert outcome[0] == "error"
        assert outcome[3] == "messages[0].content[1].arguments"
        assert error in outcome[2]


def test_the_kept_inputs_are_bounded() -> None:
    for n in range(json_objects.RAW_OBJECTS_MAX + 10):
        request._raw_input(f'{{"n":{n}}}', 0, 0)
        assert len(json_objects.RAW_OBJECTS) <= json_objects.RAW_OBJECTS_MAX
    assert bytes(request._raw_input('{"n": 1}', 0, 0)) == b'{"n":1}'


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXT, max_size=3))
def test_a_lone_system_text_takes_the_short_form_as_the_general_path_does(
    system: list[c.Text],
) -> None:
    """``_system_out``'s usual system prompt (one plain text) against the general path,
    forced by an empty text, which it skips."""
    assert request._system_out(system) == request._system_out([*system, c.Text(text="")])
