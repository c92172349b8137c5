"""Every fast path of the request codecs gives the bytes of the general path beside it.

The fast paths (a one-parse decode, a look-up by content, an agent loop's usual turn
built inline, the skipped code of fields the usual request leaves out) are taken only
while ``protocols._kit.fast_paths.FAST`` is on. Here each request body, in each client
protocol and toward each upstream, goes through ``pipeline.prepare`` (what production
runs) with every fast path off (``general_only``) and then on, three times from empty
tables (a look-up's miss, its second sighting, its hit): the upstream bytes, the
canonical request's bytes, the report, or the error must be the same every time.

The bodies: every recorded client request, and generated agent loops in each protocol
(tool sets of different schemas, texts, images and documents, calls with arguments of
every shape, results of text, JSON or an error, reasoning, mid-conversation system
turns, cache marks), including the edges that make a fast path decline (an unknown
top-level field, a rarer field, snake_case Gemini keys, media, custom tools).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxai_asgi import Upstream, ids, pipeline
from proxai_asgi.codec import PROTOCOLS
from proxai_asgi.errors import ProxyError
from proxai_asgi.protocols import get_codec
from proxai_asgi.protocols._kit import fast_paths, json_objects, tool_schemas
from tests.helpers import captures
from tests.protocols.test_settled_checks import RENDER, conversations

GEMINI = "gemini_generate_content"
_CAPTURE_PROTOCOL = {
    "anthropic_": "anthropic_messages",
    "chat_": "openai_chat_completions",
    "responses_": "openai_responses",
    "gemini_": GEMINI,
}


def _empty_tables() -> None:
    """Every content-keyed table the request codecs read, emptied."""
    tool_schemas.forget()
    json_objects.forget()
    ids.SAFE_IDS.clear()


def _translated(client: str, target: str, body: bytes, lossy: bool) -> tuple[Any, ...]:
    upstream = Upstream(target, "http://127.0.0.1:9", lossy=lossy)  # type: ignore[arg-type]
    model = "m" if client == GEMINI else None  # (a Gemini client names it in the URL)
    try:
        t = pipeline.prepare(get_codec(client), get_codec(target), body, upstream, model=model)  # type: ignore[arg-type]
    except ProxyError as e:
        return ("error", e.status, e.kind, e.message, e.param)
    return ("ok", t.body, msgspec.json.encode(t.request), t.dropped, t.wrapped)


def _same_both_ways(client: str, target: str, body: bytes, lossy: bool = False) -> tuple[Any, ...]:
    with fast_paths.general_only():
        _empty_tables()
        general = _translated(client, target, body, lossy)
    _empty_tables()
    for sighting in ("miss", "second sighting", "hit"):
        fast = _translated(client, target, body, lossy)
        assert fast == general, (sighting, fast, general)
    return general


def test_the_switch_turns_the_fast_paths_off_and_back_on() -> None:
    assert fast_paths.FAST.on
    with fast_paths.general_only():
        assert not fast_paths.FAST.on
    assert fast_paths.FAST.on


# ------------------------------------------------------------------ recorded requests


def _recorded() -> list[tuple[str, str]]:
    out = []
    for name in captures.capture_names():
        for prefix, protocol in _CAPTURE_PROTOCOL.items():
            if name.startswith(prefix):
                out.append((name, protocol))
    return out


@pytest.mark.parametrize("target", PROTOCOLS)
@pytest.mark.parametrize(("name", "client"), _recorded(), ids=[n for n, _ in _recorded()])
def test_a_recorded_request_gives_the_same_bytes_both_ways(
    name: str, client: str, target: str
) -> None:
    request = captures.load(name)["request"]  # (skips when the recording is absent)
    if "body" not in request:
        pytest.skip(f"{name} records no request body")
    _same_both_ways(client, target, json.dumps(request["body"]).encode())


# ------------------------------------------------------------- generated agent loops

_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    {"type": "object", "properties": {}},
    {},
    {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "description": "how many"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    },
    {"properties": {"x": {"type": "number"}}},
]
_NAMES = ["read", "write", "grep", "run"]
_ARGS: list[str] = ['{"path": "a.py"}', "{}", '{"n":3,"tags":["x","y"]}', '{"q": "\\u00fc\\"\\n"}']
_RESULTS = ["done", "", '{"ok": true}', "line 1\nline 2\n", " ü"]
_DATA = "aGk="


@st.composite
def _tool_sets(draw: st.DrawFn) -> list[tuple[str, str | None, dict[str, Any]]]:
    names = draw(st.lists(st.sampled_from(_NAMES), unique=True, max_size=3))
    return [
        (
            n,
            draw(st.sampled_from([None, f"{n}s a file", ""])),
            draw(st.sampled_from(_SCHEMAS)),
        )
        for n in names
    ]


@st.composite
def loops(draw: st.DrawFn) -> dict[str, Any]:
    """A protocol-free agent loop: its tools, system text, turns and odd corners."""
    tools = draw(_tool_sets())
    names = [t[0] for t in tools] or ["read"]
    turns: list[tuple[Any, ...]] = [("user", draw(st.sampled_from(["fix it", "", "ü"])), None)]
    n = 0
    for _ in range(draw(st.integers(0, 5))):
        k = draw(st.integers(0, 2))
        calls = []
        for _ in range(k):
            n += 1
            calls.append((f"call_{n}", draw(st.sampled_from(names)), draw(st.sampled_from(_ARGS))))
        said = draw(st.sampled_from(["", "let me look", "ok"]))
        extra = draw(st.sampled_from([None, None, None, "think", "image"]))
        turns.append(("assistant", said or ("" if calls else "hm"), calls, extra))
        if calls:
            results = [
                (cid, draw(st.sampled_from(_RESULTS)), draw(st.integers(0, 5)) == 0)
                for cid, _, _ in calls
            ]
            if draw(st.integers(0, 6)) == 0:
                results = results[:-1]  # a call left unanswered
            after = draw(st.sampled_from([None, None, "next", "image"]))
            turns.append(("results", results, after))
        else:
            turns.append(("user", draw(st.sampled_from(["go on", "image"])), None))
        if draw(st.integers(0, 8)) == 0:
            turns.append(("system", "be brief"))
    return {
        "tools": tools,
        "system": draw(st.sampled_from([None, "you code", ""])),
        "turns": turns,
        "mark": draw(st.integers(0, 3)) == 0,  # a cache mark (where the protocol has one)
        "odd": draw(st.sampled_from([None, None, None, "unknown", "rare", "custom"])),
        "stream": draw(st.booleans()),
        "choice": draw(st.sampled_from([None, "auto", *names])),
    }


def _declared(
    name: str, description: str | None, schema: dict[str, Any], key: str = "parameters"
) -> dict[str, Any]:
    """A function declaration, its schema under the protocol's ``key``."""
    out: dict[str, Any] = {"name": name, key: schema}
    if description is not None:
        out["description"] = description
    return out


