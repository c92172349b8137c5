"""The Anthropic decoder checks the tool_use / tool_result pairing while it converts
the turns (one pass over the messages, not a validation walk and then a conversion
walk), and builds an agent loop's usual assistant turn (a text, then one call)
inline. Both are shortcuts: here every body is decoded as production does and by the
two-pass order the API's precedence was written for (``validate.tool_results_follow``
over the whole conversation first, then the conversion), and the outcome must be the
same, error for error; the inline assistant turn must equal ``_assistant_turn``'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.anthropic_messages import request, wire
from proxai_asgi.protocols.anthropic_messages.validate import tool_results_follow, validate

_IDS = ("t1", "t2")
_BLOCKS: list[dict[str, Any]] = [
    {"type": "text", "text": "x"},
    {"type": "text", "text": ""},
    *({"type": "tool_use", "id": i, "name": "sh", "input": {"a": 1}} for i in _IDS),
    *({"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in _IDS),
    {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "y"}]},
    {"type": "thinking", "thinking": "hm", "signature": "sig"},
    {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "Qk0="}},
    {"type": "search_result"},
]
_USE1, _USE2, _RESULT1, _RESULT2 = _BLOCKS[2:6]
# an agent loop's shapes (a text and a call, one result), often, and any mix
_CONTENT = (
    st.sampled_from(["", "hi"])
    | st.sampled_from([[_BLOCKS[0], _USE1], [_RESULT1], [_USE1, _USE2], [_RESULT1, _RESULT2]])
    | st.lists(st.sampled_from(_BLOCKS), max_size=3)
)
_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "content": _CONTENT}
)


def _body(messages: list[dict[str, Any]]) -> bytes:
    return msgspec.json.encode({"model": "m", "max_tokens": 10, "messages": messages})


def _outcome(body: bytes, *, two_pass: bool) -> tuple[Any, ...]:
    report = TranslationReport()
    try:
        if two_pass:  # the order the API's precedence is written for
            req = request._decode_body(body, TranslationReport())
            validate(req)
            tool_results_follow(req.messages)
        decoded = request.decode_request(body, report)
    except ProxyError as e:
        return ("error", e.status, e.message, e.param)
    return ("ok", decoded, report.dropped)


@settings(max_examples=400, deadline=None)
@given(st.lists(_MESSAGE, min_size=1, max_size=5))
def test_the_pairing_checked_in_the_conversion_pass_gives_the_two_pass_outcome(
    messages: list[dict[str, Any]],
) -> None:
    body = _body(messages)
    assert _outcome(body, two_pass=False) == _outcome(body, two_pass=True)


def test_an_unanswered_call_is_named_before_an_earlier_conversion_error() -> None:
    # messages[0] has a bad image; messages[2] leaves messages[1]'s call unanswered
    bad = _BLOCKS[-2]
    body = _body(
        [
            {"role": "user", "content": [bad]},
            {"role": "assistant", "content": [_BLOCKS[0], _BLOCKS[2]]},
            {"role": "user", "content": "thanks"},
        ]
    )
    outcome = _outcome(body, two_pass=False)
    assert outcome[0] == "error"
    assert outcome[3] == "messages.2"


def test_two_calls_answered_by_a_first_block_for_one_of_them_are_rejected() -> None:
    body = _body(
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [_USE1, _USE2]},
            {"role": "user", "content": [_RESULT1]},
        ]
    )
    outcome = _outcome(body, two_pass=False)
    assert outcome == _outcome(body, two_pass=True)
    assert outcome[0] == "error"
    assert outcome[3] == "messages.2"
    assert "immediately after: t2. Each" in outcome[2]


def _assert_turn_as_general(
    messages: list[dict[str, Any]], i: int, general: Callable[..., Any]
) -> None:
    """``messages[i]`` (the last) decodes, inline, as ``general`` converts its blocks
    (in ``_messages_in``'s general path): the same canonical turn(s) or error, and the
    same report."""
    report = TranslationReport()
    try:
        decoded = request.decode_request(_body(messages), report).messages
        got: Any = decoded[i] if general is request._assistant_turn else decoded[i:]
    except ProxyError as e:
        got = (e.message, e.param)
    general_report = TranslationReport()
    blocks = msgspec.json.decode(
        msgspec.json.encode(messages[i]["content"]), type=list[wire.ClientInputBlock]
    )
    try:
        want: Any = general(blocks, i, general_report)
    except ProxyError as e:
        want = (e.message, e.param)
        try:  # an empty text block is named first (``_messages_in`` asks after an error)
            request._check_not_empty(blocks, i, len(messages), messages[i]["role"])
        except ProxyError as empty:
            want = (empty.message, empty.param)
    assert got == want
    assert report.dropped == general_report.dropped


_CACHE = st.none() | st.just({"type": "ephemeral"})
_TEXT = st.fixed_dictionaries(
    {"type": st.just("text"), "text": st.sampled_from(["", "said"])},
    optional={
        "cache_control": _CACHE,
        "citations": st.just([{"type": "char_location", "cited_text": "c"}]) | st.none(),
    },
)
_CALL = st.fixed_dictionaries(
    {
        "type": st.just("tool_use"),
        "id": st.sampled_from(_IDS),
        "name": st.just("sh"),
        "input": st.dictionaries(st.sampled_from("ab"), st.integers() | st.text(max_size=3)),
    },
    optional={"cache_control": _CACHE},
)


@settings(max_examples=200, deadline=None)
@given(_TEXT, _CALL)
def test_the_inline_assistant_turn_equals_the_general_one(
    text: dict[str, Any], call: dict[str, Any]
) -> None:
    blocks = [text, call]
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": blocks},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"]}]},
    ]
    _assert_turn_as_general(messages, 1, request._assistant_turn)


_RESULT_BLOCK = st.fixed_dictionaries(
    {"type": st.just("tool_result"), "tool_use_id": st.sampled_from(_IDS)},
    optional={
        "content": st.sampled_from(["", "out", [], [{"type": "text", "text": "y"}]])
        | st.just([_BLOCKS[-2]]),
        "is_error": st.booleans() | st.none(),
        "cache_control": _CACHE,
    },
)


@settings(max_examples=300, deadline=None)
@given(_RESULT_BLOCK, st.none() | _TEXT)
def test_the_inline_tool_result_turns_equal_the_general_one(
    block: dict[str, Any], then: dict[str, Any] | None
) -> None:
    # a result alone, or a result and a text (two canonical turns)
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [_BLOCKS[0], {**_USE1, "id": block["tool_use_id"]}]},
        {"role": "user", "content": [block] if then is None else [block, then]},
    ]
    _assert_turn_as_general(messages, 2, request._user_turn)


@pytest.mark.parametrize(
    "answer",
    [
        "thanks",
        [_RESULT2],
        [_BLOCKS[0]],
        [_BLOCKS[0], _USE1],  # an assistant-shaped turn where the answer should be
    ],
)
@pytest.mark.parametrize("role", ["user", "assistant"])
def test_the_usual_assistant_turn_left_unanswered_is_rejected(answer: Any, role: str) -> None:
    body = _body(
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [_BLOCKS[0], _USE1]},
            {"role": role, "content": answer},
        ]
    )
    outcome = _outcome(body, two_pass=False)
    assert outcome == _outcome(body, two_pass=True)
    assert outcome[0] == "error"
    assert outcome[3] == "messages.2"


_TOOL = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["sh", 3]),
        "description": st.sampled_from(["runs", None, 1]),
        "input_schema": st.sampled_from([{"type": "object"}, None, "x"]),
        "type": st.sampled_from(["custom", None]),
        "cache_control": _CACHE,
        "strict": st.booleans(),
    },
)


def _tools_outcome(raw: dict[str, Any]) -> tuple[Any, ...]:
    report = TranslationReport()
    try:
        tools = request._tools_in([raw], report)
    except ProxyError as e:
        return ("error", e.message, e.param)
    return ("ok", tools, report.dropped)


@settings(max_examples=300, deadline=None)
@given(_TOOL)
def test_the_usual_tool_declaration_decodes_as_the_general_path_does(raw: dict[str, Any]) -> None:
    # a key the general path drops (and reports) sends it there
    general = _tools_outcome({**raw, "defer_loading": True})
    got = _tools_outcome(raw)
    if got[0] == "ok":
        assert general == ("ok", got[1], [*got[2], "tools.defer_loading"])
    else:
        assert general == got
