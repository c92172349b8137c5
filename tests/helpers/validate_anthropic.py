"""A strict validator of the Anthropic Messages stream grammar, for the SSE an Anthropic
client receives. Raises AssertionError with a clear message on the first violation.

Rules (the real API's behaviour plus DESIGN.md "Wire facts"):
- every frame is exactly ``event: <type>\\ndata: <json>\\n\\n`` with the event name equal
  to the data's ``type``; no ``[DONE]``, no comments, no other fields;
- the stream is ``message_start (block)* message_delta message_stop``, or ends with one
  ``error`` event (possibly as its very first event) and nothing after; ``ping`` may
  appear after ``message_start``;
- ``message_start.message``: ``msg_`` id, type ``message``, role ``assistant``, a model,
  ``content == []``, null stop fields, integer ``usage.input_tokens``/``output_tokens``;
- a block is ``content_block_start``, deltas, ``content_block_stop``; block indexes are
  0, 1, 2... in order; only one block is open at a time;
- block starts: ``text`` with ``text == ""``; ``thinking`` with empty ``thinking`` and
  ``signature``; ``redacted_thinking`` with string ``data``; ``tool_use`` with an id
  matching ``^[a-zA-Z0-9_-]+$`` (unique), a name and ``input == {}``;
- deltas match their block: text_delta/citations_delta -> text, thinking_delta and one
  final signature_delta -> thinking, input_json_delta -> tool_use; redacted_thinking
  has none; text and thinking deltas are non-empty;
- a text block is never empty; a tool_use block's joined ``partial_json`` is empty or a
  JSON object;
- web search: a ``server_tool_use`` block (``srvtoolu_`` id, name ``web_search``, input
  ``{}``, then input_json_delta making an object with a string ``query``) is followed by
  its ``web_search_tool_result`` block (same ``tool_use_id``, no deltas) whose content is
  a list of ``web_search_result`` (url, title, non-empty ``encrypted_content``, optional
  string ``page_age``) or one ``web_search_tool_result_error`` with a known code; a
  ``web_search_result_location`` citation has url, title, string ``cited_text`` and a
  non-empty ``encrypted_index``; ``usage.server_tool_use.web_search_requests`` is an
  integer when present;
- code execution: a ``server_tool_use`` named ``code_execution`` (input ``{code}``) or
  ``bash_code_execution`` (input ``{command}``), then its ``code_execution_tool_result``
  / ``bash_code_execution_tool_result`` (same ``tool_use_id``, no deltas) whose content is
  ``{type: <prefix>_result, stdout, stderr (strings), return_code (int), content (list)}``
  or ``{type: <prefix>_tool_result_error, error_code}`` with a known code;
- exactly one ``message_delta`` after every block stopped, with a valid non-null
  ``stop_reason``, a ``stop_sequence`` key, ``stop_details`` only with ``refusal``, and
  ``usage`` with integer ``output_tokens`` (and integer input/cache figures when present);
  then ``message_stop`` last;
- ``error`` data is ``{"type":"error","error":{"type": <Anthropic vocabulary>,
  "message": <str>}}``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

STOP_REASONS = frozenset(
    {"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"}
)
ERROR_TYPES = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "api_error",
        "overloaded_error",
    }
)
DELTA_FOR_BLOCK = {
    "text_delta": "text",
    "citations_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": "tool_use",
}
SEARCH_ERRORS = frozenset(
    {
        "invalid_tool_input",
        "unavailable",
        "max_uses_exceeded",
        "too_many_requests",
        "query_too_long",
    }
)
TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


@dataclass
class Block:
    type: str
    start: dict[str, Any]
    text: str = ""
    thinking: str = ""
    signature: str | None = None
    partial_json: str = ""
    citations: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class AnthropicStream:
    """What a validated stream said."""

    events: list[dict[str, Any]] = field(default_factory=list)
    message: dict[str, Any] | None = None
    blocks: list[Block] = field(default_factory=list)
    stop_reason: str | None = None
    stop_sequence: str | None = None
    stop_details: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


def _frames(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    text = body.decode("utf-8")
    assert text.endswith("\n\n"), f"stream does not end with a blank line: {text[-40:]!r}"
    out: list[tuple[str, dict[str, Any]]] = []
    for i, fr in enumerate(text[:-2].split("\n\n")):
        lines = fr.split("\n")
        assert len(lines) == 2, f"frame {i} is not exactly event + data lines: {fr[:120]!r}"
        ev, data = lines
        assert ev.startswith("event: "), f"frame {i} has no event line: {fr[:120]!r}"
        assert data.startswith("data: "), f"frame {i} has no data line: {fr[:120]!r}"
        assert data != "data: [DONE]", f"frame {i}: [DONE] on an Anthropic stream"
        obj = json.loads(data[6:])
        assert isinstance(obj, dict), f"frame {i}: data is not an object"
        name = ev[7:]
        assert obj.get("type") == name, (
            f"frame {i}: event {name!r} != data.type {obj.get('type')!r}"
        )
        out.append((name, obj))
    return out


def _check_usage(usage: Any, where: str) -> None:
    assert isinstance(usage, dict), f"{where}: usage missing"
    assert isinstance(usage.get("output_tokens"), int), f"{where}: usage.output_tokens not int"
    tools = usage.get("server_tool_use")
    if tools is not None:
        assert isinstance(tools.get("web_search_requests"), int), f"{where}: web_search_requests"
    for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        if key in usage and usage[key] is not None:
            assert isinstance(usage[key], int) and usage[key] >= 0, f"{where}: usage.{key}"


def _check_search_result(i: int, cb: dict[str, Any], tool_ids: set[str]) -> None:
    assert cb.get("tool_use_id") in tool_ids, f"event {i}: result for an unknown search"
    content = cb.get("content")
    if isinstance(content, dict):
        assert content.get("type") == "web_search_tool_result_error", f"event {i}: bad content"
        assert content.get("error_code") in SEARCH_ERRORS, f"event {i}: bad search error code"
        return
    assert isinstance(content, list), f"event {i}: search result content not a list"
    for r in content:
        assert r.get("type") == "web_search_result", f"event {i}: bad result {r!r}"
        assert isinstance(r.get("url"), str) and r["url"], f"event {i}: result without url"
        assert isinstance(r.get("title"), str), f"event {i}: result without title"
        assert isinstance(r.get("encrypted_content"), str) and r["encrypted_content"], (
            f"event {i}: result without encrypted_content"
        )
        assert r.get("page_age") is None or isinstance(r["page_age"], str), f"event {i}: page_age"


def check_citation(where: str, x: dict[str, Any]) -> None:
    if x.get("type") != "web_search_result_location":
        return
    for key in ("url", "title", "cited_text", "encrypted_index"):
        assert isinstance(x.get(key), str), f"{where}: citation {key} not a string"
    assert x["encrypted_index"], f"{where}: empty encrypted_index"


# The code execution tools' call names and the input key each takes.
CODE_INPUTS = {"code_execution": "code", "bash_code_execution": "command"}
CODE_ERRORS = frozenset(
    {
        "unavailable",
        "too_many_requests",
        "execution_time_exceeded",
        "invalid_tool_input",
        "output_file_too_large",
    }
)
_code_calls: dict[str, str] = {}  # a call's id -> its name (ids are unique: checked)


def _check_code_result(i: int, cb: dict[str, Any], tool_ids: set[str]) -> None:
    prefix = str(cb.get("type")).removesuffix("_tool_result")
    tid = cb.get("tool_use_id")
    assert tid in tool_ids and _code_calls.get(tid) == prefix, (
        f"event {i}: {cb.get('type')} for an unknown {prefix} call"
    )
    content = cb.get("content")
    assert isinstance(content, dict), f"event {i}: code result content not an object"
    if content.get("type") == f"{prefix}_tool_result_error":
        assert content.get("error_code") in CODE_ERRORS, f"event {i}: bad code error code"
        return
    assert content.get("type") == f"{prefix}_result", f"event {i}: bad code result {content!r}"
    for key in ("stdout", "stderr"):
        assert isinstance(content.get(key), str), f"event {i}: code result {key} not a string"
    assert type(content.get("return_code")) is int, f"event {i}: return_code not an int"
    assert isinstance(content.get("content"), list), f"event {i}: code result content list"


def _check_start(i: int, cb: dict[str, Any], tool_ids: set[str]) -> None:
    kind = cb.get("type")
    if kind == "server_tool_use":
        tid = cb.get("id")
        assert isinstance(tid, str) and tid.startswith("srvtoolu_") and TOOL_ID.match(tid), (
            f"event {i}: bad server tool id {tid!r}"
        )
        assert tid not in tool_ids, f"event {i}: duplicate tool id {tid}"
        tool_ids.add(tid)
        name = cb.get("name")
        assert name == "web_search" or name in CODE_INPUTS, f"event {i}: server tool {name!r}"
        if name in CODE_INPUTS:
            _code_calls[tid] = name
        assert cb.get("input") == {}, f"event {i}: server_tool_use must start with input {{}}"
        return
    if kind == "web_search_tool_result":
        _check_search_result(i, cb, tool_ids)
        return
    if kind in ("code_execution_tool_result", "bash_code_execution_tool_result"):
        _check_code_result(i, cb, tool_ids)
        return
    if kind == "text":
        assert cb.get("text") == "", f"event {i}: text block must start with text ''"
    elif kind == "thinking":
        assert cb.get("thinking") == "" and cb.get("signature") == "", (
            f"event {i}: thinking block must start with empty thinking and signature"
        )
    elif kind == "redacted_thinking":
        assert isinstance(cb.get("data"), str), f"event {i}: redacted_thinking without data"
    elif kind == "tool_use":
        tid = cb.get("id")
        assert isinstance(tid, str) and TOOL_ID.match(tid), f"event {i}: bad tool id {tid!r}"
        assert tid not in tool_ids, f"event {i}: duplicate tool id {tid}"
        tool_ids.add(tid)
        assert isinstance(cb.get("name"), str) and cb["name"], f"event {i}: tool without name"
        assert cb.get("input") == {}, f"event {i}: tool_use must start with input {{}}"
    else:
        raise AssertionError(f"event {i}: unexpected content block type {kind!r}")


def _apply_delta(i: int, block: Block, delta: dict[str, Any]) -> None:
    dtype = str(delta.get("type"))
    kind = "tool_use" if block.type == "server_tool_use" else block.type
    assert DELTA_FOR_BLOCK.get(dtype) == kind, f"event {i}: {dtype} in a {block.type} block"
    if dtype == "text_delta":
        assert isinstance(delta.get("text"), str) and delta["text"], f"event {i}: empty text"
        block.text += delta["text"]
    elif dtype == "citations_delta":
        assert block.text, f"event {i}: citation before any text"
        assert isinstance(delta.get("citation"), dict), f"event {i}: citations_delta w/o data"
        check_citation(f"event {i}", delta["citation"])
        block.citations.append(delta["citation"])
    elif dtype == "thinking_delta":
        assert block.signature is None, f"event {i}: thinking_delta after signature_delta"
        assert isinstance(delta.get("thinking"), str) and delta["thinking"], (
            f"event {i}: empty thinking_delta"
        )
        block.thinking += delta["thinking"]
    elif dtype == "signature_delta":
        assert block.signature is None, f"event {i}: second signature_delta"
        assert isinstance(delta.get("signature"), str) and delta["signature"], (
            f"event {i}: empty signature"
        )
        block.signature = delta["signature"]
    else:
        assert isinstance(delta.get("partial_json"), str), f"event {i}: partial_json not str"
        block.partial_json += delta["partial_json"]


def _check_stop(i: int, block: Block) -> None:
    if block.type == "text":
        assert block.text, f"event {i}: empty text block"
    if block.type == "tool_use" and block.partial_json:
        value = json.loads(block.partial_json)
        assert isinstance(value, dict), f"event {i}: tool input is not a JSON object"
    if block.type == "server_tool_use":
        value = json.loads(block.partial_json or "null")
        key = CODE_INPUTS.get(block.start.get("name"), "query")  # type: ignore[arg-type]
        assert isinstance(value, dict) and isinstance(value.get(key), str), (
            f"event {i}: a {block.start.get('name')} input has no {key}"
        )


def validate_anthropic_stream(body: bytes) -> AnthropicStream:
    frames = _frames(body)
    s = AnthropicStream(events=[d for _, d in frames])
    assert frames, "empty stream"
    tool_ids: set[str] = set()
    open_block: Block | None = None
    phase = "start"  # start -> blocks -> delta -> stopped | errored
    for i, (name, d) in enumerate(frames):
        assert phase not in ("stopped", "errored"), f"event {i} ({name}) after the terminal"
        if name == "error":
            err = d.get("error")
            assert isinstance(err, dict), f"event {i}: error without error object"
            assert err.get("type") in ERROR_TYPES, f"event {i}: bad error type {err.get('type')}"
            assert isinstance(err.get("message"), str), f"event {i}: error without message"
            s.error = err
            phase = "errored"
            continue
        if name == "ping":
            assert phase != "start", f"event {i}: ping before message_start"
            continue
        if phase == "start":
            assert name == "message_start", f"event {i}: {name} before message_start"
            m = d["message"]
            assert isinstance(m.get("id"), str) and m["id"].startswith("msg_"), "bad message id"
            assert m.get("type") == "message" and m.get("role") == "assistant", "bad message"
            assert isinstance(m.get("model"), str) and m["model"], "message_start without model"
            assert m.get("content") == [], "message_start content must be []"
            assert m.get("stop_reason") is None and m.get("stop_sequence") is None
            _check_usage(m.get("usage"), "message_start")
            assert isinstance(m["usage"].get("input_tokens"), int), "message_start input_tokens"
            s.message = m
            phase = "blocks"
        elif name == "content_block_start":
            assert phase == "blocks", f"event {i}: block start after message_delta"
            assert open_block is None, f"event {i}: block started while another is open"
            assert d.get("index") == len(s.blocks), (
                f"event {i}: block index {d.get('index')} != expected {len(s.blocks)}"
            )
            cb = d["content_block"]
            _check_start(i, cb, tool_ids)
            open_block = Block(type=cb["type"], start=cb)
            s.blocks.append(open_block)
        elif name == "content_block_delta":
            assert open_block is not None, f"event {i}: delta with no open block"
            assert d.get("index") == len(s.blocks) - 1, f"event {i}: delta for a closed block"
            _apply_delta(i, open_block, d["delta"])
        elif name == "content_block_stop":
            assert open_block is not None, f"event {i}: stop with no open block"
            assert d.get("index") == len(s.blocks) - 1, f"event {i}: stop for wrong block"
            _check_stop(i, open_block)
            open_block = None
        elif name == "message_delta":
            assert phase == "blocks", f"event {i}: second or misplaced message_delta"
            assert open_block is None, f"event {i}: message_delta while a block is open"
            delta = d.get("delta")
            assert isinstance(delta, dict), f"event {i}: message_delta without delta"
            assert delta.get("stop_reason") in STOP_REASONS, (
                f"event {i}: bad stop_reason {delta.get('stop_reason')!r}"
            )
            assert "stop_sequence" in delta, f"event {i}: message_delta without stop_sequence"
            details = delta.get("stop_details")
            if details is not None:
                assert delta["stop_reason"] == "refusal", f"event {i}: stop_details w/o refusal"
                assert details.get("type") == "refusal", f"event {i}: bad stop_details"
            _check_usage(d.get("usage"), f"event {i} message_delta")
            s.stop_reason = delta["stop_reason"]
            s.stop_sequence = delta["stop_sequence"]
            s.stop_details = details
            s.usage = d["usage"]
            phase = "delta"
        elif name == "message_stop":
            assert phase == "delta", f"event {i}: message_stop without message_delta"
            phase = "stopped"
        else:
            raise AssertionError(f"event {i}: unknown event type {name!r}")
    assert phase in ("stopped", "errored"), f"stream ended in phase {phase!r} (no terminal)"
    return s


def validate_anthropic_message(body: bytes) -> dict[str, Any]:
    """A non-streamed Message: its blocks as a stream's would be (search blocks and
    search citations included), and its usage."""
    m = json.loads(body)
    assert m.get("type") == "message" and m.get("role") == "assistant", "bad message"
    assert isinstance(m.get("id"), str) and m["id"].startswith("msg_"), "bad message id"
    assert m.get("stop_reason") in STOP_REASONS, f"bad stop_reason {m.get('stop_reason')!r}"
    _check_usage(m.get("usage"), "message")
    tool_ids: set[str] = set()
    for i, b in enumerate(m.get("content") or []):
        if b.get("type") == "server_tool_use":
            _check_start(i, {**b, "input": {}}, tool_ids)
            key = CODE_INPUTS.get(b.get("name"), "query")  # type: ignore[arg-type]
            assert isinstance((b.get("input") or {}).get(key), str), f"block {i}: {key}"
        elif b.get("type") == "text":
            assert isinstance(b.get("text"), str) and b["text"], f"block {i}: empty text"
            for x in b.get("citations") or []:
                check_citation(f"block {i}", x)
        elif b.get("type") in (
            "web_search_tool_result",
            "code_execution_tool_result",
            "bash_code_execution_tool_result",
        ):
            _check_start(i, b, tool_ids)
    return m
