"""A scripted fake model for driving the real coding-agent CLIs (Claude Code, Codex).

``ScriptedModel`` is an ASGI app that speaks ONE protocol natively (it sits behind the
middleware as its upstream). Given the conversation it:

1. makes the tool calls of ``pre_steps``, one per turn, when the request declares those
   tools (e.g. Codex's freeform ``apply_patch``, Claude Code's ``ToolSearch``);
2. then calls the CLI's shell tool (``Bash``, ``exec_command``, ...) running ``command``;
3. once the request holds that result, answers with a final text quoting the tool
   output (``FINAL_PREFIX`` + output);
4. answers anything else (side requests such as title generation) with plain text.

Turns are counted from the results of our own calls (their ids start with
``CALL_ID_PREFIX``) found in the conversation, so the model is a pure function of the
request and a client retry gets the same answer.

Answers are canonical responses written by the protocol's own codec: JSON, or, when the
request asks for a stream, ``unfold`` + the codec's stream encoder (deltas cut small),
so the wire is exactly what the real API's shape is as the translators know it. Every
exchange is recorded so a failing test can show what was sent and answered.

``Recorder`` wraps any ASGI app and records what a client sent and received — the
test-side logging of the CLI <-> middleware traffic.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import msgspec

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName, unfold
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols import get_codec
from proxai_asgi.transport.upstream import Receive, Scope, Send

FINAL_PREFIX = "The command printed: "
CALL_ID_PREFIX = "call_proxaie2e"
_JSON_CT = (b"content-type", b"application/json")
_SSE_CT = (b"content-type", b"text/event-stream; charset=utf-8")


def shell_arguments(tool: c.Tool, command: str) -> str | None:
    """Arguments for the shell tools of the real CLIs, or None for any other tool.

    - Claude Code ``Bash``: ``{"command": str, "description": str}``
    - Codex ``exec_command`` (unified exec, Codex 0.169): ``{"cmd": str, ...}``
    - older Codex ``shell``: ``{"command": [argv...]}``; ``shell_command``: ``{"command": str}``
    - Gemini CLI ``run_shell_command``: ``{"command": str, "description": str}``
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
    if tool.name == "run_shell_command":
        return json.dumps({"command": command, "description": "Print the e2e marker"})
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
    # Tool calls (name, arguments) to make before the shell call, one per turn. For a
    # freeform (custom) tool the raw input is ``arguments["input"]``.
    pre_steps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # Reason before each tool call (an Anthropic thinking block with a signature, a
    # Responses reasoning item with encrypted_content, Chat reasoning_content), and
    # check that the CLI replays the opaque carrier intact on the next turn.
    reasoning: bool = False
    # Cut this many streamed answers short: a few events, then EOF with no terminal.
    break_streams: int = 0
    # Write response header names as many HTTP/1.1 servers do (Go's net/http, Node,
    # cpp-httplib): ``Content-Type``. Header names are case-insensitive.
    title_case_headers: bool = False
    # Answer this many model calls with a 429 in the protocol's own shape, with the
    # rate-limit headers its provider sends (retry after half a second).
    rate_limited: int = 0
    exchanges: list[Exchange] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ------------------------------------------------------------------ the model

    def raw_answer(self, request: c.Request) -> tuple[bytes, bytes] | None:
        """A provider's own answer bytes (JSON, SSE) instead of ``answer``'s, or None."""
        return None

    def answer(self, request: c.Request, n: int) -> c.Response:
        results = [
            p
            for m in request.messages
            for p in m.content
            if isinstance(p, c.ToolResult) and p.call_id.startswith(CALL_ID_PREFIX)
        ]
        if results and self.reasoning:
            self._check_replay(request)
        call = self._next_call(request, len(results), f"{CALL_ID_PREFIX}{n:04d}")
        content: list[c.Part]
        stop: c.StopReason = "end_turn"
        if call is not None:
            content = [c.Text(text="Running the command."), call]
            if self.reasoning:
                content.insert(0, self._reasoning(n))
                if self.protocol == "gemini_generate_content":
                    # Gemini 3 signs the function call part itself
                    sig = base64.b64encode(f"gemini-sig-scripted-{n:04d}".encode()).decode()
                    content.insert(2, c.Reasoning(thought_signature=sig))
            stop = "tool_use"
        elif results:
            content = [c.Text(text=FINAL_PREFIX + _text_of(results[-1].content).strip())]
        else:
            content = [c.Text(text="Scripted answer.")]
        return c.Response(
            id=f"scripted{n:04d}",
            model=request.model,
            content=content,
            stop_reason=stop,
            usage=c.Usage(input_tokens=100, output_tokens=10),
        )

    def _next_call(self, request: c.Request, step: int, call_id: str) -> c.ToolCall | None:
        tools = {t.name: t for t in request.tools}
        if step < len(self.pre_steps):
            name, args = self.pre_steps[step]
            tool = tools.get(name)
            if tool is None:
                if request.tools:  # side requests declare no tools; those are fine
                    self.problems.append(f"step {step}: no tool {name!r} in {sorted(tools)}")
                return None
            if tool.kind == "custom":
                return c.ToolCall(id=call_id, name=name, arguments=args["input"], kind="custom")
            return c.ToolCall(id=call_id, name=name, arguments=json.dumps(args))
        if step == len(self.pre_steps):
            for tool in request.tools:
                shell = shell_arguments(tool, self.command)
                if shell is not None:
                    return c.ToolCall(id=call_id, name=tool.name, arguments=shell)
        return None

    def _reasoning(self, n: int) -> c.Reasoning:
        text = "The user wants the marker; I will run the command."
        if self.protocol == "anthropic_messages":
            return c.Reasoning(text=text, signature=f"sig-scripted-{n:04d}")
        if self.protocol == "openai_responses":
            return c.Reasoning(
                text=text,
                summary=True,
                encrypted_content=f"enc-scripted-{n:04d}",
                item_id=f"rs_scripted{n:04d}",
            )
        if self.protocol == "gemini_generate_content":
            return c.Reasoning(text=text, summary=True)  # a thought summary, unsigned
        return c.Reasoning(text=text)

    def _check_replay(self, request: c.Request) -> None:
        """Every reasoning carrier this model issued must come back in the history."""
        replayed = [
            p
            for m in request.messages
            if m.role == "assistant"
            for p in m.content
            if isinstance(p, c.Reasoning)
        ]
        issued = [
            p
            for x in self.exchanges
            if x.answer and any(isinstance(q, c.ToolCall) for q in x.answer.content)
            for p in x.answer.content
            if isinstance(p, c.Reasoning)
        ]
        for want in issued:
            if self.protocol == "anthropic_messages":
                ok = any(r.signature == want.signature for r in replayed)
                what = f"thinking signature {want.signature!r}"
            elif self.protocol == "openai_responses":
                ok = any(r.encrypted_content == want.encrypted_content for r in replayed)
                what = f"reasoning encrypted_content {want.encrypted_content!r}"
            elif self.protocol == "gemini_generate_content":
                sig = want.thought_signature
                if sig is None:
                    continue  # thought summaries are not replayed; signatures are
                ok = any(r.thought_signature == sig for r in replayed)
                what = f"thoughtSignature {sig!r}"
            else:
                continue  # Chat has no carrier to replay
            if not ok:
                self.problems.append(f"{what} was not replayed; replayed: {replayed!r}")

    # ------------------------------------------------------------------- ASGI

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

        async def reply(
            status: int,
            ctype: tuple[bytes, bytes],
            chunks: list[bytes],
            extra: list[tuple[bytes, bytes]] | None = None,
        ) -> None:
            ex.status = status
            headers = [ctype, *(extra or [])]
            if self.title_case_headers:
                headers = [(k.title(), v) for k, v in headers]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            for chunk in chunks:
                ex.response += chunk
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        found = codec.serves(scope["path"])
        call = None if found is None else found.call  # a model named in the URL (Gemini)
        if scope["method"] != "POST" or (call is None and scope["path"] != codec.inner_path()):
            err = ProxyError(404, f"scripted model: no route {scope['path']}", kind="not_found")
            await reply(404, _JSON_CT, [codec.encode_error(err)])
            return
        with self._lock:
            limited = self.rate_limited > 0
            self.rate_limited -= limited
        if limited:
            err = ProxyError(429, "scripted model: rate limited", kind="rate_limit")
            await reply(
                429, _JSON_CT, [codec.encode_error(err)], _RATE_LIMIT_HEADERS[self.protocol]
            )
            return
        try:
            request = codec.decode_request(body, TranslationReport(lossy=True))
        except ProxyError as err:
            await reply(err.status, _JSON_CT, [codec.encode_error(err)])
            return
        if call is not None:
            request.model, request.stream = call.model, call.stream
        ex.decoded = request
        raw = self.raw_answer(request)
        if raw is not None:
            await reply(200, *((_SSE_CT, [raw[1]]) if request.stream else (_JSON_CT, [raw[0]])))
            return
        response = ex.answer = self.answer(request, n)
        if not request.stream:
            await reply(200, _JSON_CT, [codec.encode_response(response, request)])
            return
        events = _small_deltas(unfold(response))
        with self._lock:
            broken = self.break_streams > 0
            self.break_streams -= broken
        if broken:  # a few events, then EOF before the terminal event
            first_delta = next(i for i, e in enumerate(events) if isinstance(e, c.BlockDelta))
            events = events[: first_delta + 1]
        # (Its answer searches nothing: an encoder told of an offered search may hold
        # the answer back for it, as Anthropic's does, and a cut stream must show text.)
        encoder = codec.stream_encoder(msgspec.structs.replace(request, web_search=None))
        chunks = [data for data in map(encoder.encode, events) if data]
        await reply(200, _SSE_CT, chunks)


