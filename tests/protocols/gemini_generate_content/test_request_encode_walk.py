"""The Gemini encoder's one walk over a conversation gives what the general code gives.

``request._contents_out`` makes the usual parts inline (a model turn's text and calls,
a tool result of one text, a user text) and sends a model turn with any other part
through ``_model_out``, any other user part through ``_user_part_out``; it orders only
the user turns of several parts. For any conversation, the Gemini turns and the report
must be those of the general code: ``_model_out``/``_user_part_out`` for every message, then
every response named and every user turn ordered.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols._kit import json_objects
from proxai_asgi.protocols.gemini_generate_content import request, wire

_ids = st.sampled_from(
    ["call_1", "call_2", "gcall_h1_0", "gcall_", "gcall", "gcall`", "toolu_1", ""]
)
_calls = st.builds(
    c.ToolCall,
    id=_ids,
    name=st.sampled_from(["read", "run"]),
    arguments=st.sampled_from(["", "{}", '{"a":1}', "[1]", "{bad", "text"]),
    kind=st.sampled_from(["function", "function", "custom"]),
)
_texts = st.builds(c.Text, text=st.sampled_from(["", "a", '{"k":1}']))
_results = st.builds(
    c.ToolResult,
    call_id=_ids,
    content=st.lists(
        _texts | st.builds(c.Refusal, text=st.just("no")) | st.just(c.Image(data="iVBO")),
        max_size=2,
    ),
    is_error=st.booleans(),
)
_others = st.sampled_from(
    [
        c.Reasoning(text="", thought_signature="c2ln"),
        c.Reasoning(text="thinking", thought_signature="c2ln"),
        c.Reasoning(text="unsigned"),
        c.Refusal(text="no"),
        c.Image(data="iVBO", media_type="image/png"),
        c.File(text="file text"),
        c.ServerToolUse(id="s1", name="web_search"),
    ]
)
_assistant = st.builds(
    c.Message,
    role=st.just("assistant"),
    content=st.lists(st.one_of(_texts, _calls, _calls, _others, _results), max_size=4),
)
_user = st.builds(
    c.Message,
    role=st.sampled_from(["user", "tool"]),
    content=st.lists(st.one_of(_results, _results, _texts, _others, _calls), max_size=3),
)


def _reference(messages: list[c.Message], report: TranslationReport) -> list[wire.UpstreamContent]:
    turns: list[wire.UpstreamContent] = []
    names: dict[str, str] = {}
    answers: list[wire.FunctionResponse] = []
    for m in messages:
        if m.role == "assistant":
            role, parts = "model", request._model_out(m.content, names, report)
        else:
            role, parts = "user", []
            for p in m.content:
                request._user_part_out(p, parts, names, answers, report)
        if not parts:
            continue
        if turns and turns[-1].role == role:
            turns[-1].parts.extend(parts)
        else:
            turns.append(wire.UpstreamContent(role, parts))
    for fr in answers:
        fr.name = names.get(fr.name, fr.name)
    for t in turns:
        if t.role == "user":
            t.parts.sort(key=lambda p: type(p) is not wire.ResponsePart)
    return turns


def _outcome(walk: object, messages: list[c.Message]) -> tuple[object, ...]:
    report = TranslationReport()
    try:
        turns = walk(messages, report)  # type: ignore[operator]
    except ProxyError as e:
        return "error", e.status, e.message, e.param
    return "ok", msgspec.json.encode(turns), report.dropped


@settings(max_examples=600, deadline=None)
@given(st.lists(_assistant | _user, max_size=6))
def test_the_walk_is_what_the_general_code_makes(messages: list[c.Message]) -> None:
    assert _outcome(request._contents_out, messages) == _outcome(_reference, messages)


@pytest.mark.parametrize("first", ["tool", "user"])
def test_a_merged_user_turn_puts_its_responses_first(first: str) -> None:
    result = c.ToolResult(call_id="call_1", content=[c.Text(text="ok")])
    text = c.Text(text="and then")
    messages = [
        c.Message(role="assistant", content=[c.ToolCall(id="call_1", name="read")]),
        c.Message(role="user", content=[text]),
        c.Message(role="tool", content=[result]),
    ]
    if first == "tool":
        messages[1:] = messages[2:0:-1]
    turns = request._contents_out(messages, TranslationReport())
    assert [type(p) for p in turns[1].parts] == [wire.ResponsePart, wire.TextPart]


def test_the_upstream_body_leaves_out_what_it_does_not_hold() -> None:
    options = UpstreamOptions()
    empty = c.Request(model="m", messages=[])
    assert request.encode_request(empty, TranslationReport(), options) == b"{}"
    call = c.ToolCall(id="gcall_h1_0", name="read", arguments='{"a":1}')
    one = c.Request(model="m", messages=[c.Message(role="assistant", content=[call])])
    assert request.encode_request(one, TranslationReport(), options) == (
        b'{"contents":[{"role":"model","parts":[{"thoughtSignature":'
        b'"skip_thought_signature_validator","functionCall":{"name":"read","args":{"a":1}}}]}]}'
    )


@given(st.text(alphabet="acgl_`z{" + chr(0x10FFFF), max_size=8))
def test_a_prefix_range_holds_what_starts_with_the_prefix(s: str) -> None:
    for prefix in (request.DERIVED_CALL_PREFIX, "g", "l`"):
        low, high = request._prefix_range(prefix)
        assert (low <= s < high) == s.startswith(prefix)


@pytest.mark.parametrize("is_error", [False, True])
@pytest.mark.parametrize("text", ["", "done", '{"k":1}', "{bad", "[1]", " {}"])
def test_a_one_text_result_is_what_the_general_code_makes(text: str, is_error: bool) -> None:
    result = c.ToolResult(call_id="call_1", content=[c.Text(text=text)], is_error=is_error)
    messages = [c.Message(role="tool", content=[result])]
    assert _outcome(request._contents_out, messages) == _outcome(_reference, messages)


def _call_outcome(make: object) -> tuple[object, ...]:
    try:
        call = make()  # type: ignore[operator]
    except ProxyError as e:
        return "error", e.status, e.message, e.param
    return "ok", msgspec.json.encode(call)


_arguments = st.sampled_from(["", "{}", " { } ", "[1]", "{bad", "text", "null", '"{}"']) | (
    st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=3), max_size=3).map(
        lambda d: msgspec.json.encode(d).decode().replace(",", ", ")
    )
)


@settings(max_examples=300, deadline=None)
@given(_arguments, st.sampled_from(["function", "custom"]), st.booleans())
def test_a_call_sends_the_args_its_arguments_decode_to(
    arguments: str, kind: str, general: bool
) -> None:
    """Kept encoded (``json_objects``), a call's ``args`` are the bytes of the object
    ``_args_out`` decodes, the first time and from the table; errors are the same."""
    call = c.ToolCall(id="call_1", name="f", arguments=arguments, kind=kind)  # type: ignore[arg-type]
    content: list[c.Part] = [call]
    if general:  # a signed reasoning part first sends the turn through ``_model_out``
        content.insert(0, c.Reasoning(text="", thought_signature="c2ln"))
    messages = [c.Message(role="assistant", content=content)]

    def walked() -> object:
        turn = request._contents_out(messages, TranslationReport())[0]
        return turn.parts[-1].function_call  # type: ignore[union-attr]

    def reference() -> object:
        return wire.FunctionCall(name="f", args=request._args_out(arguments, kind), id="call_1")

    json_objects.forget()
    expected = _call_outcome(reference)
    for _ in range(3):  # not seen (no table), seen once (put in it), then found there
        assert _call_outcome(walked) == expected


_CALL = c.ToolCall(id="call_1", name="f", arguments='{"a":1}')
_RESULT = c.ToolResult(call_id="call_1", content=[c.Text(text="ok")])
_SAID = c.Text(text="said")


_NEIGHBOURS = [None, "assistant", "user", "tool"]


@pytest.mark.parametrize("after", [*_NEIGHBOURS, "user text"])
@pytest.mark.parametrize("before", _NEIGHBOURS)
@pytest.mark.parametrize("role", ["assistant", "user", "tool"])
@pytest.mark.parametrize("content", [[_RESULT], [_SAID, _CALL], [_CALL, _SAID], [_SAID]])
def test_the_whole_turns_are_what_the_general_code_makes(
    before: str | None, role: str, content: list[c.Part], after: str | None
) -> None:
    """The agent loop's turns built whole, in any role, after any turn, and followed by
    any turn (one of the same role is merged into them)."""

    def neighbour(role: str) -> c.Message:
        if role == "user text":
            return c.Message(role="user", content=[_SAID])
        earlier = [_SAID, _CALL] if role == "assistant" else [_RESULT]
        return c.Message(role=role, content=earlier)  # type: ignore[arg-type]

    messages = [c.Message(role=role, content=content)]  # type: ignore[arg-type]
    if before is not None:
        messages.insert(0, neighbour(before))
    if after is not None:
        messages.append(neighbour(after))
    assert _outcome(request._contents_out, messages) == _outcome(_reference, messages)
