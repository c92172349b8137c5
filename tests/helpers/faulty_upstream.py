"""A provider that fails on purpose, for the routing tests: a raw asyncio HTTP/1.1
server on 127.0.0.1 (a framework cannot reset a connection before its headers, stall
with the socket open, or end a chunked stream without its last chunk).

It serves the four protocols' paths (Chat ``/v1/chat/completions``, Responses
``/v1/responses``, Anthropic ``/v1/messages``, Gemini
``/v1beta/models/{m}:generateContent`` and ``:streamGenerateContent?alt=sse``),
streamed and not, in their real shapes. The fault is chosen by the model name's
``fb-<tag>`` (after any ``provider/`` prefix); every healthy answer is ``ANSWER``, so a
truncated one is never mistaken for a complete one. An assistant (Gemini: model) last
turn whose text is a prefix of ``ANSWER`` is a prefill: the remainder is sent, except
by ``fb-ok-noprefill``, which rejects it with a 400. Every duration is multiplied by
``scale``. ``log`` records every attempt with its time since ``reset()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

ANSWER = (
    "Routing earns its keep on the bad days: a key is revoked at noon, a region "
    "sheds load, a stream dies in the middle of a word, and the caller should still "
    "read one reply. These sixty words exist so that any reply cut short by a "
    "failure can be told at once from a finished one, by counting them."
)
WORDS = ANSWER.split()
assert len(WORDS) == 60
REVOKED_KEY = "sk-revoked"  # answered 401 (Gemini: 400 API_KEY_INVALID) on every model

CHAT, RESPONSES, ANTHROPIC, GEMINI = "chat", "responses", "anthropic", "gemini"

# tag -> fault; the catalogue's sixteen, then ours.
FAULTS = {
    "ok": "ok",
    "ok-noprefill": "ok",
    "s01": "429_retry_after_once",
    "s02": "429_persistent",
    "s03": "500_once",
    "s04": "503_persistent",
    "s05": "reset_once",
    "s06": "no_response",
    "s07": "slow_first_token",
    "s08": "stream_cut",
    "s09": "stream_stall",
    "s10": "malformed_chunk",
    "s11": "no_done",
    "s12": "context_length",
    "s13": "content_filter",
    "s14": "stream_cut",
    "s15": "flap",
    "s16": "503_persistent",
    "overloaded": "529_persistent",  # Anthropic's overloaded_error (others: 503)
    "inband": "inband_error",  # 200, then the protocol's error event before content
}


@dataclass
class Timing:
    """The catalogue's full-profile durations (seconds), each times ``scale``."""

    scale: float = 1.0
    retry_after: float = 2.0
    slow_first_token: float = 20.0
    stall: float = 30.0
    no_response: float = 120.0
    flap_down: float = 60.0
    token_interval: float = 0.015
    cut_after: int = 40
    stall_after: int = 20
    malformed_at: int = 10

    def __call__(self, name: str) -> float:
        value: float = getattr(self, name)
        return value * self.scale


@dataclass
class Attempt:
    t: float  # seconds since reset()
    model: str
    tag: str | None
    protocol: str
    stream: bool
    key: str | None
    prefill: str | None  # the assistant text the request ended with
    action: str = ""
    ended: float | None = None  # when the answer (or the fault) was over


def tag_of(model: str) -> str | None:
    name = model.rsplit("/", 1)[-1].strip().lower()
    if not name.startswith("fb-"):
        return None
    rest = name[3:]
    if rest in FAULTS:
        return rest
    tag = rest.split("-", 1)[0]
    return tag if tag in FAULTS else None


def _protocol(path: str) -> tuple[str, str | None, bool] | None:
    """(protocol, model in the path, streamed by the path) for a POST path."""
    if path.endswith("/chat/completions"):
        return CHAT, None, False
    if path.endswith("/responses"):
        return RESPONSES, None, False
    if path.endswith("/messages"):
        return ANTHROPIC, None, False
    if "/models/" in path and ":" in path:
        model, _, method = path.rsplit("/models/", 1)[1].partition(":")
        if method in ("generateContent", "streamGenerateContent"):
            return GEMINI, model, method == "streamGenerateContent"
    return None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return ""


