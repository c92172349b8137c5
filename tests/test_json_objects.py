"""``json_objects``: tool call arguments kept encoded, shared by the Anthropic and Gemini
encoders. The table is bounded, keyed by the arguments' text (not by the string
object), and gives the bytes the decoded object encodes to."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi import json_objects
from proxai_asgi.codec import UpstreamOptions
from proxai_asgi.errors import TranslationReport
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
    assert json_objects.RAW_OBJECTS[same_text] is raw
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
    json_objects.RAW_OBJECTS.clear()
    for _ in range(2):  # the first call fills the table, the second reads it
        if anthropic_first:
            assert bytes(anthropic._raw_input(arguments, 0, 0)) == expected
        encoded = gemini.encode_request(
            _request_with(arguments), TranslationReport(), UpstreamOptions()
        )
        call = msgspec.json.decode(encoded)["contents"][0]["parts"][0]["functionCall"]
        assert encoded.count(b'"args":' + expected + b',"id":"call_1"}') == 1
        assert call["args"] == value
        assert bytes(anthropic._raw_input(arguments, 0, 0)) == expected
