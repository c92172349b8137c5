"""The strict Chat stream validator rejects each grammar violation it claims to check."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers.validate_chat import validate_chat_stream

from ._util import frames

HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def ch(delta: dict[str, Any], finish: str | None = None, **kw: Any) -> dict[str, Any]:
    return {**HEAD, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **kw}


ROLE = ch({"role": "assistant", "content": ""})
FIN = ch({}, "stop")
USAGE = {
    **HEAD,
    "choices": [],
    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
}


def test_validator_accepts_a_good_stream() -> None:
    s = validate_chat_stream(
        frames(ROLE, ch({"content": "hi"}), FIN, USAGE, "[DONE]"), include_usage=True
    )
    assert s.content == "hi" and s.finish_reason == "stop" and s.usage is not None


BAD: list[tuple[str, bytes, str]] = [
    ("no done", frames(ROLE, FIN), "[DONE]"),
    ("two dones", frames(ROLE, FIN, "[DONE]", "[DONE]"), "more than one"),
    ("event line", b"event: x\ndata: {}\n\ndata: [DONE]\n\n", "not a data-only frame"),
    ("two data lines", b"data: {}\ndata: {}\n\ndata: [DONE]\n\n", "more than one line"),
    ("no role", frames(ch({"content": "a"}), FIN, "[DONE]"), "role"),
    (
        "role repeated",
        frames(ROLE, ch({"role": "assistant", "content": "a"}), FIN, "[DONE]"),
        "repeats the role",
    ),
    ("id changes", frames(ROLE, {**ch({"content": "a"}), "id": "chatcmpl-2"}, FIN, "[DONE]"), "id"),
    ("bad prefix", frames({**ROLE, "id": "msg_1"}, FIN, "[DONE]"), "chatcmpl-"),
    (
        "two choices",
        frames(
            ROLE, {**HEAD, "choices": [{"index": 0, "delta": {"content": "a"}}] * 2}, FIN, "[DONE]"
        ),
        "2 choices",
    ),
    ("empty content", frames(ROLE, ch({"content": ""}), FIN, "[DONE]"), "empty"),
    ("empty delta", frames(ROLE, ch({}), FIN, "[DONE]"), "empty delta"),
    ("no finish", frames(ROLE, ch({"content": "a"}), "[DONE]"), "finish_reason"),
    ("bad finish", frames(ROLE, ch({}, "done"), "[DONE]"), "invalid finish_reason"),
    (
        "content after finish",
        frames(ROLE, FIN, ch({"content": "a"}), "[DONE]"),
        "after finish_reason",
    ),
    ("usage before finish", frames(ROLE, USAGE, FIN, "[DONE]"), "before finish_reason"),
    (
        "bad total",
        frames(
            ROLE,
            FIN,
            {**USAGE, "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 4}},
            "[DONE]",
        ),
        "total_tokens",
    ),
    (
        "tool index gap",
        frames(
            ROLE,
            ch(
                {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "a",
                            "type": "function",
                            "function": {"name": "f", "arguments": ""},
                        }
                    ]
                }
            ),
            FIN,
            "[DONE]",
        ),
        "skips",
    ),
    (
        "tool without id",
        frames(
            ROLE,
            ch(
                {
                    "tool_calls": [
                        {"index": 0, "type": "function", "function": {"name": "f", "arguments": ""}}
                    ]
                }
            ),
            FIN,
            "[DONE]",
        ),
        "without an id",
    ),
    (
        "tool id repeated",
        frames(
            ROLE,
            ch(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "a",
                            "type": "function",
                            "function": {"name": "f", "arguments": ""},
                        }
                    ]
                }
            ),
            ch({"tool_calls": [{"index": 0, "id": "a", "function": {"arguments": "{}"}}]}),
            FIN,
            "[DONE]",
        ),
        "repeats id",
    ),
    (
        "duplicate tool ids",
        frames(
            ROLE,
            ch(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "a",
                            "type": "function",
                            "function": {"name": "f", "arguments": ""},
                        }
                    ]
                }
            ),
            ch(
                {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "a",
                            "type": "function",
                            "function": {"name": "g", "arguments": ""},
                        }
                    ]
                }
            ),
            FIN,
            "[DONE]",
        ),
        "duplicate",
    ),
    (
        "error keys",
        frames(ROLE, {"error": {"message": "x", "type": "server_error"}}, "[DONE]"),
        "keys",
    ),
    (
        "after error",
        frames(
            ROLE,
            {"error": {"message": "x", "type": "t", "param": None, "code": None}},
            FIN,
            "[DONE]",
        ),
        "follow the error",
    ),
    (
        "duplicate refusal",
        frames(ROLE, ch({"content": "No."}), ch({"refusal": "No."}), FIN, "[DONE]"),
        "same text",
    ),
]


@pytest.mark.parametrize(("why", "body", "words"), BAD, ids=[b[0] for b in BAD])
def test_validator_rejects_grammar_violations(why: str, body: bytes, words: str) -> None:
    with pytest.raises(AssertionError) as ei:
        validate_chat_stream(body)
    assert words in str(ei.value), (why, str(ei.value))


def test_validator_checks_the_include_usage_contract() -> None:
    with pytest.raises(AssertionError, match="include_usage was requested"):
        validate_chat_stream(frames(ROLE, FIN, "[DONE]"), include_usage=True)
    with pytest.raises(AssertionError, match="not requested"):
        validate_chat_stream(frames(ROLE, FIN, USAGE, "[DONE]"), include_usage=False)
    assert json.dumps(USAGE)
