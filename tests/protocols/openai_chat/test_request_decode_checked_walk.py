"""The Chat decoder checks the messages in the walk that converts them
(``request._messages_in``) and runs ``validate.check_messages`` only when that walk sees
something to reject, or fails. Here any mix of messages, valid or not, is decoded as
production does and with the whole check run first (as it ran before the walk did the
usual part of it): the same canonical request and report, or the same 400."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.openai_chat import request, validate
from proxai_asgi.protocols.openai_chat import wire as w

_ID = st.sampled_from(["a", "b", "c"])
_USER_CONTENT = st.sampled_from(
    [
        "hi",
        "",
        [],
        [{"type": "text", "text": "a"}],
        [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}],
        [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,AA"}}],
        [{"type": "text", "text": "a"}, {"type": "input_audio", "input_audio": {}}],
    ]
)
_CALL = st.one_of(
    st.builds(
        lambda i: {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}, _ID
    ),
    st.builds(lambda i: {"id": i, "function": {"name": "g", "arguments": "[]"}}, _ID),
    st.builds(lambda i: {"id": i, "type": "custom", "custom": {"name": "p", "input": "x"}}, _ID),
    st.builds(lambda i: {"id": i, "type": "weird"}, _ID),
    st.builds(  # a custom call that also sends a function: the custom one counts
        lambda i: {
            "id": i,
            "type": "custom",
            "custom": {"name": "p", "input": "x"},
            "function": {"name": "f", "arguments": "{}"},
        },
        _ID,
    ),
    st.builds(lambda i: {"id": i}, _ID),
)
_ASSISTANT = st.fixed_dictionaries(
    {"role": st.just("assistant")},
    optional={
        "content": st.sampled_from(
            ["", "t", None, [{"type": "text", "text": "a"}], [{"type": "refusal", "refusal": "n"}]]
        ),
        "tool_calls": st.lists(_CALL, max_size=3),
        "refusal": st.just("r"),
        "reasoning_content": st.just("why"),
        "function_call": st.just({"name": "f", "arguments": "{}"}),
        "audio": st.just({"id": "x"}),
        "name": st.just("n"),
    },
)
_TOOL = st.fixed_dictionaries(
    {
        "role": st.just("tool"),
        "tool_call_id": _ID,
        "content": st.sampled_from(["out", "", [{"type": "text", "text": "a"}]]),
    }
)
_MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "developer"]), "content": st.just("s")}
    ),
    st.fixed_dictionaries(
        {"role": st.just("user"), "content": _USER_CONTENT}, optional={"name": st.just("n")}
    ),
    _ASSISTANT,
    _TOOL,
    _TOOL,  # (twice: tool turns answer the calls more often)
    st.just({"role": "function", "name": "f", "content": "x"}),
)


def _outcome(body: bytes) -> tuple[Any, ...]:
    report = TranslationReport()
    try:
        out = request.decode_request(body, report)
    except ProxyError as e:
        return "error", e.status, e.message, e.param
    return "ok", msgspec.json.encode(out), report.dropped


def _checked_first(body: bytes) -> tuple[Any, ...]:
    """The decode with the whole message check run before the walk."""
    walk = request._messages_in

    def checked(ms: list[w.Message], report: TranslationReport) -> Any:
        validate.check_messages(ms)
        return walk(ms, report)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(request, "_messages_in", checked)
        return _outcome(body)


@settings(max_examples=600, deadline=None)
@given(st.lists(_MESSAGE, min_size=1, max_size=7))
@example(  # a call left unanswered, then answered after the user's next words
    [
        {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}]},
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "a", "content": "out"},
    ]
)
def test_the_checked_walk_answers_as_the_check_run_first(messages: list[dict[str, Any]]) -> None:
    body = json.dumps({"model": "m", "messages": messages}).encode()
    assert _outcome(body) == _checked_first(body)


def _call(call_id: str, kind: str) -> dict[str, Any]:
    if kind == "custom":
        return {"id": call_id, "type": "custom", "custom": {"name": "p", "input": "x"}}
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


# Turns of calls (ids reused across turns, of either kind), each answered in full.
_TURNS = st.lists(
    st.lists(st.tuples(_ID, st.sampled_from(["function", "custom"])), min_size=1, max_size=3),
    min_size=1,
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(_TURNS)
def test_a_tool_result_takes_the_kind_of_the_last_call_of_its_id(
    turns: list[list[tuple[str, str]]],
) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    for calls in turns:
        messages.append({"role": "assistant", "tool_calls": [_call(i, k) for i, k in calls]})
        messages += [{"role": "tool", "tool_call_id": i, "content": "out"} for i, _ in calls]
    body = json.dumps({"model": "m", "messages": messages}).encode()
    req = request.decode_request(body, TranslationReport())
    last: dict[str, str] = {}
    results = 0
    for m in req.messages:
        for p in m.content:
            if type(p) is c.ToolCall:
                last[p.id] = p.kind
            elif type(p) is c.ToolResult:
                assert p.kind == last[p.call_id]
                results += 1
    assert results == sum(len(calls) for calls in turns)


def test_a_usual_conversation_never_runs_the_whole_check(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(ms: list[w.Message]) -> None:
        raise AssertionError("check_messages ran")

    monkeypatch.setattr(validate, "check_messages", refuse)
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "t", "tool_calls": [json.loads(_CALL_A)]},
            {"role": "tool", "tool_call_id": "a", "content": "out"},
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
        ],
    }
    req = request.decode_request(json.dumps(body).encode(), TranslationReport())
    assert [m.role for m in req.messages] == ["user", "assistant", "tool", "user"]


def test_an_unanswered_call_is_the_checks_400() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [json.loads(_CALL_A)]},
            {"role": "user", "content": "again"},
        ],
    }
    with pytest.raises(ProxyError) as e:
        request.decode_request(json.dumps(body).encode(), TranslationReport())
    assert e.value.status == 400
    assert e.value.param == "messages.[1].role"
    assert "did not have response messages: a" in e.value.message


_CALL_A = '{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}'


# Mostly the turns the walk makes inline: texts beside function calls, no extras.
_USUAL_ASSISTANT = st.fixed_dictionaries(
    {
        "role": st.just("assistant"),
        "content": st.sampled_from(["t", "", None, [{"type": "text", "text": "a"}]]),
        "tool_calls": st.lists(_CALL, min_size=1, max_size=2),
    },
    optional={"name": st.just("n"), "refusal": st.just("r")},
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_USUAL_ASSISTANT, _ASSISTANT))
@example(
    {
        "role": "assistant",
        "content": "t",
        "tool_calls": [
            {"id": "a", "type": "custom", "custom": {"name": "p"}, "function": {"name": "f"}}
        ],
    }
)
def test_an_assistant_turn_is_what_the_general_path_makes_of_it(
    assistant: dict[str, Any],
) -> None:
    """The walk's inline turns (a text and one call; texts and function calls) against
    ``_assistant``, which makes any turn."""
    answers = [
        {"role": "tool", "tool_call_id": i, "content": "ok"}
        for i in dict.fromkeys(call["id"] for call in assistant.get("tool_calls", []))
    ]
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}, assistant, *answers]}
    report = TranslationReport(lossy=True)
    try:
        req = request.decode_request(json.dumps(body).encode(), report)
    except ProxyError:
        return  # (the errors: test_the_checked_walk_answers_as_the_check_run_first)
    wire_message = msgspec.convert(assistant, w.AssistantMessage)
    general = TranslationReport(lossy=True)
    conversation: list[w.Message] = [w.UserMessage(content="hi"), wire_message]
    expected = request._assistant(wire_message, conversation, set(), general)
    if wire_message.name is not None:
        general.drop("messages.name")
    assert req.messages[1] == expected
    assert report.dropped == general.dropped
