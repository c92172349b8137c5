"""A client's ``tool_use.input`` is decoded as its JSON text (``msgspec.Raw``), not as
an object: the canonical arguments are the JSON of the object either way, and a
body whose ``input`` is not an object gets the 400 the object-typed decode gives,
before any other error, as when the body was decoded with ``input`` an object. Here
every body is decoded as production does and against that reference."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols._kit import json_objects
from proxai_asgi.protocols.anthropic_messages import request, wire

from ._strategies import JSON_VALUES


def _outcome(body: bytes) -> tuple[Any, ...]:
    report = TranslationReport()
    try:
        decoded = request.decode_request(body, report)
    except ProxyError as e:
        return ("error", e.status, e.message, e.param)
    return ("ok", decoded, report.dropped)


def _reference(body: bytes) -> tuple[Any, ...]:
    """The object-typed decode first (its error is the one the API names first)."""
    try:
        msgspec.json.decode(body, type=wire.MessagesRequest)
    except msgspec.ValidationError as e:
        error = request._invalid(e)
        return ("error", error.status, error.message, error.param)
    except msgspec.DecodeError:
        pass
    return _outcome(body)


_INPUT = st.sampled_from([{"a": 1}, {}, [1], "s", 2, None])
_CALL = st.builds(
    lambda i, value: {"type": "tool_use", "id": f"t{i}", "name": "sh", "input": value},
    st.integers(0, 1),
    _INPUT,
)
_BLOCK = st.one_of(
    _CALL,
    st.just({"type": "text", "text": "x"}),
    st.just({"type": "text", "text": ""}),
    st.just({"type": "text", "text": 5}),  # malformed: the decode's own error
    st.builds(lambda i: {"type": "tool_result", "tool_use_id": f"t{i}"}, st.integers(0, 1)),
)
_MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "system"]),
        "content": st.lists(_BLOCK, min_size=1, max_size=3) | st.just("hi"),
    }
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_MESSAGE, min_size=1, max_size=4),
    st.sampled_from([None, 0.5, 7.0]),
    st.booleans(),
)
def test_a_call_input_that_is_not_an_object_is_named_as_the_object_typed_decode_names_it(
    messages: list[dict[str, Any]], temperature: float | None, unknown_field: bool
) -> None:
    body: dict[str, Any] = {"model": "m", "max_tokens": 5, "messages": messages}
    if temperature is not None:
        body["temperature"] = temperature  # 7.0: an error of validate()
    if unknown_field:
        body["zz_unknown"] = 1  # the general decode path
    raw = msgspec.json.encode(body)
    assert _outcome(raw) == _reference(raw)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=4), JSON_VALUES), st.sampled_from([None, 2]), st.booleans())
def test_the_arguments_are_the_json_of_the_input_object_however_it_was_written(
    value: dict[str, Any], indent: int | None, ascii_only: bool
) -> None:
    call = {"type": "tool_use", "id": "t", "name": "sh", "input": value}
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "text", "text": "x"}, call]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
            {"role": "assistant", "content": [call, call]},  # (the general turn)
        ],
    }
    raw = json.dumps(body, indent=indent, ensure_ascii=ascii_only).encode()
    want = msgspec.json.encode(msgspec.json.decode(json.dumps(value))).decode()
    for _ in range(2):  # the second time, from what the first kept
        decoded = request.decode_request(raw, TranslationReport())
        calls = [p for m in decoded.messages for p in m.content if isinstance(p, c.ToolCall)]
        assert [p.arguments for p in calls] == [want] * 3


def test_an_input_with_duplicate_keys_gives_the_objects_json() -> None:
    raw = (
        b'{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":'
        b'[{"type":"tool_use","id":"t","name":"sh","input":{"a": 1, "a": 2,"b":"\\u00e9"}}]}]}'
    )
    decoded = request.decode_request(raw, TranslationReport())
    assert decoded.messages[0].content[0] == c.ToolCall(
        id="t", name="sh", arguments='{"a":2,"b":"\u00e9"}'
    )


def test_the_kept_arguments_are_bounded() -> None:
    for n in range(json_objects.ARGUMENTS_MAX + 10):
        request._arguments_in(b'{"n":%d}' % n)
        assert len(json_objects.ARGUMENTS) <= json_objects.ARGUMENTS_MAX
