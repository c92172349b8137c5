"""``checks.check_request`` skips its walk over the messages when the client decoder
vouched for them (``TranslationReport.settled``). Here generated conversations (tool
calls and results that answer them, or not; images and documents with good and bad
base64; a ``tool_choice`` naming a declared tool or not) are rendered in each client
protocol and translated by ``pipeline.prepare`` twice: as production runs it, and with
the check replaced by the full walk of ``tests/helpers/full_check.py``. Both must give
the same upstream body or the same error (status, message, param), strict and lossy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxai_asgi import Upstream, checks, pipeline
from proxai_asgi import canonical as c
from proxai_asgi.codec import PROTOCOLS
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols import get_codec
from tests.helpers.full_check import full_check

# Conversation steps: ("user", parts), ("assistant", text, call ids, extras),
# ("results", [(call id, content)], trailing user parts). A part or a result's
# content: ("text", s), ("image", base64 data), ("file", base64 data), ("url", url);
# an assistant's extras: ("think", s) (reasoning in the protocol's shape) or media.
Part = tuple[str, str]
Step = tuple[Any, ...]

_IDS = ["c1", "c2", "c3"]
_DATA = ["aGk=", "aGk=\n", "not base64!", "ü", ""]
_URLS = [
    "https://example.com/a.png",
    "data:image/png;base64,aGk=",
    "data:image/png;base64,!!",
    "data:image/png,aGk=",
    "DATA:image/png;base64,aGk=",
]
_text = st.tuples(st.just("text"), st.sampled_from(["hi", "ok"]))
_media = st.tuples(st.sampled_from(["image", "file"]), st.sampled_from(_DATA)) | st.tuples(
    st.just("url"), st.sampled_from(_URLS)
)
_parts = st.lists(_text | _media, min_size=1, max_size=3)
_plain = st.lists(_text, min_size=1, max_size=2)
_content = st.one_of(
    st.just([("text", "done")]),
    st.just([]),
    st.lists(_text | _media, min_size=1, max_size=2),
)


@st.composite
def conversations(draw: st.DrawFn) -> list[Step]:
    """Mostly the shape of an agent loop (each call answered by the next turn), with
    strays: results naming other calls, calls left unanswered, media anywhere."""
    steps: list[Step] = [("user", draw(_parts | _plain))]
    for _ in range(draw(st.integers(0, 5))):
        calls = draw(st.lists(st.sampled_from(_IDS), max_size=2, unique=True))
        said = draw(st.sampled_from(["", "let me look"]))
        extras = draw(st.lists(st.just(("think", "hmm")) | _media, max_size=2))
        steps.append(("assistant", said or ("" if calls else "hm"), calls, extras))
        if not calls:
            steps.append(("user", draw(_plain | _parts)))
            continue
        answered = list(calls) if draw(st.integers(0, 5)) else calls[:1]
        if draw(st.integers(0, 6)) == 0:  # answers to whatever call
            answered = draw(st.lists(st.sampled_from([*_IDS, "stray"]), min_size=1, max_size=2))
        elif draw(st.integers(0, 4)) == 0:
            answered.append(draw(st.sampled_from([*_IDS, "stray"])))
        if draw(st.booleans()):
            answered.reverse()
        results = [(cid, draw(_content)) for cid in answered]
        after = draw(st.sampled_from([[], [("text", "next")]]) | _parts)
        steps.append(("results", results, after))
    return steps


# ------------------------------------------------------------------ renderers


def _anthropic_part(p: Part) -> dict[str, Any]:
    kind, value = p
    if kind == "text":
        return {"type": "text", "text": value}
    if kind == "url":
        return {"type": "image", "source": {"type": "url", "url": value}}
    media = "image/png" if kind == "image" else "application/pdf"
    block = "image" if kind == "image" else "document"
    return {"type": block, "source": {"type": "base64", "media_type": media, "data": value}}


def _anthropic(steps: list[Step], choice: str | None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for step in steps:
        if step[0] == "user":
            parts = step[1]
            plain = len(parts) == 1 and parts[0][0] == "text"
            content: Any = parts[0][1] if plain else [_anthropic_part(p) for p in parts]
            messages.append({"role": "user", "content": content})
        elif step[0] == "assistant":
            blocks: list[dict[str, Any]] = [
                {"type": "thinking", "thinking": x[1], "signature": "sig"}
                if x[0] == "think"
                else _anthropic_part(x)
                for x in step[3]
            ]
            blocks += [{"type": "text", "text": step[1]}] if step[1] else []
            blocks += [{"type": "tool_use", "id": i, "name": "f", "input": {}} for i in step[2]]
            messages.append({"role": "assistant", "content": blocks})
        else:
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": cid,
                    "content": body[0][1]
                    if len(body) == 1 and body[0][0] == "text"
                    else [_anthropic_part(p) for p in body],
                }
                for cid, body in step[1]
            ]
            blocks += [_anthropic_part(p) for p in step[2]]
            messages.append({"role": "user", "content": blocks})
    out: dict[str, Any] = {
        "model": "m",
        "max_tokens": 16,
        "messages": messages,
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    }
    if choice is not None:
        out["tool_choice"] = {"type": "tool", "name": choice}
    return out


def _data_url(kind: str, value: str) -> str:
    if kind == "url":
        return value
    return f"data:{'image/png' if kind == 'image' else 'application/pdf'};base64,{value}"


def _chat_part(p: Part) -> dict[str, Any]:
    kind, value = p
    if kind == "text":
        return {"type": "text", "text": value}
    if kind == "file":
        return {"type": "file", "file": {"file_data": _data_url(kind, value), "filename": "a.pdf"}}
    return {"type": "image_url", "image_url": {"url": _data_url(kind, value)}}


def _chat(steps: list[Step], choice: str | None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for step in steps:
        if step[0] == "user":
            parts = step[1]
            plain = len(parts) == 1 and parts[0][0] == "text"
            content = parts[0][1] if plain else [_chat_part(p) for p in parts]
            messages.append({"role": "user", "content": content})
        elif step[0] == "assistant":
            m: dict[str, Any] = {"role": "assistant", "content": step[1] or None}
            if ("think", "hmm") in step[3]:  # (a Chat assistant holds no media)
                m["reasoning_content"] = "hmm"
            if step[2]:
                m["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    for i in step[2]
                ]
            messages.append(m)
        else:
            for cid, body in step[1]:
                plain = len(body) == 1 and body[0][0] == "text"
                content = body[0][1] if plain else [_chat_part(p) for p in body]
                messages.append({"role": "tool", "tool_call_id": cid, "content": content})
            if step[2]:
                messages.append({"role": "user", "content": [_chat_part(p) for p in step[2]]})
    out: dict[str, Any] = {
        "model": "m",
        "messages": messages,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    }
    if choice is not None:
        out["tool_choice"] = {"type": "function", "function": {"name": choice}}
    return out


def _responses_part(p: Part) -> dict[str, Any]:
    kind, value = p
    if kind == "text":
        return {"type": "input_text", "text": value}
    if kind == "file":
        return {"type": "input_file", "file_data": _data_url(kind, value), "filename": "a.pdf"}
    return {"type": "input_image", "image_url": _data_url(kind, value)}


def _responses(steps: list[Step], choice: str | None) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for step in steps:
        if step[0] == "user":
            content = [_responses_part(p) for p in step[1]]
            items.append({"type": "message", "role": "user", "content": content})
        elif step[0] == "assistant":
            for x in step[3]:
                if x[0] == "think":
                    summary = [{"type": "summary_text", "text": x[1]}]
                    items.append({"type": "reasoning", "summary": summary})
            said = [_responses_part(x) for x in step[3] if x[0] != "think"]
            said += [{"type": "output_text", "text": step[1]}] if step[1] else []
            if said:
                items.append({"type": "message", "role": "assistant", "content": said})
            items += [
                {"type": "function_call", "call_id": i, "name": "f", "arguments": "{}"}
                for i in step[2]
            ]
        else:
            for cid, body in step[1]:
                plain = len(body) == 1 and body[0][0] == "text"
                output = body[0][1] if plain else [_responses_part(p) for p in body]
                items.append({"type": "function_call_output", "call_id": cid, "output": output})
            if step[2]:
                content = [_responses_part(p) for p in step[2]]
                items.append({"type": "message", "role": "user", "content": content})
    out: dict[str, Any] = {
        "model": "m",
        "input": items,
        "tools": [{"type": "function", "name": "f", "parameters": {}}],
    }
    if choice is not None:
        out["tool_choice"] = {"type": "function", "name": choice}
    return out


def _gemini_part(p: Part) -> dict[str, Any]:
    kind, value = p
    if kind == "text":
        return {"text": value}
    if kind == "url":
        return {"fileData": {"mimeType": "image/png", "fileUri": value}}
    mime = "image/png" if kind == "image" else "application/pdf"
    return {"inlineData": {"mimeType": mime, "data": value}}


def _gemini(steps: list[Step], choice: str | None) -> dict[str, Any]:
    contents: list[dict[str, Any]] = []
    for step in steps:
        if step[0] == "user":
            contents.append({"role": "user", "parts": [_gemini_part(p) for p in step[1]]})
        elif step[0] == "assistant":
            parts: list[dict[str, Any]] = [
                {"text": x[1], "thought": True} if x[0] == "think" else _gemini_part(x)
                for x in step[3]
            ]
            parts += [{"text": step[1]}] if step[1] else []
            parts += [{"functionCall": {"id": i, "name": "f", "args": {}}} for i in step[2]]
            contents.append({"role": "model", "parts": parts})
        else:
            parts = []
            for cid, body in step[1]:
                said = " ".join(v for k, v in body if k == "text")  # (no media in a response)
                answer: dict[str, Any] = {"name": "f", "response": {"output": said}}
                if cid != "c3":  # an id-less answer: the earliest call of its name
                    answer["id"] = cid
                parts.append({"functionResponse": answer})
            parts += [_gemini_part(p) for p in step[2]]
            contents.append({"role": "user", "parts": parts})
    out: dict[str, Any] = {
        "contents": contents,
        "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT"}}]}],
    }
    if choice is not None:
        out["toolConfig"] = {
            "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice]}
        }
    return out


RENDER: dict[str, Callable[[list[Step], str | None], dict[str, Any]]] = {
    "anthropic_messages": _anthropic,
    "openai_chat_completions": _chat,
    "openai_responses": _responses,
    "gemini_generate_content": _gemini,
}


# ------------------------------------------------------------------- the property


def _prepare(client: str, target: str, body: bytes, lossy: bool) -> tuple[Any, ...]:
    upstream = Upstream(target, "http://127.0.0.1:9", lossy=lossy)  # type: ignore[arg-type]
    try:
        t = pipeline.prepare(get_codec(client), get_codec(target), body, upstream, model="m")  # type: ignore[arg-type]
    except ProxyError as e:
        return ("error", e.status, e.kind, e.message, e.param)
    return ("ok", t.body, t.dropped)


def _oracle(request: c.Request, *, lossy: bool = False, settled: bool = False) -> None:
    full_check(request, lossy=lossy)


@pytest.mark.parametrize("client", PROTOCOLS)
@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    steps=conversations(),
    choice=st.sampled_from([None, "f", "g"]),
    lossy=st.booleans(),
    target=st.sampled_from(PROTOCOLS),
)
def test_a_vouched_request_is_checked_as_the_full_walk_checks_it(
    client: str, steps: list[Step], choice: str | None, lossy: bool, target: str
) -> None:
    if target == client:
        target = PROTOCOLS[(PROTOCOLS.index(client) + 1) % len(PROTOCOLS)]
    body = msgspec.json.encode(RENDER[client](steps, choice))
    ours = _prepare(client, target, body, lossy)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(checks, "check_request", _oracle)
        theirs = _prepare(client, target, body, lossy)
    assert ours == theirs


# ------------------------------------------------- the usual turns are vouched for

_LOOP: list[Step] = [
    ("user", [("text", "fix it")]),
    ("assistant", "let me look", ["c1"], []),
    ("results", [("c1", [("text", "done")])], []),
    ("assistant", "and this", ["c2"], [("think", "hmm")]),
    ("results", [("c2", [("text", "done")])], [("text", "next")]),
]


def _settled(client: str, steps: list[Step]) -> bool:
    report = TranslationReport()
    get_codec(client).decode_request(msgspec.json.encode(RENDER[client](steps, None)), report)  # type: ignore[arg-type]
    return report.settled


@pytest.mark.parametrize("client", PROTOCOLS)
def test_an_agent_loop_is_settled_by_its_decoder(client: str) -> None:
    assert _settled(client, _LOOP)


@pytest.mark.parametrize("client", PROTOCOLS)
@pytest.mark.parametrize(
    "late",
    [
        ("user", [("text", "see"), ("image", "aGk=")]),
        ("results", [("stray", [("text", "x")])], []),
    ],
    ids=["media", "stray-result"],
)
def test_media_or_a_stray_result_leaves_the_check_to_the_full_walk(client: str, late: Step) -> None:
    assert not _settled(client, [*_LOOP, late])
