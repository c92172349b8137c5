"""A user message of one ``input_text`` (the usual one) is made inline by the decoder;
for any content the turn, or the 400, is what ``_user_parts_only`` and ``_parts`` make
of it."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.openai_responses import request
from proxai_asgi.protocols.openai_responses import wire as w

_PART = st.sampled_from(
    [
        {"type": "input_text", "text": "a"},
        {"type": "input_text", "text": ""},
        {"type": "output_text", "text": "b"},
        {"type": "refusal", "refusal": "no"},
        {"type": "input_image", "image_url": "data:image/png;base64,AA"},
        {"type": "input_image", "image_url": "data:image/bmp;base64,AA"},
        {"type": "input_image", "image_url": "https://x/i.png"},
        {"type": "input_file", "file_id": "f1"},
        {"type": "input_audio", "input_audio": {}},
    ]
)
_CONTENT = st.one_of(st.sampled_from(["", "x", "hi"]), st.lists(_PART, max_size=3))


def _decoded(content: Any) -> tuple[Any, ...]:
    body = {"model": "m", "input": [{"type": "message", "role": "user", "content": content}]}
    try:
        req = request.decode_request(json.dumps(body).encode(), TranslationReport())
    except ProxyError as e:
        return "error", e.status, e.message, e.param
    return "ok", msgspec.json.encode(req.messages)


def _general(content: Any) -> tuple[Any, ...]:
    item = msgspec.convert({"role": "user", "content": content}, w.MessageItem)
    try:
        request._user_parts_only(item.content, 0)
        parts = request._parts(item.content, 0)
    except ProxyError as e:
        return "error", e.status, e.message, e.param
    return "ok", msgspec.json.encode([{"role": "user", "content": parts}])


@settings(max_examples=300, deadline=None)
@given(_CONTENT)
def test_a_user_message_is_what_the_general_path_makes_of_it(content: Any) -> None:
    assert _decoded(content) == _general(content)