def _anthropic(loop: dict[str, Any]) -> dict[str, Any]:
    mark = {"type": "ephemeral"} if loop["mark"] else None

    def text(s: str, marked: bool = False) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": s}
        if marked and mark:
            block["cache_control"] = mark
        return block

    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": _DATA},
    }
    messages: list[dict[str, Any]] = []
    for turn in loop["turns"]:
        if turn[0] == "user":
            said = turn[1]
            content: Any = [image] if said == "image" else said if not mark else [text(said, True)]
            messages.append({"role": "user", "content": content})
        elif turn[0] == "assistant":
            blocks: list[dict[str, Any]] = []
            if turn[3] == "think":
                blocks.append({"type": "thinking", "thinking": "hmm", "signature": "sig"})
            blocks += [text(turn[1])] if turn[1] else []
            blocks += [
                {"type": "tool_use", "id": cid, "name": name, "input": json.loads(args)}
                for cid, name, args in turn[2]
            ]
            messages.append({"role": "assistant", "content": blocks})
        elif turn[0] == "results":
            blocks = []
            for cid, said, error in turn[1]:
                block = {"type": "tool_result", "tool_use_id": cid, "content": said}
                if error:
                    block["is_error"] = True
                blocks.append(block)
            if turn[2] == "image":
                blocks.append(image)
            elif turn[2]:
                blocks.append(text(turn[2]))
            messages.append({"role": "user", "content": blocks or "ok"})
        else:
            messages.append({"role": "system", "content": turn[1]})
    body: dict[str, Any] = {"model": "m", "max_tokens": 64, "messages": messages}
    if loop["tools"]:
        body["tools"] = [_declared(*t, "input_schema") for t in loop["tools"]]
        if mark:
            body["tools"][-1]["cache_control"] = mark
    if loop["system"] is not None:
        body["system"] = [text(loop["system"], True)] if mark else loop["system"]
    if loop["choice"] == "auto":
        body["tool_choice"] = {"type": "auto"}
    elif loop["choice"]:
        body["tool_choice"] = {"type": "tool", "name": loop["choice"]}
    if loop["stream"]:
        body["stream"] = True
    if loop["odd"] == "unknown":
        body["context_management"] = {"edits": []}
    elif loop["odd"] == "rare":
        body["top_k"] = 5
    elif loop["odd"] == "custom":
        body.setdefault("tools", []).append({"type": "web_search_20250305", "name": "web_search"})
    return body


