"""A Gemini client's conversation decodes as the general code decodes it.

``request._contents_in`` makes the usual turns inline (a model turn's text, function
calls and Gemini's own signatures; a tool answer of one function response with an id
and a text ``output``), hands every other part to ``parts_in`` and every other user
turn to ``_user_turn``, and makes the list of a model turn's unanswered calls only when
a turn needs it. For any conversation, the messages must be those ``parts_in`` makes of
every model turn and ``_user_turn`` of every user turn, with the unanswered calls kept
all along.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols.gemini_generate_content import request, response, signatures, wire

# A carrier we packed for a Gemini client (another provider's token), as it replays it.
_CARRIER = signatures.client_signature(c.Reasoning(text="t", signature="EqQBsig"))
_signatures = st.sampled_from([None, "", "c2lnbmF0dXJl", signatures.SKIP_VALIDATOR, _CARRIER])
_calls = st.builds(
    wire.FunctionCall,
    name=st.sampled_from(["read", "run"]),
    args=st.none() | st.just({"path": "a"}),
    id=st.none() | st.sampled_from(["call_1", "call_2"]),
)
_parts = st.one_of(
    st.builds(wire.Part, text=st.sampled_from(["", "a", "b"]), thought_signature=_signatures),
    st.builds(
        wire.Part,
        text=st.sampled_from(["", "thinking"]),
        thought=st.just(True),
        thought_signature=_signatures,
    ),
    st.builds(wire.Part, function_call=_calls, thought_signature=_signatures),
    st.builds(
        wire.Part,
        inline_data=st.just(wire.Blob(mime_type="image/png", data="iVBO")),
        thought_signature=_signatures,
    ),
    st.builds(wire.Part, thought=st.just(True), thought_signature=_signatures),
)


def _model_turn(parts: list[wire.Part], i: int) -> list[c.Part]:
    out: list[c.Part] = []
    response.parts_in(
        parts, out, lambda fc, n: fc.id or request.call_id_for_history(i, n), request._media_in
    )
    return out


def _reference(contents: list[wire.Content], report: TranslationReport) -> list[c.Message]:
    """The conversation through the general code only, the unanswered calls kept eagerly."""
    messages: list[c.Message] = []
    unanswered: list[tuple[str, str]] = []
    for i, content in enumerate(contents):
        if content.role == "model":
            parts = _model_turn(content.parts, i)
            unanswered = [(p.name, p.id) for p in parts if type(p) is c.ToolCall]
            messages.append(c.Message(role="assistant", content=parts))
        else:
            request._user_turn(content.parts, i, unanswered, report, messages)
    return messages


@settings(max_examples=500, deadline=None)
@given(st.lists(_parts, max_size=6), st.integers(0, 3))
def test_a_model_turn_is_what_parts_in_makes_of_it(parts: list[wire.Part], i: int) -> None:
    before = [wire.Content(parts=[wire.Part(text="hi")])] * i
    messages = request._contents_in(
        [*before, wire.Content(role="model", parts=parts)], TranslationReport()
    )
    assert msgspec.json.encode(messages[-1].content) == msgspec.json.encode(_model_turn(parts, i))


_responses = st.builds(
    wire.FunctionResponse,
    name=st.sampled_from(["read", "run"]),
    response=st.sampled_from(
        [None, {}, {"output": "x"}, {"output": ""}, {"output": 1}, {"error": "e"}, {"a": "b"}]
    ),
    id=st.none() | st.sampled_from(["call_1", "call_2", "call_3"]),
    parts=st.none() | st.just([{"text": "p"}]),
)
_model_turns = st.builds(
    wire.Content,
    role=st.just("model"),
    parts=st.lists(
        st.one_of(
            _parts,
            st.builds(
                wire.Part,
                function_call=st.builds(
                    wire.FunctionCall,
                    name=st.sampled_from(["read", "run"]),
                    id=st.none() | st.sampled_from(["call_1", "call_2", "call_3"]),
                ),
            ),
        ),
        max_size=4,
    ),
)
_user_turns = st.builds(
    wire.Content,
    role=st.sampled_from([None, "", "user", "function"]),
    parts=st.lists(
        st.builds(wire.Part, function_response=_responses)
        | st.builds(wire.Part, text=st.sampled_from(["", "a"]), thought=st.none() | st.just(True))
        | st.builds(wire.Part, text=st.just("a"), function_response=_responses)
        | st.just(wire.Part(inline_data=wire.Blob(mime_type="image/png", data="iVBO"))),
        max_size=3,
    ),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_model_turns | _user_turns, max_size=8))
def test_a_conversation_is_what_the_general_code_makes_of_it(
    contents: list[wire.Content],
) -> None:
    report, expected_report = TranslationReport(), TranslationReport()
    got = request._contents_in(contents, report)
    expected = _reference(contents, expected_report)
    assert msgspec.json.encode(got) == msgspec.json.encode(expected)
    assert report.dropped == expected_report.dropped


def test_the_carrier_fixture_is_a_packed_value() -> None:
    assert _CARRIER is not None
    assert _CARRIER.startswith(signatures.PACKED_HEAD)
    assert reasoning_carry.is_packed(signatures._from_client(_CARRIER))


@pytest.mark.parametrize(
    "result",
    [
        {"output": "done"},
        {"output": ""},
        {"output": 3},
        {"output": {"a": 1}},
        {"error": "failed"},
        {"output": "done", "exitCode": 0},
        {},
        None,
    ],
)
def test_a_function_response_is_the_result_result_content_in_makes(result: object) -> None:
    contents = [
        wire.Content(role="model", parts=[wire.Part(function_call=wire.FunctionCall(name="f"))]),
        wire.Content(
            role="user",
            parts=[wire.Part(function_response=wire.FunctionResponse(name="f", response=result))],  # type: ignore[arg-type]
        ),
    ]
    messages = request._contents_in(contents, TranslationReport())
    content, is_error = request.result_content_in(result)  # type: ignore[arg-type]
    expected = c.ToolResult(
        call_id=request.call_id_for_history(0, 0), content=content, is_error=is_error
    )
    assert messages[1] == c.Message(role="tool", content=[expected])
    assert bool(is_error) == (result == {"error": "failed"})


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["read", "run"]), st.sampled_from(["call_1", "call_2"]))),
    _responses,
    st.booleans(),
)
def test_late_responses_take_the_calls_the_usual_answers_left(
    calls: list[tuple[str, str]], fr: wire.FunctionResponse, twice: bool
) -> None:
    model = wire.Content(
        role="model",
        parts=[wire.Part(function_call=wire.FunctionCall(name=n, id=i)) for n, i in calls],
    )
    answer = wire.Content(role="user", parts=[wire.Part(function_response=fr)])
    # then responses without an id, which take the calls left unanswered
    late = wire.Content(
        parts=[
            wire.Part(function_response=wire.FunctionResponse(name=n, response={"output": "y"}))
            for n in ("read", "run")
        ]
    )
    # a usual answer before the late responses, and one after them
    contents = [model, answer, late, answer, late] if twice else [model, late, answer, late]
    report, expected_report = TranslationReport(), TranslationReport()
    got = request._contents_in(contents, report)
    expected = _reference(contents, expected_report)
    assert msgspec.json.encode(got) == msgspec.json.encode(expected)
    assert report.dropped == expected_report.dropped