_OPENAI_LIMITS = [
    (b"retry-after-ms", b"500"),
    (b"x-ratelimit-limit-requests", b"500"),
    (b"x-ratelimit-remaining-requests", b"0"),
    (b"x-ratelimit-reset-requests", b"500ms"),
]
_RATE_LIMIT_HEADERS: dict[str, list[tuple[bytes, bytes]]] = {
    "openai_chat_completions": _OPENAI_LIMITS,
    "openai_responses": _OPENAI_LIMITS,
    "anthropic_messages": [
        (b"retry-after", b"1"),
        (b"anthropic-ratelimit-requests-limit", b"50"),
        (b"anthropic-ratelimit-requests-remaining", b"0"),
    ],
}


def _small_deltas(events: list[c.StreamEvent]) -> list[c.StreamEvent]:
    """Cut text and argument deltas into 8-character pieces, as a model streams."""
    out: list[c.StreamEvent] = []
    for ev in events:
        if isinstance(ev, c.BlockDelta) and len(ev.text) > 8:
            pieces = re.findall(r".{1,8}", ev.text, re.S)
            out.extend(c.BlockDelta(index=ev.index, text=p) for p in pieces)
        else:
            out.append(ev)
    return out


# ---------------------------------------------------------------- client logging


@dataclass
class Recorded:
    method: str
    path: str
    query: bytes
    headers: dict[str, str]
    request: bytes
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    response: bytearray = field(default_factory=bytearray)
    # A WebSocket (method "WS"): the text frames each way; status 101 once accepted.
    frames_in: list[str] = field(default_factory=list)
    frames_out: list[str] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.request)

    def line(self) -> str:
        query = "?" + self.query.decode() if self.query else ""
        return f"{self.method} {self.path}{query} -> {self.status}"


