"""A strict validator of the Chat Completions stream grammar, for the SSE a Chat client
receives. Raises AssertionError with a clear message on the first violation.

Rules (OpenAI's wire behaviour plus DESIGN.md "Wire facts"):
- data-only SSE: every frame is ``data: <payload>\\n\\n``, no ``event:`` lines;
- the stream ends with exactly one ``data: [DONE]`` and nothing after it;
- every chunk has the same ``id`` (``chatcmpl-`` prefix), ``created`` (int), ``model``,
  and ``object == "chat.completion.chunk"``;
- chunks with choices have exactly one choice, index 0; the first chunk's delta carries
  ``role: "assistant"`` and no later delta carries a role;
- only the role chunk may carry an empty ``content``; no other delta is empty except the
  finish chunk's ``{}``;
- ``tool_calls[].index`` values appear in order 0, 1, 2...; a call's first fragment has
  ``id``, ``type`` and the name (``arguments`` / ``input`` == ""), later fragments carry
  neither id, type nor name; ids are unique; a fragment's kind matches its call's type;
- exactly one ``finish_reason`` (a valid value), on a chunk with an empty delta, after all
  content; then optionally one usage-only chunk (``choices: []``, consistent totals),
  required when ``include_usage`` is True and forbidden when False; then ``[DONE]``;
- an error chunk ``{"error": {message, type, param, code}}`` (all four keys) may end the
  stream at any point; only ``[DONE]`` follows it;
- refusal text never equals the content text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call"})
DELTA_KEYS = frozenset(
    {"role", "content", "refusal", "reasoning_content", "tool_calls", "annotations"}
)


@dataclass
class ChatStream:
    """What a validated stream said."""

    chunks: list[dict[str, Any]] = field(default_factory=list)
    content: str | None = None
    refusal: str | None = None
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    id: str | None = None
    created: int | None = None
    model: str | None = None


def _frames(body: bytes) -> list[str]:
    text = body.decode("utf-8")
    assert text.endswith("\n\n"), f"stream does not end with a blank line: {text[-40:]!r}"
    frames = text[:-2].split("\n\n")
    out: list[str] = []
    for i, fr in enumerate(frames):
        assert fr.startswith("data: "), f"frame {i} is not a data-only frame: {fr[:80]!r}"
        assert "\n" not in fr, f"frame {i} has more than one line: {fr[:80]!r}"
        out.append(fr[len("data: ") :])
    return out


def validate_chat_stream(body: bytes, include_usage: bool | None = None) -> ChatStream:
    frames = _frames(body)
    assert frames, "empty stream"
    assert frames[-1] == "[DONE]", f"stream does not end with data: [DONE]: {frames[-1][:80]!r}"
    assert frames.count("[DONE]") == 1, "more than one [DONE]"
    s = ChatStream()
    tools: dict[int, dict[str, Any]] = {}
    ids_seen: set[str] = set()
    content_parts: list[str] = []
    refusal_parts: list[str] = []
    reasoning_parts: list[str] = []
    finished = False
    for n, payload in enumerate(frames[:-1]):
        obj = json.loads(payload)
        assert isinstance(obj, dict), f"chunk {n} is not an object"
        if "error" in obj:
            err = obj["error"]
            assert set(obj) == {"error"}, f"error chunk {n} has extra keys {sorted(obj)}"
            assert isinstance(err, dict), "error is not an object"
            keys = {"message", "type", "param", "code"}
            assert set(err) == keys, f"error chunk keys {sorted(err)} != {sorted(keys)}"
            assert isinstance(err["message"], str) and err["message"], "error without message"
            assert isinstance(err["type"], str) and err["type"], "error without type"
            assert n == len(frames) - 2, "chunks follow the error chunk"
            s.error = err
            break
        s.chunks.append(obj)
        assert obj.get("object") == "chat.completion.chunk", (
            f"chunk {n} object {obj.get('object')!r}"
        )
        assert isinstance(obj.get("id"), str) and obj["id"].startswith("chatcmpl-"), (
            f"chunk {n} id {obj.get('id')!r} lacks the chatcmpl- prefix"
        )
        assert isinstance(obj.get("created"), int), f"chunk {n} created is not an int"
        assert isinstance(obj.get("model"), str), f"chunk {n} model is not a string"
        if s.id is None:
            s.id, s.created, s.model = obj["id"], obj["created"], obj["model"]
        else:
            assert obj["id"] == s.id, f"chunk {n} id {obj['id']!r} != {s.id!r}"
            assert obj["created"] == s.created, f"chunk {n} created changed"
            assert obj["model"] == s.model, f"chunk {n} model changed"
        choices = obj.get("choices")
        assert isinstance(choices, list), f"chunk {n} has no choices list"
        if not choices:
            assert finished, f"usage-only chunk {n} before finish_reason"
            assert s.usage is None, "more than one usage chunk"
            u = obj.get("usage")
            assert isinstance(u, dict), f"chunk {n} has empty choices and no usage"
            for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
                assert isinstance(u.get(k), int) and u[k] >= 0, f"usage.{k} invalid: {u.get(k)!r}"
            assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], (
                "usage.total_tokens != prompt_tokens + completion_tokens"
            )
            s.usage = u
            continue
        assert not finished, f"chunk {n} with choices after finish_reason"
        assert len(choices) == 1, f"chunk {n} has {len(choices)} choices"
        ch = choices[0]
        assert ch.get("index") == 0, f"chunk {n} choice index {ch.get('index')!r}"
        delta = ch.get("delta")
        assert isinstance(delta, dict), f"chunk {n} has no delta object"
        unknown = set(delta) - DELTA_KEYS
        assert not unknown, f"chunk {n} delta has unknown keys {sorted(unknown)}"
        fr = ch.get("finish_reason")
        if len(s.chunks) == 1:
            assert delta.get("role") == "assistant", "first chunk does not carry role assistant"
            assert fr is None, "finish_reason on the role chunk"
        else:
            assert "role" not in delta, f"chunk {n} repeats the role"
        if fr is not None:
            assert fr in FINISH_REASONS, f"invalid finish_reason {fr!r}"
            assert delta == {}, f"finish chunk {n} carries a delta {delta}"
            s.finish_reason = fr
            finished = True
            continue
        if len(s.chunks) > 1:
            assert delta, f"chunk {n} has an empty delta"
        for key in ("content", "refusal", "reasoning_content"):
            if key in delta:
                v = delta[key]
                assert isinstance(v, str), f"chunk {n} delta.{key} is not a string"
                if not (key == "content" and len(s.chunks) == 1):
                    assert v, f"chunk {n} delta.{key} is empty"
        content_parts.append(delta.get("content") or "")
        refusal_parts.append(delta.get("refusal") or "")
        reasoning_parts.append(delta.get("reasoning_content") or "")
        if "annotations" in delta:
            assert isinstance(delta["annotations"], list) and delta["annotations"]
            for a in delta["annotations"]:
                assert a.get("type") == "url_citation", f"annotation type {a.get('type')!r}"
                u = a.get("url_citation")
                assert isinstance(u, dict) and set(u) == {
                    "url",
                    "title",
                    "start_index",
                    "end_index",
                }, f"bad url_citation {u}"
                assert 0 <= u["start_index"] <= u["end_index"], f"bad annotation span {u}"
            s.annotations.extend(delta["annotations"])
        for tc in delta.get("tool_calls") or ():
            _tool_fragment(n, tc, tools, ids_seen)
    assert s.error is not None or finished, "stream ended without finish_reason or error"
    if s.error is None and include_usage is not None:
        if include_usage:
            assert s.usage is not None, "include_usage was requested but no usage chunk came"
        else:
            assert s.usage is None, "usage chunk sent although include_usage was not requested"
    s.content = "".join(content_parts) or None
    s.refusal = "".join(refusal_parts) or None
    s.reasoning = "".join(reasoning_parts) or None
    s.tool_calls = [tools[i] for i in sorted(tools)]
    if s.content is not None and s.refusal is not None:
        assert s.content != s.refusal, "the same text is in both content and refusal"
    for a in s.annotations:
        assert a["url_citation"]["end_index"] <= len(s.content or ""), "annotation past content"
    return s


def _tool_fragment(
    n: int, tc: dict[str, Any], tools: dict[int, dict[str, Any]], ids_seen: set[str]
) -> None:
    idx = tc.get("index")
    assert isinstance(idx, int), f"chunk {n} tool call without an int index"
    if idx not in tools:
        assert idx == len(tools), f"chunk {n} tool call index {idx} skips {len(tools)}"
        ttype = tc.get("type")
        assert ttype in ("function", "custom"), f"chunk {n} tool call {idx} type {ttype!r}"
        cid = tc.get("id")
        assert isinstance(cid, str) and cid, f"chunk {n} tool call {idx} starts without an id"
        assert cid not in ids_seen, f"duplicate tool call id {cid!r}"
        ids_seen.add(cid)
        body = tc.get(ttype)
        assert isinstance(body, dict), f"chunk {n} tool call {idx} lacks its {ttype} object"
        name = body.get("name")
        assert isinstance(name, str) and name, f"chunk {n} tool call {idx} starts without a name"
        arg_key = "arguments" if ttype == "function" else "input"
        assert body.get(arg_key) == "", f"chunk {n} tool call {idx} first {arg_key} not empty"
        tools[idx] = {"id": cid, "type": ttype, "name": name, "arguments": ""}
        return
    call = tools[idx]
    assert "id" not in tc and "type" not in tc, f"chunk {n} tool call {idx} repeats id/type"
    ttype = call["type"]
    other = "custom" if ttype == "function" else "function"
    assert other not in tc, f"chunk {n} tool call {idx} switches kind"
    body = tc.get(ttype)
    assert isinstance(body, dict), f"chunk {n} tool call {idx} fragment lacks {ttype}"
    assert "name" not in body, f"chunk {n} tool call {idx} repeats its name"
    frag = body.get("arguments" if ttype == "function" else "input")
    assert isinstance(frag, str) and frag, f"chunk {n} tool call {idx} empty fragment"
    call["arguments"] += frag
