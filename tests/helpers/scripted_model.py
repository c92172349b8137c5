"""A scripted fake model for driving the real coding-agent CLIs (Claude Code, Codex).

An ASGI app that speaks ONE protocol natively (the upstream side of the middleware).
Given the conversation it:

1. answers with a call to the CLI's shell tool running ``command`` when the request
   declares such a tool and holds no result of that call yet;
2. once the request contains the tool's result, answers with a final text quoting the
   tool output (``FINAL_PREFIX`` + output);
3. answers anything else (title generation and other side requests) with plain text.

Answers are canonical responses written by the protocol's own codec — JSON, or streamed
through ``unfold`` + the codec's stream encoder when the request asks for a stream —
so the wire is exactly what the translators produce. Every exchange is recorded
(``exchanges``) so tests can show what the CLI sent when something breaks.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName, unfold
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols import get_codec
from proxai_asgi.routing import DEFAULT_PATHS
from proxai_asgi.upstream import Receive, Scope, Send

FINAL_PREFIX = "The command printed: "
CALL_ID_PREFIX = "call_proxaie2e"


def shell_arguments(tool: c.Tool, command: str) -> str | None:
    """Arguments for the known shell tools of the real CLIs, or None for other tools.

    - Claude Code ``Bash``: ``{"command": str, "description": str}``
    - Codex ``exec_command`` (unified exec): ``{"cmd": str, ...}``
    - Codex ``shell``: ``{"command": [argv...]}``; ``shell_command``: ``{"command": str}``
    """
    if tool.kind != "function":
        return None
    if tool.name == "Bash":
        return json.dumps({"command": command, "description": "Print the e2e marker"})
    if tool.name == "exec_command":
        return json.dumps({"cmd": command})
    if tool.name == "shell":
        return json.dumps({"command": ["bash", "-lc", command]})
    if tool.name == "shell_command":
        return json.dumps({"command": command})
    return None


def _text_of(parts: list[c.Part]) -> str:
    out: list[str] = []
    for p in parts:
        if isinstance(p, c.Text):
            out.append(p.text)
        elif isinstance(p, c.ToolResult):
            out.append(_text_of(p.content))
    return "\n".join(out)


@dataclass
class Exchange:
    path: str
    request: bytes
    status: int = 0
    response: bytearray = field(default_factory=bytearray)
    decoded: c.Request | None = None
    answer: c.Response | None = None


@dataclass
class ScriptedModel:
    protocol: ProtocolName
    command: str
    exchanges: list[Exchange] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def tool_calls(self) -> int:
        return sum(
            1
            for x in self.exchanges
            if x.answer and any(isinstance(p, c.ToolCall) for p in x.answer.content)
        )

    @property
    def tool_results(self) -> list[str]:
        return [
            x.answer.content[0].text[len(FINAL_PREFIX) :]
            for x in self.exchanges
            if x.answer
            and x.answer.content
            and isinstance(x.answer.content[0], c.Text)
            and x.answer.content[0].text.startswith(FINAL_PREFIX)
        ]

    def answer(self, request: c.Request, n: int) -> c.Response:
        rid = f"scripted{n:04d}"
        results = [
            p
            for m in request.messages
            for p in m.content
            if isinstance(p, c.ToolResult) and p.call_id.startswith(CALL_ID_PREFIX)
        ]
        content: list[c.Part]
        stop: c.StopReason = "end_turn"
        if results:
            content = [c.Text(text=FINAL_PREFIX + _text_of(results[-1].content).strip())]
        else:
            call = None
            for tool in request.tools:
                args = shell_arguments(tool, self.command)
                if args is not None:
                    call = c.ToolCall(id=f"{CALL_ID_PREFIX}{n:04d}", name=tool.name, arguments=args)
                    break
            if call is not None:
                content = [c.Text(text="Running the command."), call]
                stop = "tool_use"
            else:
                content = [c.Text(text="Scripted answer.")]
        usage = c.Usage(input_tokens=100, output_tokens=10)
        return c.Response(
            id=rid, model=request.model, content=content, stop_reason=stop, usage=usage
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        ex = Exchange(scope["path"], body)
        with self._lock:
            self.exchanges.append(ex)
            n = len(self.exchanges)
        codec = get_codec(self.protocol)

        async def reply(status: int, headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> None:
            ex.status = status
            await send({"type": "http.response.start", "status": status, "headers": headers})
            for chunk in chunks:
                ex.response += chunk
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        json_ct = (b"content-type", b"application/json")
        if scope["method"] != "POST" or scope["path"] != DEFAULT_PATHS[self.protocol]:
            err = ProxyError(404, f"scripted model: no route {scope['path']}", kind="not_found")
            await reply(404, [json_ct], [codec.encode_error(err)])
            return
        try:
            request = codec.decode_request(body, TranslationReport(lossy=True))
        except ProxyError as err:
            await reply(err.status, [json_ct], [codec.encode_error(err)])
            return
        ex.decoded = request
        response = ex.answer = self.answer(request, n)
        if not request.stream:
            await reply(200, [json_ct], [codec.encode_response(response, request)])
            return
        encoder = codec.stream_encoder(request)
        chunks = []
        for ev in _split_deltas(unfold(response)):
            data = encoder.encode(ev)
            if data:
                chunks.append(data)
        await reply(200, [(b"content-type", b"text/event-stream; charset=utf-8")], chunks)


def _split_deltas(events: list[c.StreamEvent]) -> list[c.StreamEvent]:
    """Cut text and argument deltas into pieces, as a model streams them."""
    out: list[c.StreamEvent] = []
    for ev in events:
        if isinstance(ev, c.BlockDelta) and len(ev.text) > 8:
            out.extend(c.BlockDelta(index=ev.index, text=p) for p in re.findall(r".{1,8}", ev.text, re.S))
        else:
            out.append(ev)
    return out


def describe(exchanges: list[Any], limit: int = 4000) -> str:
    """A short transcript for assertion messages."""
    lines = []
    for x in exchanges:
        lines.append(f"--- {x.path} -> {x.status}")
        lines.append("  request: " + bytes(x.request[:limit]).decode(errors="replace"))
        lines.append("  response: " + bytes(x.response[:limit]).decode(errors="replace"))
    return "\n".join(lines)


@dataclass
class Recorded:
    method: str
    path: str
    query: bytes
    headers: dict[str, str]
    request: bytes
    status: int = 0
    response: bytearray = field(default_factory=bytearray)


@dataclass
class Recorder:
    """ASGI wrapper recording what a client sent and what it got back (test logging)."""

    app: Any
    seen: list[Recorded] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        rec = Recorded(scope["method"], scope["path"], scope.get("query_string", b""), headers, b"")
        self.seen.append(rec)

        async def tee_receive() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                rec.request += message.get("body", b"")
            return message

        async def tee_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                rec.status = message["status"]
            elif message["type"] == "http.response.body":
                rec.response += message.get("body", b"")
            await send(message)

        await self.app(scope, tee_receive, tee_send)

    def summary(self) -> list[str]:
        return [
            f"{r.method} {r.path}{'?' + r.query.decode() if r.query else ''} -> {r.status}"
            for r in self.seen
        ]
