"""A strict validator of the OpenAI Responses stream grammar, for the SSE a Responses
client receives. Raises AssertionError with a clear message on the first violation.

Rules (OpenAI's wire behaviour plus DESIGN.md "Wire facts"):
- every frame is ``event: <type>`` + ``data: <json object>`` with event == data.type;
  no ``[DONE]``; only event types that exist in the API;
- ``sequence_number`` starts at 0 and grows by exactly 1 per event;
- ``response.created`` first (status in_progress, empty output), then
  ``response.in_progress``; every lifecycle snapshot has the same ``id`` (``resp_``);
- ``output_item.added`` allocates output_index 0, 1, 2... with unique item ids
  (message ``msg_``, reasoning ``rs_``, function_call ``fc_``, custom_tool_call ``ctc_``);
  every other item event names an added, not yet done item by output_index and item_id;
- content parts: ``content_part.added`` (content_index 0, 1, ... per item, empty text)
  comes before any text / refusal / reasoning-text delta of that part; ``*.done`` text
  equals the deltas joined; ``content_part.done`` carries the final part; no empty
  reasoning_text part (an output_text / refusal part may be empty: its item opens with
  the block, before any text); output_text parts carry ``annotations``
  (``annotation_index`` 0, 1...) and ``logprobs``;
- reasoning summaries: ``reasoning_summary_part.added`` (summary_index 0, 1...) before its
  text deltas, then ``reasoning_summary_text.done`` and ``reasoning_summary_part.done``;
- function / custom tool calls: arguments / input deltas, then ``*.done`` with the joined
  value, then ``output_item.done`` whose item carries the same value;
- ``output_item.done`` only after all the item's parts are done, carrying every part;
- exactly one terminal event (``response.completed`` / ``incomplete`` / ``failed``), last;
  every added item is done before it (before ``failed``, a tool call the error cut may
  be left unfinished: it must never be announced as done); its snapshot's status
  matches the event, its ``output`` equals the items exactly as their
  ``output_item.done`` carried them, in output_index order; usage consistent
  (total = input + output);
- an ``error`` event (code, message, param) is followed only by ``response.failed``;
- web search: a ``web_search_call`` item (``ws_``) is added ``in_progress`` with an
  ``action`` of type ``search``, gets ``web_search_call.in_progress``, ``.searching`` and
  ``.completed`` in that order, and is done ``completed`` (or ``failed``) with its query
  and ``sources`` (``{type: url, url}``); a ``url_citation`` annotation has url, title
  and integer offsets;
- code interpreter: a ``code_interpreter_call`` item (``ci_``) is added ``in_progress``
  with a ``container_id`` and null ``code``/``outputs``, gets
  ``code_interpreter_call.in_progress``, ``_code.delta`` (any number), ``_code.done``
  (the deltas joined), ``.interpreting`` and ``.completed`` in that order, and is done
  ``completed`` (or ``failed``) with the streamed ``code`` and ``outputs`` a list of
  ``{type: logs, logs}`` / ``{type: image, url}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

EVENT_TYPES = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.refusal.delta",
        "response.refusal.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "error",
    }
)
CODE_STEPS = (
    "response.code_interpreter_call.in_progress",
    "response.code_interpreter_call_code.done",
    "response.code_interpreter_call.interpreting",
    "response.code_interpreter_call.completed",
)
CODE_DELTA = "response.code_interpreter_call_code.delta"
SEARCH_STEPS = (
    "response.web_search_call.in_progress",
    "response.web_search_call.searching",
    "response.web_search_call.completed",
)
TERMINALS = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
ID_PREFIX = {
    "message": "msg_",
    "reasoning": "rs_",
    "function_call": "fc_",
    "custom_tool_call": "ctc_",
    "web_search_call": "ws_",  # (issue 30: a hosted search, or one the proxy ran)
    "code_interpreter_call": "ci_",
}
PART_OF_DELTA = {
    "response.output_text.delta": "output_text",
    "response.refusal.delta": "refusal",
    "response.reasoning_text.delta": "reasoning_text",
}


@dataclass
class _Part:
    type: str
    text: str = ""
    annotations: list[dict[str, Any]] = field(default_factory=list)
    text_done: bool = False
    done: bool = False


@dataclass
class _Item:
    added: dict[str, Any]
    parts: list[_Part] = field(default_factory=list)
    summaries: list[_Part] = field(default_factory=list)
    arguments: str = ""
    arguments_done: bool = False
    done: dict[str, Any] | None = None
    search_steps: int = 0  # web_search_call progress events seen
    code_steps: int = 0  # code_interpreter_call progress events seen (``CODE_STEPS``)
    code: str = ""  # the code deltas joined

    @property
    def id(self) -> str:
        return str(self.added["id"])

    @property
    def type(self) -> str:
        return str(self.added["type"])


@dataclass
class ResponsesStream:
    """What a validated stream said."""

    events: list[dict[str, Any]] = field(default_factory=list)
    response: dict[str, Any] | None = None  # the terminal snapshot
    items: list[dict[str, Any]] = field(default_factory=list)  # as output_item.done
    error: dict[str, Any] | None = None  # the ``error`` event, when one came

    @property
    def status(self) -> str | None:
        return None if self.response is None else self.response["status"]


def parse_frames(body: bytes) -> list[tuple[str | None, str]]:
    """(event, data) of every SSE frame, asserting the framing itself."""
    text = body.decode("utf-8")
    assert text.endswith("\n\n") or not text, (
        f"stream does not end with a blank line: {text[-80:]!r}"
    )
    frames: list[tuple[str | None, str]] = []
    for raw in text.split("\n\n"):
        if not raw:
            continue
        event: str | None = None
        data: list[str] = []
        for line in raw.split("\n"):
            name, sep, value = line.partition(": ")
            assert sep, f"malformed SSE line {line!r}"
            if name == "event":
                assert event is None, f"two event lines in one frame: {raw!r}"
                event = value
            elif name == "data":
                data.append(value)
            else:
                raise AssertionError(f"unexpected SSE field {name!r}")
        assert len(data) == 1, f"a frame must have exactly one data line: {raw!r}"
        frames.append((event, data[0]))
    return frames


def validate_responses_stream(body: bytes) -> ResponsesStream:
    out = ResponsesStream()
    items: list[_Item] = []
    by_id: dict[str, _Item] = {}
    response_id: str | None = None
    terminal_seen = False
    error_seen = False
    for n, (event, data) in enumerate(parse_frames(body)):
        where = f"event #{n} ({event})"
        assert data != "[DONE]", f"{where}: Responses streams carry no [DONE]"
        assert not terminal_seen, f"{where}: an event after the terminal event"
        ev = json.loads(data)
        assert isinstance(ev, dict), f"{where}: data is not a JSON object"
        out.events.append(ev)
        kind = ev.get("type")
        assert event is not None, f"{where}: frame without an event line"
        assert event == kind, f"{where}: event line {event!r} != data.type {kind!r}"
        assert kind in EVENT_TYPES, f"{where}: {kind!r} is not a Responses event type"
        assert ev.get("sequence_number") == n, (
            f"{where}: sequence_number {ev.get('sequence_number')} where {n} was due"
        )
        if n == 0:
            assert kind == "response.created", f"the stream opens with {kind}, not response.created"
        if n == 1 and kind != "error":
            assert kind == "response.in_progress", (
                f"response.in_progress must follow created: {kind}"
            )
        if error_seen:
            assert kind == "response.failed", f"{where}: only response.failed may follow error"

        if kind in ("response.created", "response.in_progress", *TERMINALS):
            snap = ev.get("response")
            assert isinstance(snap, dict), f"{where}: no response snapshot"
            assert snap.get("object") == "response", f"{where}: snapshot object != response"
            rid = snap.get("id")
            assert isinstance(rid, str) and rid.startswith("resp_"), f"{where}: bad id {rid!r}"
            if response_id is None:
                response_id = rid
            assert rid == response_id, f"{where}: response id changed {response_id} -> {rid}"
            if kind in ("response.created", "response.in_progress"):
                assert snap.get("status") == "in_progress", f"{where}: status {snap.get('status')}"
                assert snap.get("output") == [], f"{where}: a starting snapshot has output"
                continue
            terminal_seen = True
            _check_terminal(where, kind, snap, items)
            out.response = snap
            out.items = [it.done for it in items if it.done is not None]
            continue

        if kind == "error":
            for key in ("code", "message", "param"):
                assert key in ev, f"{where}: error event without {key!r}"
            assert isinstance(ev["message"], str) and ev["message"], f"{where}: empty message"
            error_seen = True
            out.error = ev
            continue

        assert response_id is not None, f"{where}: an item event before response.created"
        if kind == "response.output_item.added":
            item = ev.get("item")
            assert isinstance(item, dict), f"{where}: no item"
            assert ev.get("output_index") == len(items), (
                f"{where}: output_index {ev.get('output_index')} where {len(items)} was due"
            )
            iid, itype = item.get("id"), item.get("type")
            assert isinstance(iid, str) and iid, f"{where}: item without id"
            assert iid not in by_id, f"{where}: duplicate item id {iid}"
            prefix = ID_PREFIX.get(str(itype))
            assert prefix is not None, f"{where}: unexpected item type {itype!r}"
            assert iid.startswith(prefix), f"{where}: {itype} id {iid!r} lacks {prefix!r}"
            if itype == "message":
                assert item.get("content") == [], f"{where}: an added message has content"
                assert item.get("status") == "in_progress", f"{where}: added message status"
                assert item.get("role") == "assistant", f"{where}: message role"
            elif itype == "function_call":
                assert item.get("arguments") == "", f"{where}: added call has arguments"
                assert item.get("status") == "in_progress", f"{where}: added call status"
                assert item.get("call_id") and item.get("name"), f"{where}: call without ids"
            elif itype == "custom_tool_call":
                assert item.get("input") == "", f"{where}: added custom call has input"
                assert item.get("call_id") and item.get("name"), f"{where}: call without ids"
            elif itype == "reasoning":
                assert item.get("summary") == [], f"{where}: added reasoning has a summary"
            elif itype == "web_search_call":
                assert item.get("status") == "in_progress", f"{where}: added search status"
                action = item.get("action") or {}
                assert action.get("type") == "search", f"{where}: a search without its action"
            elif itype == "code_interpreter_call":
                assert item.get("status") == "in_progress", f"{where}: added run status"
                assert isinstance(item.get("container_id"), str), f"{where}: no container_id"
                assert item.get("code") is None and item.get("outputs") is None, (
                    f"{where}: an added run has code or outputs"
                )
            it = _Item(added=item)
            items.append(it)
            by_id[iid] = it
            continue

        it = _item_of(where, ev, items)
        if kind == "response.output_item.done":
            _check_item_done(where, ev, it)
            it.done = ev["item"]
        elif kind in CODE_STEPS or kind == CODE_DELTA:
            assert it.type == "code_interpreter_call", f"{where}: {kind} on a {it.type}"
            if kind == CODE_DELTA:
                assert it.code_steps == 1, f"{where}: code delta out of order"
                assert isinstance(ev.get("delta"), str), f"{where}: code delta not a string"
                it.code += ev["delta"]
            else:
                assert CODE_STEPS.index(kind) == it.code_steps, f"{where}: {kind} out of order"
                if kind == "response.code_interpreter_call_code.done":
                    assert ev.get("code") == it.code, f"{where}: code differs from the deltas"
                it.code_steps += 1
        elif kind in SEARCH_STEPS:
            assert it.type == "web_search_call", f"{where}: {kind} on a {it.type}"
            assert SEARCH_STEPS.index(kind) == it.search_steps, f"{where}: {kind} out of order"
            it.search_steps += 1
        elif kind == "response.content_part.added":
            part = ev.get("part") or {}
            allowed = ("reasoning_text",) if it.type == "reasoning" else ("output_text", "refusal")
            assert it.type in ("message", "reasoning"), f"{where}: parts on a {it.type}"
            assert part.get("type") in allowed, f"{where}: part {part.get('type')} on {it.type}"
            assert ev.get("content_index") == len(it.parts), (
                f"{where}: content_index {ev.get('content_index')} where {len(it.parts)} was due"
            )
            assert all(p.done for p in it.parts), f"{where}: a part opened while one is open"
            assert part.get(_text_key(part["type"])) == "", f"{where}: a part opens with text"
            if part["type"] == "output_text":
                assert part.get("annotations") == [], f"{where}: output_text without annotations"
            it.parts.append(_Part(type=part["type"]))
        elif kind in PART_OF_DELTA:
            p = _part_of(where, ev, it)
            assert p.type == PART_OF_DELTA[kind], f"{where}: a {kind} on a {p.type} part"
            assert not p.text_done, f"{where}: a delta after the part's text was done"
            assert isinstance(ev.get("delta"), str) and ev["delta"], f"{where}: empty delta"
            if kind == "response.output_text.delta":
                assert ev.get("logprobs") == [], f"{where}: output_text.delta without logprobs"
            p.text += ev["delta"]
        elif kind in (
            "response.output_text.done",
            "response.refusal.done",
            "response.reasoning_text.done",
        ):
            p = _part_of(where, ev, it)
            key = "refusal" if kind == "response.refusal.done" else "text"
            assert ev.get(key) == p.text, f"{where}: done text != the deltas joined"
            # An empty output_text / refusal part is valid Responses: a message item opens
            # with its text block, before anyone knows whether text follows. Reasoning
            # parts open with their first text and are never empty.
            assert p.text or p.type != "reasoning_text", f"{where}: an empty {p.type} part"
            assert not p.text_done, f"{where}: text done twice"
            p.text_done = True
        elif kind == "response.output_text.annotation.added":
            p = _part_of(where, ev, it)
            assert p.type == "output_text", f"{where}: an annotation on a {p.type} part"
            assert ev.get("annotation_index") == len(p.annotations), f"{where}: annotation_index"
            ann = ev.get("annotation")
            assert isinstance(ann, dict) and ann.get("type"), f"{where}: bad annotation"
            p.annotations.append(ann)
        elif kind == "response.content_part.done":
            p = _part_of(where, ev, it)
            assert p.text_done, f"{where}: content_part.done before its text was done"
            part = ev.get("part") or {}
            assert part.get("type") == p.type, f"{where}: done part type changed"
            assert part.get(_text_key(p.type)) == p.text, f"{where}: done part text differs"
            if p.type == "output_text":
                assert part.get("annotations") == p.annotations, f"{where}: annotations differ"
                check_annotations(where, p.text, p.annotations)
            p.done = True
        elif kind == "response.reasoning_summary_part.added":
            assert it.type == "reasoning", f"{where}: a summary part on a {it.type}"
            assert ev.get("summary_index") == len(it.summaries), f"{where}: summary_index"
            assert all(s.done for s in it.summaries), f"{where}: summary part opened while open"
            assert ev.get("part") == {"type": "summary_text", "text": ""}, f"{where}: part"
            it.summaries.append(_Part(type="summary_text"))
        elif kind in (
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
        ):
            s = _summary_of(where, ev, it)
            if kind.endswith("text.delta"):
                assert not s.text_done, f"{where}: a summary delta after its done"
                assert isinstance(ev.get("delta"), str) and ev["delta"], f"{where}: empty delta"
                s.text += ev["delta"]
            elif kind.endswith("text.done"):
                assert ev.get("text") == s.text and s.text, f"{where}: summary text differs"
                s.text_done = True
            else:
                assert s.text_done, f"{where}: summary part done before its text"
                part = {"type": "summary_text", "text": s.text}
                assert ev.get("part") == part, f"{where}: summary part differs"
                s.done = True
        elif kind in (
            "response.function_call_arguments.delta",
            "response.custom_tool_call_input.delta",
        ):
            want = "function_call" if "function_call" in kind else "custom_tool_call"
            assert it.type == want, f"{where}: {kind} on a {it.type}"
            assert not it.arguments_done, f"{where}: a delta after the arguments were done"
            assert isinstance(ev.get("delta"), str) and ev["delta"], f"{where}: empty delta"
            it.arguments += ev["delta"]
        elif kind in (
            "response.function_call_arguments.done",
            "response.custom_tool_call_input.done",
        ):
            want = "function_call" if "function_call" in kind else "custom_tool_call"
            assert it.type == want, f"{where}: {kind} on a {it.type}"
            key = "arguments" if want == "function_call" else "input"
            assert ev.get(key) == it.arguments, f"{where}: {key} != the deltas joined"
            if want == "function_call":
                assert ev.get("name") == it.added.get("name"), f"{where}: name differs"
            it.arguments_done = True
        else:  # pragma: no cover - EVENT_TYPES and the branches agree
            raise AssertionError(f"{where}: unhandled event type")
    assert terminal_seen, "the stream ended without a terminal event"
    return out


def check_annotations(where: str, text: str, annotations: list[dict[str, Any]]) -> None:
    for a in annotations:
        if a.get("type") != "url_citation":
            continue
        assert isinstance(a.get("url"), str) and a["url"], f"{where}: citation without url"
        assert isinstance(a.get("title"), str), f"{where}: citation without title"
        start, end = a.get("start_index"), a.get("end_index")
        assert isinstance(start, int) and isinstance(end, int), f"{where}: citation offsets"
        # (Not checked against the text: an upstream's offsets are relayed as they
        # are; the search tests check the spans the proxy makes.)


def check_search_item(where: str, item: dict[str, Any]) -> None:
    assert item.get("status") in ("completed", "failed"), f"{where}: search status"
    action = item.get("action") or {}
    assert action.get("type") == "search", f"{where}: search action type"
    assert isinstance(action.get("query"), str), f"{where}: search without a query"
    for src in action.get("sources") or ():
        assert src.get("type") == "url" and isinstance(src.get("url"), str), f"{where}: source"


def check_code_item(where: str, item: dict[str, Any]) -> None:
    assert str(item.get("id", "")).startswith("ci_"), f"{where}: run id"
    assert item.get("status") in ("completed", "failed"), f"{where}: run status"
    assert isinstance(item.get("container_id"), str), f"{where}: run without container_id"
    assert isinstance(item.get("code"), str), f"{where}: run without code"
    outputs = item.get("outputs")
    assert isinstance(outputs, list), f"{where}: run outputs not a list"
    for o in outputs:
        if o.get("type") == "logs":
            assert isinstance(o.get("logs"), str), f"{where}: logs not a string"
        else:
            assert o.get("type") == "image" and isinstance(o.get("url"), str), f"{where}: output"


def _text_key(part_type: str) -> str:
    return "refusal" if part_type == "refusal" else "text"


def _item_of(where: str, ev: dict[str, Any], items: list[_Item]) -> _Item:
    idx = ev.get("output_index")
    assert isinstance(idx, int) and 0 <= idx < len(items), f"{where}: unknown output_index {idx}"
    it = items[idx]
    assert it.done is None, f"{where}: an event for item {idx} after its output_item.done"
    if ev.get("type") != "response.output_item.done":
        assert ev.get("item_id") == it.id, f"{where}: item_id {ev.get('item_id')} != {it.id}"
    return it


def _part_of(where: str, ev: dict[str, Any], it: _Item) -> _Part:
    ci = ev.get("content_index")
    assert isinstance(ci, int) and 0 <= ci < len(it.parts), f"{where}: no content part {ci}"
    p = it.parts[ci]
    assert not p.done, f"{where}: an event for content part {ci} after it was done"
    return p


def _summary_of(where: str, ev: dict[str, Any], it: _Item) -> _Part:
    assert it.type == "reasoning", f"{where}: summary events on a {it.type}"
    si = ev.get("summary_index")
    assert isinstance(si, int) and 0 <= si < len(it.summaries), f"{where}: no summary part {si}"
    s = it.summaries[si]
    assert not s.done, f"{where}: an event for summary part {si} after it was done"
    return s


def _check_item_done(where: str, ev: dict[str, Any], it: _Item) -> None:
    item = ev.get("item")
    assert isinstance(item, dict), f"{where}: no item"
    assert item.get("id") == it.id and item.get("type") == it.type, f"{where}: item identity"
    assert all(p.done for p in it.parts), f"{where}: item done with a part still open"
    assert all(s.done for s in it.summaries), f"{where}: item done with a summary open"
    if it.type == "message":
        assert item.get("status") in ("completed", "incomplete"), f"{where}: message status"
        content = item.get("content")
        assert isinstance(content, list) and content, f"{where}: a message item without content"
        assert len(content) == len(it.parts), f"{where}: message parts differ from streamed"
        for part, p in zip(content, it.parts, strict=True):
            assert part.get("type") == p.type, f"{where}: part type differs"
            assert part.get(_text_key(p.type)) == p.text, f"{where}: part text differs"
            if p.type == "output_text":
                assert part.get("annotations") == p.annotations, f"{where}: annotations differ"
    elif it.type in ("function_call", "custom_tool_call"):
        key = "arguments" if it.type == "function_call" else "input"
        assert it.arguments_done, f"{where}: tool call done before its {key} were done"
        assert item.get(key) == it.arguments, f"{where}: {key} differ from the deltas"
        assert item.get("call_id") == it.added.get("call_id"), f"{where}: call_id changed"
        assert item.get("name") == it.added.get("name"), f"{where}: name changed"
        if it.type == "function_call":
            assert item.get("status") in ("completed", "incomplete"), f"{where}: call status"
    elif it.type == "web_search_call":
        assert it.search_steps == len(SEARCH_STEPS), f"{where}: search done before completed"
        check_search_item(where, item)
    elif it.type == "code_interpreter_call":
        assert it.code_steps == len(CODE_STEPS), f"{where}: run done before completed"
        assert item.get("code") == it.code, f"{where}: run code differs from the streamed"
        check_code_item(where, item)
    elif it.type == "reasoning":
        summary = item.get("summary")
        assert summary == [{"type": "summary_text", "text": s.text} for s in it.summaries], (
            f"{where}: reasoning summary differs from the streamed summary"
        )
        streamed = [{"type": "reasoning_text", "text": p.text} for p in it.parts]
        assert (item.get("content") or []) == streamed, f"{where}: reasoning content differs"


def _check_terminal(where: str, kind: str, snap: dict[str, Any], items: list[_Item]) -> None:
    status = TERMINALS[kind]
    assert snap.get("status") == status, f"{where}: snapshot status {snap.get('status')}"
    open_items = [i for i, it in enumerate(items) if it.done is None]
    if status == "failed":
        # A tool call cut by the error is left unfinished, never announced as done
        # (clients run a call at its output_item.done); only tool calls may be.
        for i in open_items:
            kind = items[i].added.get("type")
            assert kind in ("function_call", "custom_tool_call"), (
                f"{where}: item {i} ({kind}) was never done"
            )
    else:
        assert not open_items, f"{where}: items {open_items} were never done"
    output = [it.done for it in items if it.done is not None]
    assert snap.get("output") == output, f"{where}: snapshot output != the items as done"
    details = snap.get("incomplete_details")
    if status == "incomplete":
        assert isinstance(details, dict) and details.get("reason"), f"{where}: no reason"
    else:
        assert details is None, f"{where}: incomplete_details on a {status} response"
    if status == "failed" and snap.get("error") is not None:
        err = snap["error"]
        assert err.get("code") and err.get("message"), f"{where}: malformed error {err}"
    usage = snap.get("usage")
    if status != "failed" or usage is not None:
        assert isinstance(usage, dict), f"{where}: no usage"
        total = usage["input_tokens"] + usage["output_tokens"]
        assert usage.get("total_tokens") == total, f"{where}: total_tokens {usage}"
        assert "cached_tokens" in usage["input_tokens_details"], f"{where}: usage details"
        assert "reasoning_tokens" in usage["output_tokens_details"], f"{where}: usage details"
