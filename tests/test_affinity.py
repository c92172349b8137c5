"""``routing.affinity.session_of``: which conversation a request belongs to, from what
each protocol's clients send (headers, body fields) and, last, the conversation's
prefix; scoped to the client's credential; never failing on odd input.

Turn 2 of a conversation is built the way clients build it: turn 1's request, the
recorded answer to it, and the next user message or tool results."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from proxai_asgi.codec import Codec, ProtocolName
from proxai_asgi.protocols import all_codecs, get_codec
from proxai_asgi.routing.affinity import GENERIC_HEADERS, session_of
from tests.helpers import captures

ANTHROPIC: ProtocolName = "anthropic_messages"
CHAT: ProtocolName = "openai_chat_completions"
RESPONSES: ProtocolName = "openai_responses"
GEMINI: ProtocolName = "gemini_generate_content"
KEY = b"sk-client-1"


def _session(
    protocol: ProtocolName,
    body: Any,
    headers: list[tuple[bytes, bytes]] | None = None,
    credential: bytes | None = KEY,
) -> str | None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return session_of(get_codec(protocol), headers or [], raw, credential)


def _recorded(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A recording's request body and its JSON answer (a stream's final response)."""
    data = captures.load(name)
    answer = data["response"]["body"]
    if isinstance(answer, str) and answer.startswith("event:"):
        done = [
            json.loads(line[6:])
            for line in answer.splitlines()
            if line.startswith("data: ") and '"response.completed"' in line
        ]
        return data["request"]["body"], done[0]["response"]
    return data["request"]["body"], json.loads(answer) if isinstance(answer, str) else answer


# ---------------------------------------------------------------- turn 2, per protocol