@dataclass
class Recorder:
    """ASGI wrapper recording what a client sent and what it got back."""

    app: Any
    seen: list[Recorded] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
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
                rec.response_headers = {
                    k.decode().lower(): v.decode() for k, v in message.get("headers", [])
                }
            elif message["type"] == "http.response.body":
                rec.response += message.get("body", b"")
            await send(message)

        await self.app(scope, tee_receive, tee_send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        rec = Recorded("WS", scope["path"], scope.get("query_string", b""), headers, b"")
        self.seen.append(rec)

        async def tee_receive() -> Any:
            message = await receive()
            if message["type"] == "websocket.receive" and message.get("text") is not None:
                rec.frames_in.append(message["text"])
            return message

        async def tee_send(message: Any) -> None:
            if message["type"] == "websocket.accept":
                rec.status = 101
            elif message["type"] == "websocket.http.response.start":
                rec.status = message["status"]
            elif message["type"] == "websocket.send" and message.get("text") is not None:
                rec.frames_out.append(message["text"])
                rec.response += message["text"].encode() + b"\n"
            await send(message)

        await self.app(scope, tee_receive, tee_send)


def transcript(recorder: Recorder, model: ScriptedModel, limit: int = 1500) -> str:
    """What the CLI sent and received, and what the fake model answered (for failures)."""

    def cut(data: bytes | bytearray) -> str:
        text = bytes(data).decode(errors="replace")
        return text if len(text) <= limit else text[: limit // 2] + " ... " + text[-limit // 2 :]

    lines = ["== CLI <-> middleware"]
    for r in recorder.seen:
        lines += [f"-- {r.line()}", "   response: " + cut(r.response)]
    lines.append("== middleware <-> scripted model")
    for x in model.exchanges:
        lines += [f"-- POST {x.path} -> {x.status}", "   response: " + cut(x.response)]
    if model.problems:
        lines += ["== problems", *model.problems]
    return "\n".join(lines)
