"""The Chat decoder's walk keeps no count of the messages: an error's path finds its
message's place when it is raised (``request._place``). Here a bad message stands
anywhere in a conversation of good ones, each of them an equal copy or not, and the
400 names its place as the test counts it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.openai_chat import request

_CALL = {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def _answer(content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "a", "content": content}


_GOOD_TURNS: list[list[dict[str, Any]]] = [
    [{"role": "system", "content": "s"}],
    [{"role": "user", "content": "hi"}],
    [{"role": "user", "content": [{"type": "text", "text": "a"}]}],
    [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}],
        }
    ],
    [{"role": "assistant", "content": "t"}],
    [{"role": "assistant", "content": "t", "tool_calls": [_CALL]}, _answer("ok")],
    [
        {"role": "assistant", "reasoning_content": "why", "tool_calls": [_CALL]},
        _answer([{"type": "text", "text": "ok"}]),
    ],
]
_FILE = {"type": "file", "file": {"filename": "x.pdf"}}  # neither data nor id
# A bad message (or turn: the bad part's message first), and the path its 400 names
# after the message's place.
_BAD: list[tuple[list[dict[str, Any]], str]] = [
    (
        [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
        ".content[0].type",
    ),
    ([{"role": "user", "content": [{"type": "text", "text": "a"}, _FILE]}], ".content[1].file"),
    ([{"role": "user", "content": []}], ".content"),
    (
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,A"}}],
            }
        ],
        ".content[0]",
    ),
    ([{"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}], ".function_call"),
    (
        [
            {"role": "assistant", "content": "t", "tool_calls": [_CALL, {**_CALL, "type": "odd"}]},
            _answer("ok"),
        ],
        ".tool_calls[1].type",
    ),
    (
        [{"role": "assistant", "tool_calls": [{"id": "a", "type": "custom"}]}, _answer("ok")],
        ".tool_calls[0].custom",
    ),
    ([{"role": "function", "name": "f", "content": "x"}], ".role"),
]


@settings(max_examples=300, deadline=None)
@given(
    before=st.lists(st.sampled_from(_GOOD_TURNS), max_size=5),
    bad=st.sampled_from(_BAD),
    after=st.lists(st.sampled_from(_GOOD_TURNS), max_size=2),
)
def test_an_error_names_the_place_of_its_message(
    before: list[list[dict[str, Any]]],
    bad: tuple[list[dict[str, Any]], str],
    after: list[list[dict[str, Any]]],
) -> None:
    turn, suffix = bad
    head = [{"role": "user", "content": "go"}, *(m for t in before for m in t)]
    messages = [*head, *turn, *(m for t in after for m in t)]
    body = json.dumps({"model": "m", "messages": messages}).encode()
    try:
        request.decode_request(body, TranslationReport())
    except ProxyError as e:
        assert e.status == 400
        assert e.param == f"messages[{len(head)}]{suffix}"
    else:
        raise AssertionError("no 400")


def test_a_tool_message_s_file_names_its_place() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "t", "tool_calls": [_CALL]},
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "x"}, _FILE]},
    ]
    body = json.dumps({"model": "m", "messages": messages}).encode()
    try:
        request.decode_request(body, TranslationReport())
    except ProxyError as e:
        assert e.param == "messages[2].content[1].file"
        assert e.message == "messages[2].content[1].file: one of file_data or file_id is required"
    else:
        raise AssertionError("no 400")
