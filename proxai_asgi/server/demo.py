"""A deterministic, offline upstream that answers all three protocols natively.

It echoes the last user message, so a freshly started proxy can be tried with curl
and no key. Answers are built as canonical responses and written by the protocols'
own encoders, so the demo speaks each wire format exactly as the translators do.

Scripted behaviour, for demos and end-to-end tests of tool loops:
- a last user message ``call NAME {json}`` makes the model call tool NAME with that
  JSON (when the request declares a tool of that name);
- after a tool result the model answers ``Tool NAME returned: <output>``.
"""

from __future__ import annotations

import hashlib
import re

from .. import canonical as c
from ..codec import Codec, unfold
from ..errors import ProxyError, TranslationReport
from ..protocols import all_codecs
from ..transport.upstream import Message, Receive, Scope, Send

_CALL = re.compile(r"^\s*call\s+([A-Za-z0-9_.-]+)\s*(.*)$", re.S)


def _last_text(parts: list[c.Part]) -> str:
    return " ".join(p.text for p in parts if isinstance(p, c.Text)).strip()


def answer(request: c.Request, seed: bytes) -> c.Response:
    """The demo model: a pure function of the request."""
    rid = "demo" + hashlib.sha256(seed).hexdigest()[:20]
    content: list[c.Part]
    stop: c.StopReason = "end_turn"
    last = request.messages[-1] if request.messages else None
    if last is not None and last.role == "tool":
        results = [p for p in last.content if isinstance(p, c.ToolResult)]
        names = _call_names(request)
        lines = [
            f"Tool {names.get(r.call_id, r.call_id)} returned: {_last_text(r.content)}"
            for r in results
        ]
        content = [c.Text(text="\n".join(lines) or "Tool returned nothing.")]
    else:
        text = _last_text(last.content) if last is not None else ""
        m = _CALL.match(text)
        tools = {t.name: t for t in request.tools}
        if m and m.group(1) in tools:
            args = m.group(2).strip() or "{}"
            tool = tools[m.group(1)]
            content = [
                c.ToolCall(id=f"call_{rid[4:16]}", name=tool.name, arguments=args, kind=tool.kind)
            ]
            stop = "tool_use"
        else:
            content = [
                c.Text(text=f"You said: {text}" if text else "Hello from the demo upstream.")
            ]
    words = sum(len(p.text.split()) for p in content if isinstance(p, c.Text))
    usage = c.Usage(input_tokens=max(1, len(seed) // 4), output_tokens=max(1, words))
    return c.Response(id=rid, model=request.model, content=content, stop_reason=stop, usage=usage)


def _call_names(request: c.Request) -> dict[str, str]:
    return {p.id: p.name for m in request.messages for p in m.content if isinstance(p, c.ToolCall)}


def _word_deltas(events: list[c.StreamEvent]) -> list[c.StreamEvent]:
    """Split text deltas into words, so the demo streams like a model does."""
    out: list[c.StreamEvent] = []
    for ev in events:
        if isinstance(ev, c.BlockDelta) and " " in ev.text:
            pieces = re.findall(r"\S+\s*|\s+", ev.text)
            out.extend(c.BlockDelta(index=ev.index, text=p) for p in pieces)
        else:
            out.append(ev)
    return out


class DemoUpstream:
    """ASGI app: POST the protocols' paths; anything else is a 404."""

    def __init__(self) -> None:
        self._codecs = all_codecs()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        codec: Codec | None = None
        call = None  # the model in the URL (Gemini)
        for candidate in self._codecs:
            found = candidate.serves(scope["path"])
            if found is not None and found.action == "generate":
                codec, call = candidate, found.call
                break
        if codec is None or scope["method"] != "POST":
            await _send_json(send, 404, b'{"error":{"message":"not found","type":"not_found"}}')
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        try:
            request = codec.decode_request(body, TranslationReport(lossy=True))
        except ProxyError as err:
            await _send_json(send, err.status, codec.encode_error(err))
            return
        if call is not None:
            request.model, request.stream = call.model, call.stream
        response = answer(request, body)
        if not request.stream:
            await _send_json(send, 200, codec.encode_response(response, request))
            return
        encoder = codec.stream_encoder(request)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream; charset=utf-8")],
            }
        )
        for ev in _word_deltas(unfold(response)):
            data = encoder.encode(ev)
            if data:
                await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _send_json(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