def _anthropic_turn2(req: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    calls = [b for b in answer["content"] if b["type"] == "tool_use"]
    results = [{"type": "tool_result", "tool_use_id": c["id"], "content": "42"} for c in calls]
    # Claude Code moves its cache breakpoint to the newest message each turn.
    results.append({"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}})
    return {
        **req,
        "messages": [
            *req["messages"],
            {"role": "assistant", "content": answer["content"]},
            {"role": "user", "content": results},
        ],
    }


def _chat_turn2(req: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    message = answer["choices"][0]["message"]
    results = [
        {"role": "tool", "tool_call_id": c["id"], "content": "42"}
        for c in message.get("tool_calls") or []
    ]
    follow = results or [{"role": "user", "content": "go on"}]
    return {**req, "messages": [*req["messages"], message, *follow]}


def _responses_turn2(req: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    first = req["input"]
    items = [{"role": "user", "content": first}] if isinstance(first, str) else first
    results = [
        {"type": "function_call_output", "call_id": o["call_id"], "output": "42"}
        for o in answer["output"]
        if o["type"] == "function_call"
    ]
    follow = results or [{"role": "user", "content": [{"type": "input_text", "text": "go on"}]}]
    return {**req, "input": [*items, *answer["output"], *follow]}


def _gemini_turn2(req: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    content = answer["candidates"][0]["content"]
    calls = [p["functionCall"] for p in content["parts"] if "functionCall" in p]
    parts = [{"functionResponse": {"name": c["name"], "response": {"r": 42}}} for c in calls]
    follow = {"role": "user", "parts": parts or [{"text": "go on"}]}
    return {**req, "contents": [*req["contents"], content, follow]}


TURN2 = {
    ANTHROPIC: _anthropic_turn2,
    CHAT: _chat_turn2,
    RESPONSES: _responses_turn2,
    GEMINI: _gemini_turn2,
}
# Two recorded conversations per protocol that start differently.
CONVERSATIONS: dict[ProtocolName, tuple[str, str]] = {
    ANTHROPIC: ("anthropic_json_parallel_tool_use", "anthropic_json_text_basic"),
    CHAT: ("chat_json_parallel_tool_calls", "chat_json_text_basic"),
    RESPONSES: ("responses_sse_parallel_function_calls", "responses_json_text_basic"),
    GEMINI: ("gemini_json_tools", "gemini_json_text_basic"),
}


@pytest.mark.parametrize("protocol", list(CONVERSATIONS))
@pytest.mark.parametrize("which", [0, 1])
def test_prefix_session_is_the_same_for_turn_1_and_turn_2(
    protocol: ProtocolName, which: int
) -> None:
    req, answer = _recorded(CONVERSATIONS[protocol][which])
    turn1 = _session(protocol, req)
    turn2 = _session(protocol, TURN2[protocol](req, answer))
    turn3 = _session(protocol, TURN2[protocol](TURN2[protocol](req, answer), answer))
    assert turn1 is not None
    assert turn1 == turn2 == turn3


@pytest.mark.parametrize("protocol", list(CONVERSATIONS))
def test_prefix_session_differs_between_two_conversations(protocol: ProtocolName) -> None:
    (a, a_answer), (b, _) = (_recorded(n) for n in CONVERSATIONS[protocol])
    assert _session(protocol, TURN2[protocol](a, a_answer)) != _session(protocol, b)


# The same conversation opened with another first message, system text or tool set:
# each is another prompt cache, so another session.
def _edit_first_user_text(protocol: ProtocolName, body: dict[str, Any]) -> dict[str, Any]:
    body = json.loads(json.dumps(body))
    if protocol == GEMINI:
        body["contents"][0]["parts"][0]["text"] += "!"
        return body
    messages = body["input" if protocol == RESPONSES else "messages"]
    user = next(m for m in messages if m["role"] == "user")
    user["content"] += "!"
    return body


def _edit_system(protocol: ProtocolName, body: dict[str, Any]) -> dict[str, Any]:
    body = json.loads(json.dumps(body))
    if protocol == ANTHROPIC:
        body["system"][0]["text"] += "!"
    elif protocol == GEMINI:
        body["systemInstruction"]["parts"][0]["text"] += "!"
    else:
        body["input" if protocol == RESPONSES else "messages"][0]["content"] += "!"
    return body


def _edit_tool_name(protocol: ProtocolName, body: dict[str, Any]) -> dict[str, Any]:
    body = json.loads(json.dumps(body))
    tool = body["tools"][0]
    if protocol == CHAT:
        tool = tool["function"]
    elif protocol == GEMINI:
        tool = tool["functionDeclarations"][0]
    tool["name"] += "_2"
    return body


@pytest.mark.parametrize("protocol", list(CONVERSATIONS))
@pytest.mark.parametrize("edit", [_edit_first_user_text, _edit_system, _edit_tool_name])
def test_prefix_session_changes_with_the_opening(protocol: ProtocolName, edit: Any) -> None:
    req, _ = _recorded(CONVERSATIONS[protocol][0])
    assert _session(protocol, edit(protocol, req)) != _session(protocol, req)


def test_a_string_input_and_its_list_form_are_one_responses_session() -> None:
    as_string = {"model": "m", "input": "What is 4200 + 42?"}
    as_list = {
        "model": "m",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "What is 4200 + 42?"}]},
            {"role": "user", "content": "more"},
        ],
    }
    assert _session(RESPONSES, as_string) == _session(RESPONSES, as_list) is not None


def test_anthropic_cache_breakpoints_do_not_change_the_session() -> None:
    text = {"type": "text", "text": "hello"}
    plain = {"system": [text], "messages": [{"role": "user", "content": [text]}]}
    marked = {**text, "cache_control": {"type": "ephemeral"}}
    cached = {"system": [marked], "messages": [{"role": "user", "content": [marked]}]}
    as_string = {"system": "hello", "messages": [{"role": "user", "content": "hello"}]}
    assert (
        _session(ANTHROPIC, plain) == _session(ANTHROPIC, cached) == _session(ANTHROPIC, as_string)
    )


def test_gemini_snake_case_fields_and_roleless_contents_are_read() -> None:
    camel = {
        "systemInstruction": {"parts": [{"text": "s"}]},
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    }
    snake = {
        "system_instruction": {"parts": [{"text": "s"}]},
        "contents": [{"parts": [{"text": "hi"}]}],
    }
    assert _session(GEMINI, camel) == _session(GEMINI, snake) is not None
    assert _session(GEMINI, {**camel, "cachedContent": "cachedContents/abc"}) == _session(
        GEMINI, {**camel, "cached_content": "cachedContents/abc"}
    )


@pytest.mark.parametrize("protocol", list(CONVERSATIONS))
def test_no_user_message_names_no_session(protocol: ProtocolName) -> None:
    empty: dict[str, Any] = (
        {"contents": []} if protocol == GEMINI else {"messages": [], "input": []}
    )
    assert _session(protocol, empty) is None
    assert _session(protocol, b"{}") is None


# ---------------------------------------------------------------- explicit sources

# Per protocol: the headers its clients send, and a body field naming the session.
HEADERS: dict[ProtocolName, tuple[bytes, ...]] = {
    ANTHROPIC: (b"x-claude-code-session-id",),
    CHAT: (b"session-id", b"session_id"),
    RESPONSES: (b"session-id", b"session_id"),
    GEMINI: (),
}
FIELDS: dict[ProtocolName, tuple[dict[str, Any], dict[str, Any]]] = {
    ANTHROPIC: ({"metadata": {"user_id": "u-1"}}, {"metadata": {"user_id": "u-2"}}),
    CHAT: ({"prompt_cache_key": "k-1"}, {"prompt_cache_key": "k-2"}),
    RESPONSES: ({"prompt_cache_key": "k-1"}, {"prompt_cache_key": "k-2"}),
    GEMINI: ({"cachedContent": "cachedContents/1"}, {"cachedContent": "cachedContents/2"}),
}
OPENINGS: dict[ProtocolName, dict[str, Any]] = {
    ANTHROPIC: {"messages": [{"role": "user", "content": "hi"}]},
    CHAT: {"messages": [{"role": "user", "content": "hi"}]},
    RESPONSES: {"input": "hi"},
    GEMINI: {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
}
HEADER_CASES = [(p, h) for p, names in HEADERS.items() for h in (*names, *GENERIC_HEADERS)]


def test_codecs_declare_the_session_headers_their_clients_send() -> None:
    assert {c.name: c.session_headers for c in all_codecs()} == HEADERS


@pytest.mark.parametrize(("protocol", "header"), HEADER_CASES)
def test_a_session_header_names_the_session(protocol: ProtocolName, header: bytes) -> None:
    body = OPENINGS[protocol]
    one = _session(protocol, body, [(header, b"conv-1")])
    # The header wins over the prefix: another conversation, same header, same session.
    assert one == _session(protocol, {**body, **_other_opening(protocol)}, [(header, b"conv-1")])
    assert one != _session(protocol, body, [(header, b"conv-2")])
    assert one != _session(protocol, body)


def _other_opening(protocol: ProtocolName) -> dict[str, Any]:
    return json.loads(json.dumps(OPENINGS[protocol]).replace('"hi"', '"bye"'))


@pytest.mark.parametrize("protocol", list(FIELDS))
def test_a_body_field_names_the_session(protocol: ProtocolName) -> None:
    first, second = FIELDS[protocol]
    body, other = OPENINGS[protocol], _other_opening(protocol)
    one = _session(protocol, {**body, **first})
    assert one is not None
    assert one == _session(protocol, {**other, **first})  # wins over the prefix
    assert one != _session(protocol, {**body, **second})
    assert one != _session(protocol, body)


@pytest.mark.parametrize("protocol", list(FIELDS))
def test_headers_come_before_the_body(protocol: ProtocolName) -> None:
    body = {**OPENINGS[protocol], **FIELDS[protocol][0]}
    header = [(GENERIC_HEADERS[0], b"pinned")]
    assert _session(protocol, body, header) == _session(protocol, OPENINGS[protocol], header)
    assert _session(protocol, body, header) != _session(protocol, body)


@pytest.mark.parametrize("protocol", [p for p, names in HEADERS.items() if names])
def test_the_clients_own_header_comes_before_the_generic_one(protocol: ProtocolName) -> None:
    own = HEADERS[protocol][0]
    both = [(GENERIC_HEADERS[0], b"pinned"), (own, b"conv-1")]
    assert _session(protocol, {}, both) == _session(protocol, {}, [(own, b"conv-1")])
    if len(HEADERS[protocol]) > 1:  # the first spelling declared wins, in any order
        spellings = [(HEADERS[protocol][1], b"b"), (own, b"a")]
        assert _session(protocol, {}, spellings) == _session(protocol, {}, [(own, b"a")])


def test_a_header_sent_twice_counts_by_its_first_value() -> None:
    twice = [(b"x-session-affinity", b"a"), (b"x-session-affinity", b"b")]
    assert _session(CHAT, {}, twice) == _session(CHAT, {}, twice[:1])


def test_the_source_scopes_the_session() -> None:
    """The same value from two places (two headers, a header and a body field) names
    two sessions."""
    value = "conv-1"
    names = [
        _session(ANTHROPIC, {}, [(b"x-claude-code-session-id", value.encode())]),
        _session(ANTHROPIC, {}, [(GENERIC_HEADERS[0], value.encode())]),
        _session(ANTHROPIC, {"metadata": {"user_id": value}}),
        _session(CHAT, {"prompt_cache_key": value}),
    ]
    assert len(set(names)) == len(names)


def test_an_empty_header_or_field_is_not_a_session() -> None:
    body = OPENINGS[ANTHROPIC]
    prefix = _session(ANTHROPIC, body)
    assert _session(ANTHROPIC, body, [(b"x-claude-code-session-id", b" ")]) == prefix
    assert _session(ANTHROPIC, {**body, "metadata": {"user_id": ""}}) == prefix
    assert _session(CHAT, {**OPENINGS[CHAT], "prompt_cache_key": ""}) == _session(
        CHAT, OPENINGS[CHAT]
    )


# ---------------------------------------------------------------- credential scoping


@pytest.mark.parametrize(("protocol", "header"), HEADER_CASES)
def test_two_credentials_with_one_session_header_are_two_sessions(
    protocol: ProtocolName, header: bytes
) -> None:
    body, headers = OPENINGS[protocol], [(header, b"conv-1")]
    a = _session(protocol, body, headers, b"sk-a")
    assert a == _session(protocol, body, headers, b"sk-a")
    assert (
        len(
            {
                a,
                _session(protocol, body, headers, b"sk-b"),
                _session(protocol, body, headers, None),
                _session(protocol, body, headers, b""),
            }
        )
        == 4
    )


@pytest.mark.parametrize("protocol", list(FIELDS))
def test_two_credentials_with_one_body_or_prefix_are_two_sessions(protocol: ProtocolName) -> None:
    for body in ({**OPENINGS[protocol], **FIELDS[protocol][0]}, OPENINGS[protocol]):
        assert _session(protocol, body, credential=b"sk-a") != _session(
            protocol, body, credential=b"sk-b"
        )


def test_the_session_shows_neither_the_value_nor_the_credential() -> None:
    name = _session(ANTHROPIC, {}, [(b"x-claude-code-session-id", b"abcdef")], b"sk-secret")
    assert name is not None and len(name) == 32
    assert int(name, 16) >= 0  # hex
    assert "abcdef" not in name and "secret" not in name


# ---------------------------------------------------------------- odd input

ODD_BODIES = [
    b"",
    b"not json",
    b"[]",
    b"null",
    b"42",
    b'"text"',
    b"\xff\xfe{",
    b'{"messages": ',
    b'{"messages": "hi"}',
    b'{"messages": [1, "x", null, {"role": 5}]}',
    b'{"messages": [{"role": "user", "content": {"nested": true}}]}',
    b'{"messages": [{"role": "user", "content": [1, "x", {"text": 5}]}]}',
    b'{"input": 7}',
    b'{"input": [{"role": "user", "content": null}]}',
    b'{"contents": [{"parts": "x"}], "systemInstruction": "sys"}',
    b'{"tools": "x", "messages": [{"role": "user", "content": "hi"}]}',
    b'{"tools": [{"function": 3}, 7], "messages": [{"role": "user", "content": "hi"}]}',
    b'{"tools": [{"functionDeclarations": "x"}], "contents": [{"parts": [{"text": "hi"}]}]}',
    b'{"metadata": "user", "messages": [{"role": "user", "content": "hi"}]}',
    b'{"metadata": {"user_id": 12}}',
    b'{"metadata": {"user_id": {"a": [1]}}}',
    b'{"metadata": {"user_id": null}}',
    b'{"prompt_cache_key": 5}',
    b'{"prompt_cache_key": ["a"]}',
    b'{"cachedContent": false}',
    b'{"system": 5, "messages": [{"role": "user", "content": "hi"}]}',
    b'{"instructions": {"x": 1}, "input": "hi"}',
    b'{"messages": [{"role": "user", "content": "' + b"x" * 3_000_000 + b'"}]}',
    b'{"metadata": {"user_id": "' + b"u" * 3_000_000 + b'"}}',
    b"[" * 100_000,
]
ALL = [c.name for c in all_codecs()]


@pytest.mark.parametrize("protocol", ALL)
@pytest.mark.parametrize("body", ODD_BODIES, ids=range(len(ODD_BODIES)))
def test_odd_bodies_never_raise(protocol: ProtocolName, body: bytes) -> None:
    name = _session(protocol, body)
    assert name is None or len(name) == 32


def test_a_non_string_user_id_falls_back_to_the_prefix() -> None:
    body = OPENINGS[ANTHROPIC]
    for user_id in (12, None, {"a": 1}, ["x"], True):
        assert _session(ANTHROPIC, {**body, "metadata": {"user_id": user_id}}) == _session(
            ANTHROPIC, body
        )


def test_huge_and_binary_header_values_are_hashed() -> None:
    huge = [(b"x-session-affinity", b"\x00\xff" * 500_000)]
    assert _session(CHAT, b"not json", huge) is not None


@pytest.mark.parametrize("protocol", ALL)
def test_cut_and_mutated_recordings_never_raise(protocol: ProtocolName) -> None:
    """Every recorded request of the protocol, cut at many places and with bytes
    flipped: odd bodies real clients could send."""
    prefix = {ANTHROPIC: "anthropic_", CHAT: "chat_", RESPONSES: "responses_", GEMINI: "gemini_"}
    rng = random.Random(28)
    codec: Codec = get_codec(protocol)
    for name in captures.capture_names(prefix[protocol]):
        if not captures.present(name) or not isinstance(
            captures.load(name)["request"].get("body"), dict
        ):
            continue
        body = captures.request_body(name)
        for _ in range(40):
            cut = body[: rng.randrange(len(body))]
            flipped = bytearray(body)
            flipped[rng.randrange(len(body))] = rng.randrange(256)
            for odd in (cut, bytes(flipped)):
                session_of(codec, [], odd, KEY)