def _prefill(protocol: str, body: dict[str, Any]) -> str | None:
    if protocol == GEMINI:
        turns = body.get("contents") or []
        last = turns[-1] if turns else {}
        return _text_of(last.get("parts")) if last.get("role") == "model" else None
    turns = body.get("input") if protocol == RESPONSES else body.get("messages")
    if not isinstance(turns, list) or not turns:
        return None
    last = turns[-1]
    return _text_of(last.get("content")) if last.get("role") == "assistant" else None


def _key(protocol: str, headers: dict[str, str], query: str) -> str | None:
    if protocol == ANTHROPIC:
        return headers.get("x-api-key")
    if protocol == GEMINI:
        found = [p[4:] for p in query.split("&") if p.startswith("key=")]
        return headers.get("x-goog-api-key") or (found[0] if found else None)
    auth = headers.get("authorization", "")
    return auth[7:] if auth.lower().startswith("bearer ") else None


# ------------------------------------------------------------------ error bodies
_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED",
                  500: "INTERNAL", 503: "UNAVAILABLE"}  # fmt: skip
_ANTHROPIC_TYPE = {400: "invalid_request_error", 401: "authentication_error",
                   429: "rate_limit_error", 500: "api_error", 503: "overloaded_error",
                   529: "overloaded_error"}  # fmt: skip


def error_body(protocol: str, status: int, message: str, code: str | None) -> dict[str, Any]:
    if protocol == ANTHROPIC:
        return {"type": "error", "error": {"type": _ANTHROPIC_TYPE[status], "message": message}}
    if protocol == GEMINI:
        err: dict[str, Any] = {"code": status, "message": message,
                               "status": _GEMINI_STATUS.get(status, "UNAVAILABLE")}  # fmt: skip
        if code == "API_KEY_INVALID":
            info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID", "domain": "googleapis.com"}  # fmt: skip
            err["details"] = [info]
        return {"error": err}
    etype = {400: "invalid_request_error", 401: "invalid_request_error",
             429: "rate_limit_error"}.get(status, "server_error")  # fmt: skip
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}


