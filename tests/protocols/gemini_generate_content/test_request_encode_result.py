"""A tool message's usual result (one text, not an error, not a JSON object) is made
inline by the Gemini encoder; every result must still go out as
``result_response_out`` makes it, with the same report."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols.gemini_generate_content import request, wire

_texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "{", '{"a": 1}', "{not json", '{"output": "x"}', "[1]", " {}"]),
)
_items = st.one_of(
    _texts.map(lambda t: c.Text(text=t)),
    _texts.map(lambda t: c.Refusal(text=t)),
    st.just(c.Image(data="AAAA", media_type="image/png")),
)
_results = st.builds(
    c.ToolResult,
    call_id=st.sampled_from(["call_1", "gcall_h0_0"]),
    content=st.lists(_items, max_size=3),
    is_error=st.booleans(),
)


def _user_out(
    result: c.ToolResult, answers: list[wire.UpstreamResponse], report: TranslationReport
) -> list[wire.UpstreamPart]:
    """A tool message of ``result`` through the general per-part code."""
    parts: list[wire.UpstreamPart] = []
    request._user_part_out(result, parts, {}, answers, report)
    return parts


@given(_results)
def test_a_result_goes_out_as_result_response_out_makes_it(result: c.ToolResult) -> None:
    expected_report = TranslationReport()
    expected = request.result_response_out(result, expected_report)
    report = TranslationReport()
    answers: list[wire.UpstreamResponse] = []
    parts = _user_out(result, answers, report)
    [part] = parts
    assert part.function_response is answers[0]
    assert answers[0].response == expected
    assert msgspec.json.encode(answers[0].response) == msgspec.json.encode(expected)
    assert report == expected_report


def test_the_usual_result_is_its_text_as_output() -> None:
    result = c.ToolResult(call_id="call_1", content=[c.Text(text="done\n")])
    parts = _user_out(result, [], TranslationReport())
    assert msgspec.json.encode(parts) == (
        b'[{"functionResponse":{"name":"call_1","response":{"output":"done\\n"},"id":"call_1"}}]'
    )
