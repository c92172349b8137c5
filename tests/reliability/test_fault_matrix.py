"""Upstream faults, each x the four client protocols x stream and non-stream.

Every fault runs through all twelve translated directions (but a stall inside tool
arguments toward Gemini, which sends each call whole), and the faults where
pass-through has something to decide (reaching the upstream, timeouts, a stream that
breaks, an error status) through the four pass-through pairs too. Every case must end
with the client protocol's own error, naming the fault that decided it (so a timeout
case proves the configured timeout answered, not a default nor the upstream giving up),
and before a stalled upstream would have given up on its own (``HOLD``): no test here
waits on a tight time limit, so a loaded machine cannot fail it.

- before the response started: the HTTP status (502 unreachable, 504 timeouts, the
  upstream's own status for its errors) with a body in the client's error shape;
- after a stream started: the client protocol's terminal error (Anthropic ``event:
  error``; Responses ``error`` then ``response.failed``; Chat an error chunk then
  ``[DONE]``; Gemini a ``data: {"error": ...}`` frame), checked by the strict stream
  validators.

The upstream is a raw asyncio server (``_raw.RawServer``) that picks its misbehaviour
from the request's model (in the body, or in a Gemini URL), so the whole matrix runs
concurrently.
"Connect timeout" is real on loopback: a listening socket with ``listen(0)`` whose one
accept-queue slot is taken, so the kernel drops further SYNs and connects hang.

After the matrix nothing is left behind: no task on the proxies' event loops but the
server's own, no active or pending connection in the proxies' pools, and every
upstream connection closed. The whole module runs twice: upstream requests through
httpx (``lean_http=False``), and with no transport option: the default lean HTTP/1.1
pool.

Client disconnect: for all sixteen pairs, streamed and not, the client's socket is closed
while the upstream is mid-answer; the time from the client's close to the upstream
seeing its connection closed is measured and printed; the test asks only that the
proxy closed it while the upstream was still holding the answer open.

Last runs: 410 cases (15 faults x 12 translated directions x stream / non-stream, less
the 6 tool stalls toward Gemini, plus the pass-through pairs for 8 of the faults) in
about 2.3 to 2.7 s wall, all at once (timeouts: connect 1.0 s, read 1.2 s, stream idle
0.6 s, tool stall 0.25 s). Client disconnect, 32 measurements (16 pairs x
stream / non-stream): at most about 1.3 ms, mean about 0.7 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import re
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Route, Upstream
from tests.helpers.captures import path_of
from tests.helpers.servers import reply_from_capture
from tests.helpers.validate_anthropic import validate_anthropic_stream
from tests.helpers.validate_chat import validate_chat_stream
from tests.helpers.validate_gemini import validate_gemini_stream
from tests.helpers.validate_responses import validate_responses_stream

from ._raw import Conn, LoopServer, RawServer
from ._shapes import error_message
from .corpus import ANTHROPIC, CHAT, CLIENTS, GEMINI, PATH, RESPONSES

# Everything (client, three proxies, upstream) shares this process and its GIL, so the
# timeouts leave room for scheduling; the GC is paused while timing (see ``quiet``).
CONNECT_TIMEOUT = 1.0
READ_TIMEOUT = 1.2  # before headers, and between body chunks (httpx)
IDLE_TIMEOUT = 0.6  # stream_idle_timeout: shorter than the read timeout, so it decides
TOOL_TIMEOUT = 0.25  # tool_stall_timeout: shorter still
HOLD = 5.0  # how long a stalled upstream waits before giving up on its own

UPSTREAM_OF_PATH = {
    "/v1/chat/completions": CHAT,
    "/v1/responses": RESPONSES,
    "/v1/messages": ANTHROPIC,
}
TEXT_CAPTURE = {
    CHAT: "chat_sse_text_basic_include_usage",
    RESPONSES: "responses_sse_text_basic",
    ANTHROPIC: "anthropic_sse_text_basic",
    GEMINI: "gemini_sse_thinking",  # several frames before the one with finishReason
}
TOOL_CAPTURE = {
    CHAT: "chat_sse_parallel_tool_calls",
    RESPONSES: "responses_sse_parallel_function_calls",
    ANTHROPIC: "anthropic_sse_parallel_tool_use",
    GEMINI: "gemini_sse_tools",
}
JSON_CAPTURE = {
    CHAT: "chat_json_text_basic",
    RESPONSES: "responses_json_text_basic",
    ANTHROPIC: "anthropic_json_text_basic",
    GEMINI: "gemini_json_text_basic",
}
GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED"}
SSE_HEADERS = [("Content-Type", "text/event-stream; charset=utf-8")]


@pytest.fixture(autouse=True)
def _recordings() -> None:
    """The raw upstream answers with recorded traffic: read it in the test, so a
    checkout without the recordings skips here instead of failing in the server."""
    for table in (TEXT_CAPTURE, TOOL_CAPTURE, JSON_CAPTURE):
        for name in table.values():
            path_of(name)


def _frames(name: str) -> list[bytes]:
    return reply_from_capture(name).chunks


def _first(frames: list[bytes], needles: tuple[bytes, ...]) -> int:
    """Index of the first frame containing one of ``needles``."""
    return next(i for i, f in enumerate(frames) if any(n in f for n in needles))


def _text_cut(protocol: str) -> int:
    """Frames up to and including the first text delta."""
    frames = _frames(TEXT_CAPTURE[protocol])
    needles = {
        CHAT: (b'"content":"4',),
        RESPONSES: (b"output_text.delta",),
        ANTHROPIC: (b"text_delta",),
        GEMINI: (b'"text"',),
    }[protocol]
    return _first(frames, needles) + 1


def _tool_cut(protocol: str) -> int:
    """Frames up to and including the first tool-argument fragment."""
    frames = _frames(TOOL_CAPTURE[protocol])
    needles = {
        CHAT: (b'"arguments":"{',),
        RESPONSES: (b"function_call_arguments.delta",),
        ANTHROPIC: (b'"partial_json":"{',),
        GEMINI: (b'"functionCall"',),  # always whole: Gemini has no partial arguments
    }[protocol]
    return _first(frames, needles) + 1


def _error_body(protocol: str, status: int, message: str) -> bytes:
    if protocol == GEMINI:
        name = GOOGLE_STATUS.get(status, "INTERNAL" if status == 500 else "UNAVAILABLE")
        return json.dumps({"error": {"code": status, "message": message, "status": name}}).encode()
    if protocol == ANTHROPIC:
        kind = {429: "rate_limit_error", 529: "overloaded_error", 500: "api_error"}.get(
            status, "invalid_request_error"
        )
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    kind = {429: "rate_limit_exceeded", 500: "server_error", 529: "server_error"}.get(
        status, "invalid_request_error"
    )
    return json.dumps(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}
    ).encode()


MALFORMED = {
    CHAT: b"data: {not json at all\n\n",
    RESPONSES: b"event: response.output_text.delta\ndata: {not json at all\n\n",
    ANTHROPIC: b"event: content_block_delta\ndata: {not json at all\n\n",
    GEMINI: b"data: {not json at all\r\n\r\n",
}


def gemini_path(model: str, stream: bool) -> str:
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/v1beta/models/{model}:{method}"


def client_path(client: str, model: str, stream: bool) -> str:
    """Where a client posts: a Gemini client names the model and the stream in it."""
    return gemini_path(model, stream) if client == GEMINI else PATH[client]


# ------------------------------------------------------------------ the upstream


async def misbehave(conn: Conn) -> None:
    """The raw upstream: what it does is named by the request's model."""
    path = conn.request.target.split("?")[0]
    body = conn.request.json()
    if path.startswith("/v1beta/models/"):  # Gemini: the model and the stream in the URL
        protocol = GEMINI
        model, _, method = path.removeprefix("/v1beta/models/").rpartition(":")
        fault, stream = model.split(":")[0], method == "streamGenerateContent"
    else:
        protocol = UPSTREAM_OF_PATH[path]
        fault = str(body.get("model", "")).split(":")[0]
        stream = bool(body.get("stream"))
    text = _frames(TEXT_CAPTURE[protocol])
    whole = reply_from_capture(JSON_CAPTURE[protocol]).chunks[0]

    if fault == "hold":  # the disconnect test: answer part, then wait for the proxy to leave
        if stream:
            await conn.head(200, SSE_HEADERS, chunked=True)
            for f in text[: _text_cut(protocol)]:
                await conn.chunk(f)
        await conn.wait_peer_close(10)
        return
    if fault == "read_timeout":
        await conn.wait_peer_close(HOLD)
        return
    if fault.startswith("error_"):
        _, ctype, status_s = fault.split("_")
        status = int(status_s)
        if ctype == "json":
            await conn.json_reply(
                status, _error_body(protocol, status, f"upstream says no {status}")
            )
        elif ctype == "html":
            page = b"<html><body><h1>503 Service Unavailable</h1></body></html>"
            await conn.json_reply(status, page, "text/html")
        else:
            await conn.json_reply(status, b"upstream says no, in plain text", "text/plain")
        return
    if not stream:
        # A non-stream upstream answers JSON; the faults become faults of that body.
        if fault in ("stall_mid", "stall_tool"):
            await conn.head(
                200,
                [("Content-Type", "application/json"), ("Content-Length", str(len(whole)))],
                chunked=False,
            )
            await conn.raw(whole[: len(whole) // 2])
            await conn.wait_peer_close(HOLD)
        elif fault == "drop_mid":
            await conn.head(
                200,
                [("Content-Type", "application/json"), ("Content-Length", str(len(whole)))],
                chunked=False,
            )
            await conn.raw(whole[: len(whole) // 2])  # then the socket closes
        elif fault == "malformed":
            await conn.json_reply(200, b"{not json at all")
        elif fault == "no_terminal":
            await conn.json_reply(200, whole[: len(whole) // 2])
        else:
            await conn.json_reply(200, whole)
        return

    await conn.head(200, SSE_HEADERS, chunked=True)
    if fault == "stall_mid":
        for f in text[: _text_cut(protocol)]:
            await conn.chunk(f)
        await conn.wait_peer_close(HOLD)
    elif fault == "stall_tool":
        for f in _frames(TOOL_CAPTURE[protocol])[: _tool_cut(protocol)]:
            await conn.chunk(f)
        await conn.wait_peer_close(HOLD)
    elif fault == "drop_mid":
        for f in text[: _text_cut(protocol)]:
            await conn.chunk(f)
        await conn.raw(b"400\r\npartial chunk")  # a chunk cut short, then the socket closes
    elif fault == "malformed":
        cut = _text_cut(protocol)
        for f in [*text[:cut], MALFORMED[protocol], *text[cut:]]:
            await conn.chunk(f)
        await conn.end_chunks()
    elif fault == "no_terminal":
        for f in text[: _text_cut(protocol) + 1]:
            await conn.chunk(f)
        await conn.end_chunks()  # a clean end of body, without the terminal event
    else:
        for f in text:
            await conn.chunk(f)
        await conn.end_chunks()


# ------------------------------------------------------------------- the proxies


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No garbage-collector pauses while timing: a full collection of this test
    process (every earlier test's objects) can stall all its threads for longer
    than the timeouts under test."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


@dataclass
class Rig:
    raw: RawServer
    proxies: dict[str, LoopServer]  # by upstream protocol
    apps: dict[str, ProxaiMiddleware]


async def _inner(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _base(url: str, protocol: str) -> str:
    return url + "/v1" if protocol in (CHAT, RESPONSES) else url


@pytest.fixture(scope="module", params=["httpx", "default"])
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    with ExitStack() as es:
        raw = es.enter_context(RawServer(misbehave).running())
        # Connect timeout on loopback: one accept-queue slot, taken; SYNs are dropped.
        blackhole = socket.socket()
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(0)
        es.callback(blackhole.close)
        filler = socket.create_connection(blackhole.getsockname(), timeout=2)
        es.callback(filler.close)
        blackhole_url = f"http://127.0.0.1:{blackhole.getsockname()[1]}"
        refused_url = f"http://127.0.0.1:{_closed_port()}"
        proxies, apps = {}, {}
        for target in CLIENTS:
            timeouts = {
                "connect_timeout": CONNECT_TIMEOUT,
                "read_timeout": READ_TIMEOUT,
                "stream_idle_timeout": IDLE_TIMEOUT,
                "tool_stall_timeout": TOOL_TIMEOUT,
                # Each fault's own ending is checked, not the routing policy's retries
                # and continuations (tests/routing/), which would only add their waits.
                "max_retries": 0,
                "continuation": "off",
            }
            routes = [
                Route("refused*", Upstream(target, _base(refused_url, target), "k", **timeouts)),  # type: ignore[arg-type]
                Route(
                    "connect_timeout*",
                    Upstream(target, _base(blackhole_url, target), "k", **timeouts),
                ),  # type: ignore[arg-type]
                Route("*", Upstream(target, _base(raw.url, target), "k", **timeouts)),  # type: ignore[arg-type]
            ]
            # "default": no transport option, as a user mounts it (the lean pool).
            options = {"lean_http": False} if request.param == "httpx" else {}
            app = ProxaiMiddleware(_inner, routes=routes, **options)
            apps[target] = app
            proxies[target] = es.enter_context(LoopServer(app))
        yield Rig(raw, proxies, apps)


# -------------------------------------------------------------------- the matrix


@dataclass(frozen=True)
class Fault:
    name: str
    status: int | None  # the HTTP status before the stream; None: a terminal stream error
    needle: str  # in the error message (case-insensitive)
    limit: float  # the configured timeout that decides it (0: at once)
    stream_status: int | None = -1  # for stream requests, when it differs (-1: same)
    passthrough: bool = False  # meaningful for pass-through too


FAULTS = [
    Fault("refused", 502, "unreachable", 0, passthrough=True),
    Fault("connect_timeout", 504, "timed out", CONNECT_TIMEOUT, passthrough=True),
    Fault("read_timeout", 504, "timed out", READ_TIMEOUT, passthrough=True),
    Fault("stall_mid", 504, "stopped sending", READ_TIMEOUT, None, passthrough=True),
    Fault("stall_tool", 504, "stopped sending", READ_TIMEOUT, None),
    Fault("error_json_400", 400, "upstream says no 400", 0, passthrough=True),
    Fault("error_json_401", 401, "upstream says no 401", 0),
    Fault("error_json_429", 429, "upstream says no 429", 0),
    Fault("error_json_500", 500, "upstream says no 500", 0, passthrough=True),
    Fault("error_json_529", 529, "upstream says no 529", 0, passthrough=True),
    Fault("error_html_503", 503, "service unavailable", 0),
    Fault("error_text_502", 502, "plain text", 0),
    Fault("drop_mid", 502, "", 0, None, passthrough=True),
    Fault("malformed", 502, "", 0, None),
    Fault("no_terminal", 502, "", 0, None),
]
STREAM_NEEDLE = {
    "stall_mid": f"sent nothing for {IDLE_TIMEOUT:g}s mid-stream",
    "stall_tool": "in the middle of tool-call arguments",
}
STREAM_LIMIT = {"stall_mid": IDLE_TIMEOUT, "stall_tool": TOOL_TIMEOUT}


@dataclass(frozen=True)
class Case:
    fault: Fault
    client: str
    target: str
    stream: bool

    @property
    def id(self) -> str:
        return (
            f"{self.fault.name}:{self.client}->{self.target}:{'stream' if self.stream else 'json'}"
        )


def _cases() -> list[Case]:
    out = []
    for fault in FAULTS:
        for client in CLIENTS:
            for target in CLIENTS:
                if client == target and not fault.passthrough:
                    continue
                if target == GEMINI and fault.name == "stall_tool":
                    continue  # Gemini sends each call whole: no half-sent arguments
                for stream in (False, True):
                    if client == target and not stream and fault.name in ("stall_mid", "drop_mid"):
                        continue  # pass-through JSON: the status went out with the headers
                    out.append(Case(fault, client, target, stream))
    return out


CASES = _cases()


def request_body(client: str, model: str, stream: bool) -> dict[str, Any]:
    tool_params = {"type": "object", "properties": {"name": {"type": "string"}}}
    if client == CHAT:
        return {
            "model": model,
            "stream": stream,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [
                {"type": "function", "function": {"name": "get_secret", "parameters": tool_params}}
            ],
        }
    if client == RESPONSES:
        return {
            "model": model,
            "stream": stream,
            "input": "hi",
            "tools": [{"type": "function", "name": "get_secret", "parameters": tool_params}],
        }
    if client == GEMINI:  # the model and the stream go in the URL (``client_path``)
        declaration = {"name": "get_secret", "parametersJsonSchema": tool_params}
        return {
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": [{"functionDeclarations": [declaration]}],
        }
    return {
        "model": model,
        "stream": stream,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "get_secret", "input_schema": tool_params}],
    }


def terminal_error(client: str, body: bytes) -> str:
    """The message of the client protocol's terminal error that ends ``body``."""
    if client == ANTHROPIC:
        a = validate_anthropic_stream(body)
        assert a.error is not None, "no event: error"
        return str(a.error["message"])
    if client == CHAT:
        c = validate_chat_stream(body)
        assert c.error is not None, "no error chunk"
        assert body.endswith(b"data: [DONE]\n\n")
        return str(c.error["message"])
    if client == GEMINI:
        g = validate_gemini_stream(body)
        assert g.error is not None, "no error frame"
        return str(g.error["message"])
    r = validate_responses_stream(body)
    assert r.error is not None, "no error event"
    assert r.response is not None and r.response["status"] == "failed", "no response.failed"
    return str(r.error["message"])


def passthrough_terminal_error(client: str, body: bytes) -> str:
    """Pass-through forwards the upstream's frames as they came (the strict validators
    judge the upstream, not us); what the proxy owes is the terminal error at the end."""
    frames = [f for f in re.split(rb"\r?\n\r?\n", body) if f.strip()]
    fields = [
        dict(line.split(": ", 1) for line in f.decode().splitlines() if ": " in line)
        for f in frames
    ]
    if client == CHAT:
        assert fields[-1].get("data") == "[DONE]", f"no [DONE] at the end: {frames[-2:]}"
        return str(json.loads(fields[-2]["data"])["error"]["message"])
    if client == GEMINI:
        return str(json.loads(fields[-1]["data"])["error"]["message"])
    if client == ANTHROPIC:
        assert fields[-1].get("event") == "error", f"no event: error at the end: {frames[-1:]}"
        data = json.loads(fields[-1]["data"])
        assert data["type"] == "error"
        return str(data["error"]["message"])
    assert fields[-1].get("event") == "response.failed", f"no response.failed: {frames[-1:]}"
    assert fields[-2].get("event") == "error", f"no error event: {frames[-2:]}"
    return str(json.loads(fields[-2]["data"])["message"])


async def _run(http: httpx.AsyncClient, rig: Rig, case: Case) -> tuple[Case, str | None, float]:
    base = rig.proxies[case.target].url
    model = f"{case.fault.name}:{case.client}"
    body = request_body(case.client, model, case.stream)
    path = client_path(case.client, model, case.stream)
    t0 = time.monotonic()
    try:
        r = await asyncio.wait_for(http.post(base + path, json=body), 15)
    except Exception as exc:  # a hang or a broken connection
        return case, f"{type(exc).__name__}: {exc}", time.monotonic() - t0
    elapsed = time.monotonic() - t0
    fault = case.fault
    expected = fault.status
    if case.stream and fault.stream_status != -1:
        expected = fault.stream_status
    needle, limit = fault.needle, fault.limit
    try:
        if expected is None:  # after the stream started: the terminal error
            assert r.status_code == 200, f"status {r.status_code}: {r.text[:300]}"
            if case.client == case.target:
                assert r.content.startswith(_frames(TEXT_CAPTURE[case.client])[0])
                message = passthrough_terminal_error(case.client, r.content)
            else:
                message = terminal_error(case.client, r.content)
            needle = STREAM_NEEDLE.get(fault.name, needle)
            limit = STREAM_LIMIT.get(fault.name, limit)
        else:
            assert r.status_code == expected, (
                f"status {r.status_code}, expected {expected}: {r.text[:300]}"
            )
            message = error_message(case.client, r.json())
        assert needle.lower() in message.lower(), f"message {message!r} lacks {needle!r}"
        # Causal, not a time limit: answered before the stalled upstream gives up.
        assert elapsed < HOLD, f"took {elapsed:.2f}s: not answered by the {limit}s timeout"
    except AssertionError as exc:
        return case, str(exc), elapsed
    return case, None, elapsed


def test_fault_matrix_ends_every_case_with_the_client_protocols_error_and_leaves_nothing(
    rig: Rig,
) -> None:
    async def main() -> list[tuple[Case, str | None, float]]:
        limits = httpx.Limits(max_connections=500, max_keepalive_connections=0)
        # Many cases in flight, but not all: a case's time is then its own exchange's,
        # not a queue's behind 400 others on a busy two-core machine.
        in_flight = asyncio.Semaphore(64)

        async def bounded(case: Case) -> tuple[Case, str | None, float]:
            async with in_flight:
                return await _run(http, rig, case)

        async with httpx.AsyncClient(timeout=15, limits=limits) as http:
            return await asyncio.gather(*(bounded(c) for c in CASES))

    t0 = time.monotonic()
    with quiet():
        results = asyncio.run(main())
    wall = time.monotonic() - t0
    failures = [f"{c.id}: {p}" for c, p, _ in results if p]
    slowest = max(results, key=lambda x: x[2])
    summary = (
        f"{len(CASES)} fault cases ({len(FAULTS)} faults) in {wall:.2f}s, "
        f"slowest {slowest[0].id} {slowest[2]:.2f}s, failures {len(failures)}"
    )
    print(summary)
    assert not failures, summary + "\n" + "\n".join(failures)
    assert_nothing_left_behind(rig)


def _pool_state(app: ProxaiMiddleware) -> tuple[int, int, int]:
    """(connections, active connections, requests in flight or queued) of the pool."""
    if app.lean is not None:
        return app.lean.idle + app.lean.in_flight, app.lean.in_flight, 0
    pool = app.http.client._transport._pool  # type: ignore[attr-defined]
    conns = list(pool.connections)
    active = [c for c in conns if not (c.is_idle() or c.is_closed())]
    return len(conns), len(active), len(pool._requests)


def _foreign(tasks: list[asyncio.Task[Any]]) -> list[str]:
    """Tasks that are not the uvicorn server's own main task."""
    out = []
    for t in tasks:
        coro = t.get_coro()
        name = getattr(coro, "__qualname__", repr(coro))
        if name != "Server.serve":
            out.append(name)
    return out


def assert_nothing_left_behind(rig: Rig) -> None:
    deadline = time.monotonic() + 3
    while True:
        leftovers = {t: _foreign(s.tasks()) for t, s in rig.proxies.items()}
        pools = {t: s.call(_async(_pool_state, rig.apps[t])) for t, s in rig.proxies.items()}
        upstream_open = rig.raw.open_connections
        clean = (
            not any(leftovers.values())
            and all(active == 0 and queued == 0 for _, active, queued in pools.values())
            and upstream_open == 0
        )
        if clean or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert clean, (
        f"left behind: tasks {leftovers}, pools {pools}, upstream connections {upstream_open}"
    )


async def _async(fn: Any, *args: Any) -> Any:
    return fn(*args)


# ------------------------------------------------------------ client disconnect


def _raw_request(url: str, path: str, body: bytes) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(head + body)
    return sock


PAIRS = [(c, u) for c in CLIENTS for u in CLIENTS]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_client_disconnect_closes_the_upstream_request_while_it_is_still_open(
    rig: Rig, stream: bool
) -> None:
    with quiet():
        _disconnect_latencies(rig, stream)


def _disconnect_latencies(rig: Rig, stream: bool) -> None:
    latencies: dict[str, float] = {}
    for client, target in PAIRS:
        seen = len(rig.raw.conns)
        body = json.dumps(request_body(client, f"hold:{client}", stream)).encode()
        path = client_path(client, f"hold:{client}", stream)
        sock = _raw_request(rig.proxies[target].url, path, body)
        try:
            if stream:
                # Wait for the translated stream to start flowing to the client.
                data = b""
                while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) == 0:
                    chunk = sock.recv(65536)
                    assert chunk, f"{client}->{target}: proxy closed before streaming"
                    data += chunk
                assert data.startswith(b"HTTP/1.1 200"), data[:200]
            else:
                deadline = time.monotonic() + 5
                while len(rig.raw.conns) == seen:  # until the upstream has the request
                    assert time.monotonic() < deadline, "the upstream never got the request"
                    time.sleep(0.002)
            conn = rig.raw.conns[seen]
            time.sleep(0.05)  # the proxy is now waiting on the upstream
        finally:
            closed = time.monotonic()
            sock.close()
        deadline = time.monotonic() + 5
        while conn.closed_at is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert conn.closed_at is not None, f"{client}->{target}: upstream request never closed"
        latencies[f"{client}->{target}"] = conn.closed_at - closed
    worst = max(latencies, key=lambda k: latencies[k])
    summary = (
        f"disconnect ({'stream' if stream else 'json'}): {len(latencies)} pairs, "
        f"max {latencies[worst] * 1000:.1f} ms ({worst}), "
        f"mean {sum(latencies.values()) / len(latencies) * 1000:.1f} ms"
    )
    print(summary)
    # Every upstream request was closed by the proxy while the upstream held it open
    # (``closed_at`` is only set by a peer's close within the hold): causal, not timed.
    assert len(latencies) == len(PAIRS), summary