# ------------------------------------------------------------------ answer shapes
class Shapes:
    """One protocol's wire shapes for the fixed answer."""

    def __init__(self, protocol: str, model: str, rid: str, prompt_tokens: int) -> None:
        self.p, self.model, self.rid, self.prompt = protocol, model, rid, prompt_tokens
        self.seq = 0
        self.created = int(time.time())  # one value for every chunk of the answer

    def usage(self, n: int) -> dict[str, Any]:
        if self.p == CHAT:
            return {"prompt_tokens": self.prompt, "completion_tokens": n,
                    "total_tokens": self.prompt + n}  # fmt: skip
        if self.p == RESPONSES:
            return {"input_tokens": self.prompt, "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": n, "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": self.prompt + n}  # fmt: skip
        if self.p == ANTHROPIC:
            return {"input_tokens": self.prompt, "output_tokens": n}
        return {"promptTokenCount": self.prompt, "candidatesTokenCount": n,
                "totalTokenCount": self.prompt + n}  # fmt: skip

    def _response(self, text: str, n: int, status: str) -> dict[str, Any]:
        item = {"id": "msg_" + self.rid, "type": "message", "status": status, "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
        return {"id": "resp_" + self.rid, "object": "response", "created_at": self.created,
                "status": status, "model": self.model, "output": [item] if text else [],
                "error": None, "incomplete_details": None,
                "usage": self.usage(n) if status == "completed" else None,
                }  # fmt: skip

    def json(self, text: str, n: int) -> dict[str, Any]:
        if self.p == CHAT:
            return {"id": "chatcmpl-" + self.rid, "object": "chat.completion",
                    "created": self.created, "model": self.model,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": self.usage(n)}  # fmt: skip
        if self.p == RESPONSES:
            return self._response(text, n, "completed")
        if self.p == ANTHROPIC:
            return {"id": "msg_" + self.rid, "type": "message", "role": "assistant",
                    "model": self.model, "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn", "stop_sequence": None,
                    "usage": self.usage(n)}  # fmt: skip
        return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": self.usage(n), "modelVersion": self.model,
                "responseId": self.rid}  # fmt: skip

    def _event(self, name: str, data: dict[str, Any]) -> bytes:
        if self.p == RESPONSES:
            data = {"type": name, "sequence_number": self.seq, **data}
            self.seq += 1
        if self.p in (RESPONSES, ANTHROPIC):
            if self.p == ANTHROPIC:
                data = {"type": name, **data}
            return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        return f"data: {json.dumps(data)}\n\n".encode()

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return self._event("", {"id": "chatcmpl-" + self.rid, "object": "chat.completion.chunk",
                                "created": self.created, "model": self.model,
                                "choices": [{"index": 0, "delta": delta,
                                             "finish_reason": finish}]})  # fmt: skip

    def start(self) -> list[bytes]:
        """The events before the first content."""
        if self.p == CHAT:
            return [self._chunk({"role": "assistant", "content": ""})]
        if self.p == RESPONSES:
            item = {"id": "msg_" + self.rid, "type": "message", "status": "in_progress",
                    "role": "assistant", "content": []}  # fmt: skip
            part = {"type": "output_text", "text": "", "annotations": []}
            return [
                self._event("response.created",
                            {"response": self._response("", 0, "in_progress")}),
                self._event("response.in_progress",
                            {"response": self._response("", 0, "in_progress")}),
                self._event("response.output_item.added", {"output_index": 0, "item": item}),
                self._event("response.content_part.added", {"item_id": item["id"],
                            "output_index": 0, "content_index": 0, "part": part}),
            ]  # fmt: skip
        if self.p == ANTHROPIC:
            message = {"id": "msg_" + self.rid, "type": "message", "role": "assistant",
                       "content": [], "model": self.model, "stop_reason": None,
                       "stop_sequence": None, "usage": {"input_tokens": self.prompt,
                                                        "output_tokens": 1}}  # fmt: skip
            return [
                self._event("message_start", {"message": message}),
                self._event("content_block_start",
                            {"index": 0, "content_block": {"type": "text", "text": ""}}),
                self._event("ping", {}),
            ]
        return []

    def delta(self, text: str) -> bytes:
        if self.p == CHAT:
            return self._chunk({"content": text})
        if self.p == RESPONSES:
            return self._event("response.output_text.delta", {"item_id": "msg_" + self.rid,
                               "output_index": 0, "content_index": 0, "delta": text,
                               "logprobs": []})  # fmt: skip
        if self.p == ANTHROPIC:
            return self._event("content_block_delta",
                               {"index": 0, "delta": {"type": "text_delta", "text": text}})
        return self._event("", {"candidates": [{"content": {"role": "model",
                                "parts": [{"text": text}]}, "index": 0}],
                                "modelVersion": self.model, "responseId": self.rid})  # fmt: skip

    def finish(self, text: str, n: int, usage: bool, done: bool) -> list[bytes]:
        if self.p == CHAT:
            out = [self._chunk({}, "stop")]
            if usage:
                out.append(self._event("", {"id": "chatcmpl-" + self.rid,
                           "object": "chat.completion.chunk", "created": self.created,
                           "model": self.model, "choices": [],
                           "usage": self.usage(n)}))  # fmt: skip
            return out + ([b"data: [DONE]\n\n"] if done else [])
        if self.p == RESPONSES:
            iid = "msg_" + self.rid
            part = {"type": "output_text", "text": text, "annotations": []}
            done_item = self._response(text, n, "completed")["output"][0]
            return [
                self._event("response.output_text.done", {"item_id": iid, "output_index": 0,
                            "content_index": 0, "text": text, "logprobs": []}),
                self._event("response.content_part.done", {"item_id": iid, "output_index": 0,
                            "content_index": 0, "part": part}),
                self._event("response.output_item.done", {"output_index": 0, "item": done_item}),
                self._event("response.completed",
                            {"response": self._response(text, n, "completed")}),
            ]  # fmt: skip
        if self.p == ANTHROPIC:
            return [
                self._event("content_block_stop", {"index": 0}),
                self._event("message_delta", {"delta": {"stop_reason": "end_turn",
                            "stop_sequence": None}, "usage": {"output_tokens": n}}),
                self._event("message_stop", {}),
            ]  # fmt: skip
        return [self._event("", {"candidates": [{"content": {"role": "model",
                                 "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0}],
                                 "usageMetadata": self.usage(n), "modelVersion": self.model,
                                 "responseId": self.rid})]  # fmt: skip

    def error_event(self) -> bytes:
        """The protocol's in-band failure, as sent before any content."""
        message = "The model is overloaded. Please try again later."
        if self.p == ANTHROPIC:
            return self._event("error", {"error": {"type": "overloaded_error",
                                                   "message": "Overloaded"}})  # fmt: skip
        if self.p == RESPONSES:
            failed = self._response("", 0, "failed")
            failed["error"] = {"code": "server_error", "message": message}
            return self._event("response.failed", {"response": failed})
        if self.p == GEMINI:
            return self._event("", {"error": {"code": 503, "message": message,
                                              "status": "UNAVAILABLE"}})  # fmt: skip
        return self._event("", {"error": {"message": message, "type": "server_error",
                                          "param": None, "code": "overloaded"}})  # fmt: skip


# ------------------------------------------------------------------ the server
@dataclass
class _Request:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FaultyUpstream:
    scale: float = 1.0
    log: list[Attempt] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.timing = Timing(scale=self.scale)
        self.reset()

    def reset(self) -> None:
        self.t0 = time.monotonic()
        self.log = []
        self.counts: dict[str, int] = {}

    def now(self) -> float:
        return time.monotonic() - self.t0

    def attempts(self, model: str) -> list[Attempt]:
        return [a for a in self.log if a.model.rsplit("/", 1)[-1] == model]

    # -------------------------------------------------------------- connection
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (req := await self._read(reader)) is not None:
                if not await self._dispatch(req, reader, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()
                await writer.wait_closed()

    async def _read(self, reader: asyncio.StreamReader) -> _Request | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = b""
        if "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0] or b"0", 16):
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass
            body = b"".join(parts)
        path, _, query = target.partition("?")
        return _Request(method, path, query, headers, body)

    @staticmethod
    def _head(status: int, headers: dict[str, str], keep: bool = True) -> bytes:
        lines = [f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}",
                 f"connection: {'keep-alive' if keep else 'close'}"]  # fmt: skip
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _json(
        self, writer: asyncio.StreamWriter, status: int, obj: Any,
        extra: dict[str, str] | None = None,
    ) -> bool:  # fmt: skip
        body = json.dumps(obj).encode()
        headers = {"content-type": "application/json", "content-length": str(len(body))}
        writer.write(self._head(status, {**headers, **(extra or {})}) + body)
        await writer.drain()
        return True

    # -------------------------------------------------------------- dispatch
    async def _dispatch(
        self, req: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        found = _protocol(req.path) if req.method == "POST" else None
        if found is None:
            return await self._json(writer, 404, {"error": {"message": "no such path"}})
        protocol, path_model, path_stream = found
        try:
            body = json.loads(req.body or b"{}")
        except ValueError:
            return await self._json(writer, 400, error_body(protocol, 400, "bad JSON", None))
        model = path_model or str(body.get("model") or "")
        stream = path_stream if protocol == GEMINI else bool(body.get("stream"))
        tag = tag_of(model)
        key = _key(protocol, req.headers, req.query)
        prefill = _prefill(protocol, body)
        attempt = Attempt(self.now(), model, tag, protocol, stream, key, prefill)
        self.log.append(attempt)
        name = model.rsplit("/", 1)[-1]  # "openai/fb-s01" is fb-s01's attempt too
        n = self.counts[name] = self.counts.get(name, 0) + 1
        reply = _Reply(self, writer, reader, protocol, model, attempt, body)
        try:
            return await reply.run(tag, n, stream)
        finally:
            attempt.ended = self.now()


class _Reply:
    """One attempt's answer: its fault, or the fixed answer."""

    def __init__(
        self, up: FaultyUpstream, writer: asyncio.StreamWriter, reader: asyncio.StreamReader,
        protocol: str, model: str, attempt: Attempt, body: dict[str, Any],
    ) -> None:  # fmt: skip
        self.up, self.w, self.r, self.p, self.model = up, writer, reader, protocol, model
        self.a, self.body, self.T = attempt, body, up.timing

    async def error(
        self, status: int, message: str, code: str | None = None,
        extra: dict[str, str] | None = None,
    ) -> bool:  # fmt: skip
        self.a.action = f"{status} {code or ''}".strip()
        return await self.up._json(self.w, status, error_body(self.p, status, message, code), extra)

    async def run(self, tag: str | None, n: int, stream: bool) -> bool:
        if tag is None:
            return await self.error(404, f"The model `{self.model}` does not exist",
                                    "model_not_found")  # fmt: skip
        if self.a.key == REVOKED_KEY:
            if self.p == GEMINI:
                return await self.error(400, "API key not valid.", "API_KEY_INVALID")
            return await self.error(401, "Incorrect API key provided.", "invalid_api_key")
        words, continued = WORDS, False
        if self.a.prefill is not None:
            if tag == "ok-noprefill":
                return await self.error(400, "This model does not support assistant message "
                                        "prefill.", "invalid_prefill")  # fmt: skip
            done = self.a.prefill.strip()
            if done and ANSWER.startswith(done):
                words, continued = ANSWER[len(done):].split(), True
        fault = FAULTS[tag]
        handled = await self.fault(fault, n)
        if handled is not None:
            return handled
        if not stream:
            return await self.plain(words, continued, fault)
        return await self.stream(words, continued, fault)

    async def fault(self, fault: str, n: int) -> bool | None:
        """The faults answered before any 200; None: go on to the answer."""
        T = self.T
        if fault == "429_retry_after_once" and n == 1:
            wait = T("retry_after")
            headers = {"retry-after": str(max(1, round(wait))),
                       "retry-after-ms": str(int(wait * 1000))}  # fmt: skip
            return await self.error(429, "Rate limit reached.", "rate_limit_exceeded", headers)
        if fault == "429_persistent":
            return await self.error(429, "Rate limit reached.", "rate_limit_exceeded")
        if fault == "500_once" and n == 1:
            return await self.error(500, "The server had an error.", None)
        if fault == "503_persistent" or (fault == "flap" and self.up.now() < T("flap_down")):
            return await self.error(503, "The engine is currently overloaded.", "overloaded")
        if fault == "529_persistent":
            return await self.error(529 if self.p == ANTHROPIC else 503, "Overloaded", "overloaded")
        if fault == "reset_once" and n == 1:
            self.a.action = "reset"
            sock = self.w.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.w.close()
            return False
        if fault == "no_response":
            self.a.action = "silence"
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.r.read(1), T("no_response"))
            return False
        if fault == "context_length":
            message = "This model's maximum context length is 8192 tokens."
            return await self.error(400, message, "context_length_exceeded")
        if fault == "content_filter":
            message = "Your request was rejected as a result of our safety system."
            return await self.error(400, message, "content_policy_violation")
        return None

    def shapes(self) -> Shapes:
        turns = self.body.get("messages") or self.body.get("input") or self.body.get("contents")
        prompt = len(json.dumps(turns).split()) if turns else 1
        return Shapes(self.p, self.model, f"fb{len(self.up.log)}", prompt)

    async def plain(self, words: list[str], continued: bool, fault: str) -> bool:
        text = (" " if continued else "") + " ".join(words)
        if fault == "slow_first_token":
            await asyncio.sleep(self.T("slow_first_token"))
        body = json.dumps(self.shapes().json(text, len(words))).encode()
        head = {"content-type": "application/json", "content-length": str(len(body))}
        self.a.action = "200"
        if fault in ("stream_cut", "stream_stall"):
            self.a.action = "200 cut" if fault == "stream_cut" else "200 stall"
            self.w.write(self.up._head(200, head, keep=False) + body[: len(body) * 6 // 10])
            await self.w.drain()
            if fault == "stream_stall":
                await asyncio.sleep(self.T("stall"))
            self.w.close()
            return False
        if fault == "malformed_chunk":
            self.a.action = "200 malformed"
            bad = body[: len(body) // 2] + b'"oops'
            head["content-length"] = str(len(bad))
            self.w.write(self.up._head(200, head) + bad)
            await self.w.drain()
            return True
        self.w.write(self.up._head(200, head) + body)
        await self.w.drain()
        return True

    async def send(self, frame: bytes) -> None:
        self.w.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
        await self.w.drain()

    async def stream(self, words: list[str], continued: bool, fault: str) -> bool:
        T, shapes = self.T, self.shapes()
        sse = {"content-type": "text/event-stream", "cache-control": "no-cache",
               "transfer-encoding": "chunked"}  # fmt: skip
        self.w.write(self.up._head(200, sse))
        await self.w.drain()
        self.a.action = "200 stream"
        if fault == "slow_first_token":
            await asyncio.sleep(T("slow_first_token"))
        preamble = shapes.start()
        if fault == "inband_error" and self.p == RESPONSES:
            preamble, shapes.seq = preamble[:2], 2  # created, in_progress: no item opened
        for frame in preamble:
            await self.send(frame)
        if fault == "inband_error":
            self.a.action = "200 in-band error"
            await self.send(shapes.error_event())
            if self.p == CHAT:
                await self.send(b"data: [DONE]\n\n")
            self.w.write(b"0\r\n\r\n")
            await self.w.drain()
            return True
        sent: list[str] = []
        for i, word in enumerate(words):
            if fault == "stream_cut" and i == T.cut_after:
                self.a.action = f"200 cut after {i}"
                self.w.close()  # no last chunk
                return False
            if fault == "stream_stall" and i == T.stall_after:
                self.a.action = f"200 stall after {i}"
                await asyncio.sleep(T("stall"))
                self.w.close()
                return False
            if fault == "malformed_chunk" and i == T.malformed_at:
                self.a.action = f"200 malformed at {i}"
                await self.send(b'data: {"choices": [{"delta": {"content": \n\n')
            piece = (" " + word) if (i or continued) else word
            sent.append(piece)
            await self.send(shapes.delta(piece))
            if T("token_interval"):
                await asyncio.sleep(T("token_interval"))
        usage = bool((self.body.get("stream_options") or {}).get("include_usage"))
        for frame in shapes.finish("".join(sent), len(sent), usage, done=fault != "no_done"):
            await self.send(frame)
        self.w.write(b"0\r\n\r\n")
        await self.w.drain()
        return True


@contextlib.contextmanager
def faulty_upstream(scale: float = 1.0) -> Iterator[tuple[FaultyUpstream, str]]:
    """The server on its own thread and loop; yields it and ``http://127.0.0.1:PORT``."""
    up = FaultyUpstream(scale=scale)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def main() -> None:
        server = await asyncio.start_server(up.handle, "127.0.0.1", 0)
        holder["server"] = server
        holder["port"] = server.sockets[0].getsockname()[1]
        ready.set()
        async with server:
            with contextlib.suppress(asyncio.CancelledError):
                await server.serve_forever()

    def run() -> None:
        with contextlib.suppress(Exception):
            loop.run_until_complete(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the faulty upstream did not start")
    try:
        yield up, f"http://127.0.0.1:{holder['port']}"
    finally:
        def cancel_all() -> None:
            holder["server"].close()
            for task in asyncio.all_tasks(loop):
                task.cancel()

        loop.call_soon_threadsafe(cancel_all)
        thread.join(timeout=10)
        loop.close()
