"""The Responses API over a WebSocket, as Codex speaks it to its built-in OpenAI provider.

Codex opens ``GET /v1/responses`` with ``Upgrade: websocket`` and sends JSON text
frames ``{"type": "response.create", ...request body...}``. Each answer is the same
event sequence a streamed ``POST /v1/responses`` carries, one event per text frame,
ending at ``response.completed`` (or ``response.failed``/``response.incomplete``).

Each ``response.create`` is served by the middleware's own HTTP path: the frame becomes
a synthesized ``POST`` (same headers, ``stream: true``) and every SSE event of the
answer is relayed as a text frame, so routing, translation, limits and logging are the
ones an HTTP client gets. Around that this module adds what only the socket has:

- ``previous_response_id`` naming the connection's last response continues it: the
  request's input is that response's input and output followed by the new input. The
  connection keeps exactly one response, so this works with ``store: false`` and never
  reaches a stateless upstream as an unknown field. Any other id goes on with the
  frame, so a response stored earlier (``stored_responses``) can be continued too.
- ``generate: false`` (Codex's warm-up) is answered at once with an empty completed
  response, without calling the upstream; its input still seeds the next turn.
- an HTTP error becomes the wrapped error frame Codex maps back to an HTTP status:
  ``{"type": "error", "status": 400, "error": {...}}``.

What a connection holds between turns is bounded (``SocketLimits``): the remembered
response is kept as the JSON bytes of its items (about what the client sent and the
model answered, not the decoded objects, which take ten to twenty times that), at most
``max_history`` of them; an idle connection is closed; past ``max_connections`` open
ones a handshake is refused with 503 (or closed with 1013, try again later).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec

from .. import ids
from ..sse import SSEDecoder
from ..transport.upstream import ASGIApp, Message, RawHeaders, Receive, Scope, Send

logger = logging.getLogger("proxai_asgi")

MAX_FRAME = 32 * 1024 * 1024  # the middleware's default body limit; the HTTP path rechecks
DEFAULT_IDLE_TIMEOUT = 300.0  # seconds without a frame; Codex reconnects for its next turn
DEFAULT_MAX_CONNECTIONS = 256
_TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete"})
# Handshake headers that describe the socket, not the request a frame stands for.
_SOCKET_HEADERS = frozenset(
    {b"upgrade", b"connection", b"content-length", b"content-type", b"accept-encoding"}
)
_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()


class FrameError(Exception):
    """A frame the connection answers with a wrapped error instead of a response."""

    def __init__(self, status: int, message: str, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param


def error_frame(status: int, error: dict[str, Any]) -> str:
    """Codex reads ``status`` (or ``status_code``) and maps a non-2xx one to the HTTP
    error it would have got over HTTP; the ``error`` object is the Responses one."""
    return _enc.encode({"type": "error", "status": status, "error": error}).decode()


async def deny(scope: Scope, send: Send) -> None:
    """Refuse the upgrade with 426, which makes Codex fall back to HTTP at once.

    Servers without the ASGI denial-response extension can only close the handshake
    (a 403), which Codex retries before falling back."""
    message = "WebSockets are disabled on this proxy; use HTTP"
    await refuse(scope, send, 426, "websockets_disabled", message)


async def refuse(
    scope: Scope,
    send: Send,
    status: int,
    code: str,
    message: str,
    *,
    close_code: int | None = None,
    headers: RawHeaders | None = None,
) -> None:
    """Refuse the handshake with ``status`` and an OpenAI error body. Servers without
    the ASGI denial-response extension get the socket closed before it opens (their
    403) or, given ``close_code``, opened and closed with that code."""
    if "websocket.http.response" in scope.get("extensions", {}):
        kind = "invalid_request_error" if status < 500 else "server_error"
        error = {"message": message, "type": kind, "param": None, "code": code}
        body = _enc.encode({"error": error})
        head = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        head += headers or []
        await send({"type": "websocket.http.response.start", "status": status, "headers": head})
        await send({"type": "websocket.http.response.body", "body": body})
    elif close_code is not None:
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": close_code, "reason": message[:120]})
    else:
        await send({"type": "websocket.close", "code": 1008})


@dataclass
class SocketLimits:
    """What the middleware's Responses WebSockets may hold, and how many are open."""

    idle_timeout: float | None
    max_connections: int | None
    max_history: int  # bytes of the remembered response's items
    open: int = 0

    async def serve(self, http_app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        if self.max_connections is not None and self.open >= self.max_connections:
            message = f"this proxy has {self.open} Responses WebSockets open; retry shortly"
            await refuse(
                scope,
                send,
                503,
                "too_many_connections",
                message,
                close_code=1013,  # try again later
                headers=[(b"retry-after", b"1")],
            )
            return
        self.open += 1  # no await since the check: no other connection in between
        try:
            await ResponsesSocket(http_app, scope, receive, send, self).run()
        finally:
            self.open -= 1


class ResponsesSocket:
    """One accepted connection: frames in, one response at a time, events out."""

    def __init__(
        self,
        http_app: ASGIApp,
        scope: Scope,
        receive: Receive,
        send: Send,
        limits: SocketLimits | None = None,
    ) -> None:
        self.http_app = http_app
        self.scope = scope
        self.receive = receive
        self._send = send
        self.limits = limits or SocketLimits(DEFAULT_IDLE_TIMEOUT, None, MAX_FRAME)
        self.closed = anyio.Event()
        # The connection's one remembered response: its id, and the full input and
        # output a ``previous_response_id`` naming it continues, as the JSON bytes of
        # one array (None: more than ``max_history`` bytes, not kept).
        self.last_id: str | None = None
        self.last_items: bytes | None = b"[]"
        # The stored response the last one continued (the HTTP path expands it), if any.
        self.last_base: str | None = None

    async def run(self) -> None:
        first = await self.receive()
        if first["type"] != "websocket.connect":
            return
        await self._send({"type": "websocket.accept"})
        frames_in, frames_out = anyio.create_memory_object_stream[str | None](16)
        reason = ""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._read, frames_in)
            async with frames_out:
                while True:
                    with anyio.move_on_after(_forever(self.limits.idle_timeout)) as idle:
                        try:
                            text = await frames_out.receive()
                        except anyio.EndOfStream:
                            break
                    if idle.cancelled_caught:
                        reason = "idle timeout"  # nothing asked for that long
                        break
                    await self._handle(text)
            tg.cancel_scope.cancel()
        if not self.closed.is_set():
            with contextlib.suppress(Exception):
                await self._send({"type": "websocket.close", "code": 1000, "reason": reason})

    async def _read(self, frames: anyio.abc.ObjectSendStream[str | None]) -> None:
        async with frames:
            while True:
                message = await self.receive()
                kind = message["type"]
                if kind == "websocket.disconnect":
                    self.closed.set()
                    return
                if kind == "websocket.receive":
                    # None stands for a binary frame, answered in turn like any other.
                    await frames.send(message.get("text"))

    async def _text(self, text: str) -> None:
        if self.closed.is_set():
            return
        try:
            await self._send({"type": "websocket.send", "text": text})
        except Exception:  # the client went away between two frames
            self.closed.set()

    # ----------------------------------------------------------------- one frame

    async def _handle(self, text: str | None) -> None:
        try:
            if text is None:
                raise FrameError(400, "binary frames are not accepted", "invalid_frame")
            request = self._request_body(text)
            if request is None:
                return  # a notice that needs no answer
            body, items = request
            if body.pop("generate", True) is False:
                await self._warm_up(body, items)
            else:
                await self._generate(body, items)
        except FrameError as err:
            error = _error(err.message, err.code, err.param)
            await self._text(error_frame(err.status, error))

    def _request_body(self, text: str) -> tuple[dict[str, Any], bytes] | None:
        """The frame as the body of a streamed POST, and its whole input as JSON bytes
        (the body holds them raw, so they are not decoded again here)."""
        if len(text) > MAX_FRAME:
            raise FrameError(413, f"frame exceeds {MAX_FRAME} bytes", "request_too_large")
        try:
            frame = _dec.decode(text)
        except msgspec.DecodeError:
            raise FrameError(400, "frame is not valid JSON", "invalid_json") from None
        if not isinstance(frame, dict):
            raise FrameError(400, "frame must be a JSON object", "invalid_request")
        kind = frame.pop("type", None)
        if kind == "response.processed":
            return None  # Codex acknowledging an answer it has handled
        if kind != "response.create":
            raise FrameError(
                400,
                f"unsupported frame type {kind!r}; send response.create",
                "invalid_type",
                "type",
            )
        items = _enc.encode(_items(frame.get("input")))
        previous = frame.get("previous_response_id")
        if previous is not None and previous == self.last_id:
            if self.last_items is None:
                raise FrameError(
                    413,
                    f"the conversation on this connection exceeds {self.limits.max_history} "
                    "bytes; send it whole on a new connection",
                    "request_too_large",
                    "previous_response_id",
                )
            items = _concat(self.last_items, items)
            if self.last_base is None:
                del frame["previous_response_id"]
            else:  # the last response continued a stored one: so does this
                frame["previous_response_id"] = self.last_base
        # Any other previous_response_id is left to the HTTP path: a stored response
        # (this proxy's store, or a Responses upstream's) or its 400.
        frame["input"] = msgspec.Raw(items)
        frame["stream"] = True
        return frame, items

    def _remember(self, response_id: str, items: bytes, base: Any) -> None:
        self.last_id, self.last_base = response_id, base
        self.last_items = items if len(items) <= self.limits.max_history else None

    async def _warm_up(self, body: dict[str, Any], items: bytes) -> None:
        response_id = "resp_" + ids.random_hex(16)
        shell: dict[str, Any] = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "model": body.get("model"),
            "output": [],
            "usage": None,
        }
        for n, (kind, status) in enumerate(
            (("response.created", "in_progress"), ("response.completed", "completed"))
        ):
            event = {"type": kind, "sequence_number": n, "response": {**shell, "status": status}}
            await self._text(_enc.encode(event).decode())
        self._remember(response_id, items, body.get("previous_response_id"))

    async def _generate(self, body: dict[str, Any], items: bytes) -> None:
        data = _enc.encode(body)
        relay = _Relay(self)
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": data, "more_body": False}
            await self.closed.wait()
            return {"type": "http.disconnect"}

        await self.http_app(self._http_scope(len(data)), receive, relay.send)
        await relay.finish()
        if relay.response_id is not None:
            items = _concat(items, _enc.encode(relay.output))
            self._remember(relay.response_id, items, body.get("previous_response_id"))

    def _http_scope(self, length: int) -> Scope:
        headers: RawHeaders = [
            (k, v)
            for k, v in self.scope.get("headers", [])
            if k not in _SOCKET_HEADERS and not k.startswith(b"sec-websocket-")
        ]
        headers += [
            (b"content-type", b"application/json"),
            (b"content-length", str(length).encode()),
            (b"accept", b"text/event-stream"),
        ]
        scheme = "https" if self.scope.get("scheme") == "wss" else "http"
        scope: Scope = {
            k: v for k, v in self.scope.items() if k not in ("subprotocols", "extensions")
        }
        scope.update(type="http", method="POST", scheme=scheme, headers=headers)
        scope["http_version"] = "1.1"
        scope["proxai.websocket"] = True
        return scope


