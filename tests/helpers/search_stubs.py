"""STUB (issue 30, search-proxy branch): the client shapes of a search, until the
response side's encoders merge.

The proxy-run search emits ``c.ServerTool`` stream events and ``c.ServerToolUse``
answer parts; writing them in each client's shape is the response side's work
(branch i30-search-resp). Until it merges, ``install`` patches minimal encoders for
the Anthropic and Responses clients in, so the end-to-end tests of the loop can read
the answer with the clients' SDKs. Where an encoder already handles ``ServerTool``,
nothing is patched: after the merge this module is a no-op, and the lead deletes it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.protocols import get_codec
from proxai_asgi.protocols.anthropic_messages import stream as a_stream
from proxai_asgi.protocols.openai_responses import stream as r_stream


def _srv_id(use: c.ServerToolUse) -> str:
    return "srvtoolu_" + "".join(ch for ch in use.id if ch.isalnum())


def _anthropic_blocks(use: c.ServerToolUse) -> list[dict[str, Any]]:
    sid = _srv_id(use)
    if use.error is not None:
        content: Any = {"type": "web_search_tool_result_error", "error_code": use.error}
    else:
        content = [
            {
                "type": "web_search_result",
                "url": h.url,
                "title": h.title or h.url,
                "encrypted_content": "",
                "page_age": h.page_age,
            }
            for h in use.hits or []
        ]
    return [
        {"type": "server_tool_use", "id": sid, "name": use.name, "input": use.input},
        {"type": "web_search_tool_result", "tool_use_id": sid, "content": content},
    ]


def _frame(obj: dict[str, Any]) -> bytes:
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()


def _anthropic_event(enc: Any, ev: c.ServerTool) -> bytes:
    out = [enc._start(None)]
    if enc._block is not None:
        out.append(enc._close_active())
    out.append(enc._drain(force=True))
    use_block, result_block = _anthropic_blocks(ev.use)
    i = enc._next_wire
    enc._next_wire += 2
    out.append(
        _frame(
            {"type": "content_block_start", "index": i, "content_block": {**use_block, "input": {}}}
        )
    )
    delta = {"type": "input_json_delta", "partial_json": json.dumps(ev.use.input)}
    out.append(_frame({"type": "content_block_delta", "index": i, "delta": delta}))
    out.append(_frame({"type": "content_block_stop", "index": i}))
    out.append(
        _frame({"type": "content_block_start", "index": i + 1, "content_block": result_block})
    )
    out.append(_frame({"type": "content_block_stop", "index": i + 1}))
    return b"".join(out)


def _responses_item(use: c.ServerToolUse) -> dict[str, Any]:
    action: dict[str, Any] = {"type": "search", "query": use.input.get("query", "")}
    if use.hits:
        action["sources"] = [{"type": "url", "url": h.url} for h in use.hits]
    return {
        "type": "web_search_call",
        "id": "ws_" + "".join(ch for ch in use.id if ch.isalnum()),
        "status": "failed" if use.error else "completed",
        "action": action,
    }


def _responses_event(enc: Any, ev: c.ServerTool) -> bytes:
    item = _responses_item(ev.use)
    added = enc._add_item({**item, "status": "in_progress"})
    return added + enc._item_done(len(enc._items) - 1, item)


def _before(response: c.Response) -> list[tuple[int, c.ServerToolUse]]:
    """Each search part with the number of output blocks written before it."""
    out: list[tuple[int, c.ServerToolUse]] = []
    shown = 0
    for p in response.content:
        if isinstance(p, c.ServerToolUse):
            out.append((shown, p))
        elif not (isinstance(p, (c.Text, c.Refusal)) and not p.text):
            shown += 1
    return out


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    if c.ServerTool not in a_stream._ENCODER_HANDLERS:
        monkeypatch.setitem(a_stream._ENCODER_HANDLERS, c.ServerTool, _anthropic_event)
        codec = type(get_codec("anthropic_messages"))
        plain = codec.encode_response

        def anthropic_response(response: c.Response, request: c.Request) -> bytes:
            body = json.loads(plain(response, request))
            for shift, (at, use) in enumerate(_before(response)):
                body["content"][at + 2 * shift : at + 2 * shift] = _anthropic_blocks(use)
            return json.dumps(body).encode()

        monkeypatch.setattr(codec, "encode_response", staticmethod(anthropic_response))
    if c.ServerTool not in r_stream._ENCODER_HANDLERS:
        monkeypatch.setitem(r_stream._ENCODER_HANDLERS, c.ServerTool, _responses_event)
        codec = type(get_codec("openai_responses"))
        plain_r = codec.encode_response

        def responses_response(response: c.Response, request: c.Request) -> bytes:
            body = json.loads(plain_r(response, request))
            for shift, (at, use) in enumerate(_before(response)):
                body["output"][at + shift : at + shift] = [_responses_item(use)]
            return json.dumps(body).encode()

        monkeypatch.setattr(codec, "encode_response", staticmethod(responses_response))
