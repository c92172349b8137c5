"""``json_objects``: tool call arguments kept encoded, shared by the Anthropic and Gemini
encoders. The table is bounded, keyed by the arguments' text (not by the string
object), and gives the bytes the decoded object encodes to."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols._kit import json_objects
from proxai_asgi.protocols.anthropic_messages import request as anthropic
from proxai_asgi.protocols.gemini_generate_content import request as gemini

from .protocols.anthropic_messages._strategies import JSON_VALUES

_OBJECTS = st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=4)


def test_the_table_is_bounded_in_entries_and_entry_size() -> None:
    json_objects.RAW_OBJECTS.clear()
    for n in range(json_objects.RAW_OBJECTS_MAX + 10):
        json_objects.remember(f'{{"n":{n}}}', {"n": n})
        assert len(json_objects.RAW_OBJECTS) <= json_objects.RAW_OBJECTS_MAX
    json_objects.RAW_OBJECTS.clear()
    long = json.dumps({"s": "x" * json_objects.RAW_OBJECT_MAX_CHARS})
    assert bytes(json_objects.remember(long, json.loads(long))) == long.replace(" ", "").encode()
    assert long not in json_objects.RAW_OBJECTS


def test_an_entry_is_found_by_content_and_holds_bytes_of_its_own() -> None:
    json_objects.RAW_OBJECTS.clear()
    body = b'{"args":{"a": 1}}'
    arguments = body[8:-1].decode()
    raw = json_objects.remember(arguments, {"a": 1})
    same_text = "".join(['{"a"', ": 1}"])  # equal, not the same object
    assert same_text is not arguments
    assert json_objects.RAW_OBJECTS.get(same_text) is raw
    assert bytes(raw) == b'{"a":1}'
    assert type(raw) is msgspec.Raw


def _request_with(arguments: str) -> c.Request:
    call = c.ToolCall(id="call_1", name="f", arguments=arguments)
    return c.Request(model="m", messages=[c.Message(role="assistant", content=[call])])


@given(_OBJECTS, st.sampled_from([None, 1]), st.booleans())
def test_both_encoders_send_the_bytes_the_object_encodes_to(
    value: dict[str, Any], indent: int | None, anthropic_first: bool
) -> None:
    arguments = json.dumps(value, indent=indent)
    expected = msgspec.json.encode(msgspec.json.decode(arguments))
    json_objects.forget()
    for _ in range(3):  # not seen (Gemini: no table), seen once (filled), found
        if anthropic_first:
            assert bytes(anthropic._raw_input(arguments, 0, 0)) == expected
        encoded = gemini.encode_request(
            _request_with(arguments), TranslationReport(), UpstreamOptions()
        )
        call = msgspec.json.decode(encoded)["contents"][0]["parts"][0]["functionCall"]
        assert encoded.count(b'"args":' + expected + b',"id":"call_1"}') == 1
        assert call["args"] == value
        assert bytes(anthropic._raw_input(arguments, 0, 0)) == expected


def test_a_first_call_is_noted_then_kept_from_its_second_sighting() -> None:
    json_objects.forget()
    table: dict[str, int] = {}
    assert not json_objects.kept("a", table, 4)  # noted
    assert json_objects.kept("a", table, 4)  # seen before: the request uses the table
    assert not json_objects.kept("a", table, 4)  # (no longer noted: the table has it now)
    table["a"] = 1
    assert json_objects.kept("a", table, 4)
    assert json_objects.kept("long!", table, 4)  # never kept: nothing to wait for
    assert not json_objects.kept(b"a", {}, 4)  # bytes and text keys are distinct
    json_objects.forget()
    assert not json_objects.kept(b"a", {}, 4)


def test_what_is_noted_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    json_objects.forget()
    monkeypatch.setattr(json_objects._SEEN, "max_entries", 8)
    for n in range(50):
        json_objects.kept(f"k{n}", {}, 16)
        assert len(json_objects._SEEN) <= 8
    json_objects.forget()
    assert not json_objects._SEEN and not json_objects.ARGUMENTS and not json_objects.RAW_OBJECTS


def _call_turn(arguments: str) -> list[c.Message]:
    call = c.ToolCall(id="call_1", name="f", arguments=arguments)
    return [c.Message(role="assistant", content=[c.Text(text="t"), call])]


_ASK = {"role": "user", "parts": [{"text": "go"}]}


@given(_OBJECTS, st.sampled_from([None, 1]))
def test_a_gemini_conversation_not_seen_before_fills_nothing_but_a_note(
    value: dict[str, Any], indent: int | None
) -> None:
    """Its first request converts its calls without the tables; its second fills them."""
    arguments = json.dumps(value, indent=indent)
    assume(len(arguments.encode()) <= json_objects.ARGUMENT_MAX_BYTES)  # (else never kept)
    raw = msgspec.json.encode(
        {
            "contents": [
                _ASK,
                {"role": "model", "parts": [{"functionCall": {"name": "f", "args": value}}]},
            ]
        }
    )
    raw = raw.replace(msgspec.json.encode(value), arguments.encode())
    json_objects.forget()
    for n in range(3):
        gemini._contents_out(_call_turn(arguments), TranslationReport())
        gemini.decode_request(raw, TranslationReport())
        filled = len(json_objects.RAW_OBJECTS), len(json_objects.ARGUMENTS)
        assert filled == ((0, 0) if n == 0 else (1, 1))


def test_a_new_call_in_a_known_conversation_is_kept_from_its_second_sighting() -> None:
    """A turn's newest call misses the tables while the earlier ones hit: it is noted the
    first time, put in the tables the second, and found from the third."""
    old, new = '{"n": 1}', '{"n": 2}'
    between = c.Message(role="user", content=[c.Text(text="go on")])
    turns = [_call_turn(old)[0], between, _call_turn(new)[0]]
    contents = [
        turn
        for a in ({"n": 1}, {"n": 2})
        for turn in (
            _ASK,  # (Google takes a call turn only after a user turn)
            {"role": "model", "parts": [{"text": "t"}, {"functionCall": {"name": "f", "args": a}}]},
        )
    ]
    body = msgspec.json.encode({"contents": contents}).replace(b'{"n":2}', new.encode())
    json_objects.forget()
    for _ in range(2):  # the conversation's first call, seen twice: kept
        gemini._contents_out(_call_turn(old), TranslationReport())
        gemini.decode_request(msgspec.json.encode({"contents": contents[:2]}), TranslationReport())
    assert (len(json_objects.RAW_OBJECTS), len(json_objects.ARGUMENTS)) == (1, 1)
    for n in range(3):
        out = gemini.encode_request(
            c.Request(model="m", messages=turns), TranslationReport(), UpstreamOptions()
        )
        assert out.count(b'"args":{"n":2}') == 1
        request = gemini.decode_request(body, TranslationReport())
        assert [
            p.arguments for m in request.messages for p in m.content if type(p) is c.ToolCall
        ] == [
            '{"n":1}',
            '{"n":2}',
        ]
        assert (
            (new in json_objects.RAW_OBJECTS) == (new.encode() in json_objects.ARGUMENTS) == (n > 0)
        )