class _Relay:
    """The ``send`` of one synthesized HTTP exchange: SSE events out as text frames, an
    error body out as the wrapped error frame; remembers what the next turn needs."""

    def __init__(self, socket: ResponsesSocket) -> None:
        self.socket = socket
        self.status = 0
        self.sse = SSEDecoder()
        self.error_body = bytearray()
        self.response_id: str | None = None
        self.output: list[Any] = []
        self.terminal = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            return
        if message["type"] != "http.response.body":
            return
        chunk: bytes = message.get("body", b"")
        if self.status != 200:
            if len(self.error_body) < MAX_FRAME:
                self.error_body += chunk
            return
        for event in self.sse.decode(chunk):
            await self._event(event.data)

    async def _event(self, data: bytes) -> None:
        if not data or data == b"[DONE]":
            return
        await self.socket._text(data.decode("utf-8", "replace"))
        try:
            event = _dec.decode(data)
        except msgspec.DecodeError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            self.output.append(event["item"])
        elif kind in _TERMINAL:
            self.terminal = True
            response = event.get("response") or {}
            if kind != "response.failed" and isinstance(response.get("id"), str):
                self.response_id = response["id"]
                if response.get("output"):
                    self.output = list(response["output"])

    async def finish(self) -> None:
        if self.status == 200:
            for event in self.sse.flush():
                await self._event(event.data)
            return
        status = self.status or 500
        error: dict[str, Any] = {}
        with contextlib.suppress(msgspec.DecodeError):
            parsed = _dec.decode(bytes(self.error_body)) if self.error_body else None
            if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
                error = parsed["error"]
        if not error:
            error = _error(self.error_body.decode("utf-8", "replace")[:1000] or "upstream error")
        await self.socket._text(error_frame(status, error))


def _items(value: Any) -> list[Any]:
    """A request's ``input`` as a list of items (a bare string is one user message)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if isinstance(value, list):
        return value
    raise FrameError(400, "input must be a string or a list of items", "invalid_type", "input")


def _concat(first: bytes, second: bytes) -> bytes:
    """Two JSON arrays (as msgspec encodes them: no spaces) as one."""
    if first == b"[]":
        return second
    if second == b"[]":
        return first
    return first[:-1] + b"," + second[1:]


def _forever(timeout: float | None) -> float:
    return float("inf") if timeout is None else timeout


def _error(message: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    return {"type": "invalid_request_error", "code": code, "message": message, "param": param}