def _chat(loop: dict[str, Any]) -> dict[str, Any]:
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_DATA}"}}
    messages: list[dict[str, Any]] = []
    if loop["system"] is not None:
        messages.append({"role": "system", "content": loop["system"]})
    for turn in loop["turns"]:
        if turn[0] == "user":
            content: Any = [image] if turn[1] == "image" else turn[1]
            messages.append({"role": "user", "content": content})
        elif turn[0] == "assistant":
            m: dict[str, Any] = {"role": "assistant", "content": turn[1] or None}
            if turn[3] == "think":
                m["reasoning_content"] = "hmm"
            if turn[2]:
                m["tool_calls"] = [
                    {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                    for cid, name, args in turn[2]
                ]
            messages.append(m)
        elif turn[0] == "results":
            for cid, said, _error in turn[1]:
                messages.append({"role": "tool", "tool_call_id": cid, "content": said})
            if turn[2]:
                after = [image] if turn[2] == "image" else turn[2]
                messages.append({"role": "user", "content": after})
        else:
            messages.append({"role": "system", "content": turn[1]})
    body: dict[str, Any] = {"model": "m", "messages": messages}
    if loop["tools"]:
        body["tools"] = [{"type": "function", "function": _declared(*t)} for t in loop["tools"]]
    if loop["choice"] == "auto":
        body["tool_choice"] = "auto"
    elif loop["choice"]:
        body["tool_choice"] = {"type": "function", "function": {"name": loop["choice"]}}
    if loop["stream"]:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if loop["odd"] == "unknown":
        body["x_unknown"] = 1
    elif loop["odd"] == "rare":
        body["user"] = "u"
    elif loop["odd"] == "custom":
        body.setdefault("tools", []).append({"type": "custom", "custom": {"name": "patch"}})
    return body


def _responses(loop: dict[str, Any]) -> dict[str, Any]:
    image = {"type": "input_image", "image_url": f"data:image/png;base64,{_DATA}"}
    items: list[dict[str, Any]] = []
    for turn in loop["turns"]:
        if turn[0] == "user":
            content = [image] if turn[1] == "image" else [{"type": "input_text", "text": turn[1]}]
            items.append({"type": "message", "role": "user", "content": content})
        elif turn[0] == "assistant":
            if turn[3] == "think":
                items.append(
                    {"type": "reasoning", "summary": [], "encrypted_content": "gAAA", "id": "rs_1"}
                )
            if turn[1]:
                said = [{"type": "output_text", "text": turn[1]}]
                items.append({"type": "message", "role": "assistant", "content": said})
            items += [
                {"type": "function_call", "call_id": cid, "name": name, "arguments": args}
                for cid, name, args in turn[2]
            ]
        elif turn[0] == "results":
            for cid, said, _error in turn[1]:
                items.append({"type": "function_call_output", "call_id": cid, "output": said})
            if turn[2]:
                content = (
                    [image] if turn[2] == "image" else [{"type": "input_text", "text": turn[2]}]
                )
                items.append({"role": "user", "content": content})  # (an "easy" message)
        else:
            items.append({"type": "message", "role": "developer", "content": turn[1]})
    body: dict[str, Any] = {"model": "m", "input": items}
    if loop["system"]:
        body["instructions"] = loop["system"]
    if loop["tools"]:
        body["tools"] = [{"type": "function", **_declared(*t)} for t in loop["tools"]]
    if loop["choice"] == "auto":
        body["tool_choice"] = "auto"
    elif loop["choice"]:
        body["tool_choice"] = {"type": "function", "name": loop["choice"]}
    if loop["stream"]:
        body["stream"] = True
    if loop["odd"] == "unknown":
        body["store"] = False
        body["include"] = ["reasoning.encrypted_content"]
    elif loop["odd"] == "rare":
        body["top_p"] = 0.5
    elif loop["odd"] == "custom":
        body.setdefault("tools", []).append({"type": "custom", "name": "patch"})
    return body


def _gemini(loop: dict[str, Any]) -> dict[str, Any]:
    snake = loop["odd"] == "unknown"  # proto (snake_case) keys: the fast decode declines
    image = {("inline_data" if snake else "inlineData"): {"mimeType": "image/png", "data": _DATA}}
    contents: list[dict[str, Any]] = []
    for turn in loop["turns"]:
        if turn[0] == "user":
            parts = [image] if turn[1] == "image" else [{"text": turn[1]}]
            contents.append({"role": "user", "parts": parts})
        elif turn[0] == "assistant":
            parts = [{"text": "hmm", "thought": True}] if turn[3] == "think" else []
            parts += [{"text": turn[1]}] if turn[1] else []
            for k, (cid, name, args) in enumerate(turn[2]):
                call: dict[str, Any] = {"name": name, "args": json.loads(args)}
                if not cid.endswith("3"):  # (call_3, call_13: id-less calls)
                    call["id"] = cid
                part: dict[str, Any] = {"functionCall": call}
                if k == 0 and loop["mark"]:
                    part["thoughtSignature"] = "c2ln"
                parts.append(part)
            contents.append({"role": "model", "parts": parts or [{"text": "hm"}]})
        elif turn[0] == "results":
            parts = []
            for cid, said, error in turn[1]:
                name = next(
                    (
                        name
                        for t in loop["turns"]
                        if t[0] == "assistant"
                        for c, name, _ in t[2]
                        if c == cid
                    ),
                    "read",
                )
                answer: dict[str, Any] = {
                    "name": name,
                    "response": {"error" if error else "output": said},
                }
                if not cid.endswith("3"):
                    answer["id"] = cid
                parts.append({"functionResponse": answer})
            if turn[2]:
                parts.append(image if turn[2] == "image" else {"text": turn[2]})
            contents.append({"role": "user", "parts": parts or [{"text": "ok"}]})
    body: dict[str, Any] = {"contents": contents}
    if loop["system"]:
        body["system_instruction" if snake else "systemInstruction"] = {
            "parts": [{"text": loop["system"]}]
        }
    if loop["tools"]:
        body["tools"] = [
            {"functionDeclarations": [_declared(*t, "parametersJsonSchema") for t in loop["tools"]]}
        ]
    if loop["choice"] in (None, "auto"):
        pass
    else:
        body["toolConfig"] = {
            "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [loop["choice"]]}
        }
    if loop["odd"] == "rare":
        body["generationConfig"] = {"seed": 3, "maxOutputTokens": 64}
    elif loop["odd"] == "custom":
        body.setdefault("tools", []).append({"googleSearch": {}})
    return body


_RENDER = {
    "anthropic_messages": _anthropic,
    "openai_chat_completions": _chat,
    "openai_responses": _responses,
    GEMINI: _gemini,
}


@pytest.mark.parametrize("client", PROTOCOLS)
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(loop=loops(), target=st.sampled_from(PROTOCOLS), lossy=st.booleans())
def test_an_agent_loop_gives_the_same_bytes_both_ways(
    client: str, loop: dict[str, Any], target: str, lossy: bool
) -> None:
    body = msgspec.json.encode(_RENDER[client](loop))
    _same_both_ways(client, target, body, lossy)


@pytest.mark.parametrize("client", PROTOCOLS)
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    steps=conversations(),
    choice=st.sampled_from([None, "f", "g"]),
    target=st.sampled_from(PROTOCOLS),
    lossy=st.booleans(),
)
def test_a_stray_conversation_gives_the_same_bytes_both_ways(
    client: str, steps: list[Any], choice: str | None, target: str, lossy: bool
) -> None:
    """``test_settled_checks``' conversations: results naming other calls, calls left
    unanswered, media anywhere, bad base64 (errors must be the same too)."""
    body = msgspec.json.encode(RENDER[client](steps, choice))
    _same_both_ways(client, target, body, lossy)


def _usual_loop() -> dict[str, Any]:
    return {
        "tools": [("read", "reads", _SCHEMAS[0])],
        "system": "you code",
        "turns": [
            ("user", "fix it", None),
            ("assistant", "let me look", [("call_1", "read", '{"path": "a.py"}')], None),
            ("results", [("call_1", "done", False)], None),
        ],
        "mark": False,
        "odd": None,
        "stream": False,
        "choice": None,
    }


@pytest.mark.parametrize("client", PROTOCOLS)
def test_the_switch_decides_whether_the_look_ups_are_used(client: str) -> None:
    """The comparison above is not vacuous: with the switch on, an agent loop's request
    (sent twice, as a loop resends it) fills the tool look-ups, with it off it does not
    touch them."""
    body = msgspec.json.encode(_RENDER[client](_usual_loop()))
    for on in (True, False):
        _empty_tables()
        with fast_paths.general_only() if not on else contextlib.nullcontext():
            for _ in range(2):
                _translated(client, "anthropic_messages", body, False)
        assert (tool_schemas.entries() > 0) is on, (client, on)
