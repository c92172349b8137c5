"""A Gemini client's model turn decodes as ``parts_in`` decodes an answer's parts.

``request._model_parts`` makes the usual parts itself (text, function calls, Gemini's
own signatures) and hands every other part to ``parts_in``; for any mix of parts the
canonical parts must be those ``parts_in`` makes of the whole turn.
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


def _reference(parts: list[wire.Part], i: int) -> list[c.Part]:
    out: list[c.Part] = []
    response.parts_in(
        parts, out, lambda fc, n: fc.id or request.call_id_for_history(i, n), request._media_in
    )
    return out


@settings(max_examples=500, deadline=None)
@given(st.lists(_parts, max_size=6), st.integers(0, 3))
def test_a_model_turn_is_what_parts_in_makes_of_it(parts: list[wire.Part], i: int) -> None:
    expected = msgspec.json.encode(_reference(parts, i))
    got, calls = request._model_parts(parts, i, TranslationReport())
    assert msgspec.json.encode(got) == expected
    assert calls == [(p.name, p.id) for p in got if type(p) is c.ToolCall]


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


_responses = st.builds(
    wire.FunctionResponse,
    name=st.sampled_from(["read", "run"]),
    response=st.sampled_from(
        [None, {}, {"output": "x"}, {"output": ""}, {"output": 1}, {"error": "e"}, {"a": "b"}]
    ),
    id=st.none() | st.sampled_from(["call_1", "call_2"]),
    parts=st.none() | st.just([{"text": "p"}]),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["read", "run"]), st.sampled_from(["call_1", "call_2"]))),
    _responses,
)
def test_a_tool_answer_turn_is_what_user_turn_makes_of_it(
    calls: list[tuple[str, str]], fr: wire.FunctionResponse
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
    report = TranslationReport()
    got = request._contents_in([model, answer, answer, late], report)
    expected: list[c.Message] = []
    unanswered = list(calls)
    expected_report = TranslationReport()
    for i, turn in enumerate((answer, answer, late), 1):
        request._user_turn(turn.parts, i, unanswered, expected_report, expected)
    assert msgspec.json.encode(got[1:]) == msgspec.json.encode(expected)
    assert report.dropped == expected_report.dropped
