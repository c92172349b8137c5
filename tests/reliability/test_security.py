"""Secrets, headers, the upstream URL and the request limits.

- The upstream key never appears in logs (the ``proxai_asgi`` logger at DEBUG, uvicorn's
  loggers and httpx's, tracebacks included), in any response body or in any response
  header, across successes, upstream errors, broken streams and refused connections in
  all nine pairs -- also when the upstream quotes the key back in an error.
- With an upstream key configured, the client's credential headers (authorization,
  x-api-key, api-key, cookie, proxy-authorization) never reach the upstream.
- Hop-by-hop and proxy headers are stripped both ways, including the headers a
  ``Connection`` header names; checked at the ASGI boundary, before the server in front
  adds its own framing.
- The upstream URL comes only from configuration: path tricks, absolute-form targets,
  Host / X-Forwarded-Host / Forwarded headers and body fields such as ``base_url`` never
  send a request anywhere else, nor to another path.
- The size limit (413) and the JSON nesting limit (400) hold before any upstream work,
  for pass-through too; an announced oversized body is refused without being read.
- Past ``max_concurrency`` a request queues, then gets a 429 in its own protocol's shape.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.checks import DEFAULT_MAX_JSON_DEPTH
from tests.helpers.captures import path_of
from tests.helpers.servers import reply_from_capture

from ._raw import Conn, LoopServer, RawServer
from ._shapes import error_message
from .corpus import ANTHROPIC, CHAT, CLIENTS, GEMINI, PATH, PROTOCOLS, RESPONSES

KEY = "sk-upstream-S3CRET-4c1d9e77f0"
CLIENT_SECRET = "client-S3CRET-b2a0"
PAIRS = [(c, u) for c in PROTOCOLS for u in PROTOCOLS]
UPSTREAM_OF_PATH = {
    "/v1/chat/completions": CHAT,
    "/v1/responses": RESPONSES,
    "/v1/messages": ANTHROPIC,
}
JSON_CAPTURE = {
    CHAT: "chat_json_text_basic",
    RESPONSES: "responses_json_text_basic",
    ANTHROPIC: "anthropic_json_text_basic",
    GEMINI: "gemini_json_text_basic",
}
SSE_CAPTURE = {
    CHAT: "chat_sse_text_basic_include_usage",
    RESPONSES: "responses_sse_text_basic",
    ANTHROPIC: "anthropic_sse_text_basic",
    GEMINI: "gemini_sse_thinking",
}
# The pairs with Gemini on one side (the tests over ``PAIRS`` cover the others).
GEMINI_PAIRS = [(c, u) for c in CLIENTS for u in CLIENTS if GEMINI in (c, u)]


def client_path(client: str, model: str, stream: bool) -> str:
    """Where a client posts: a Gemini client names the model and the stream in it."""
    if client != GEMINI:
        return PATH[client]
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/v1beta/models/{model}:{method}"


@pytest.fixture(autouse=True)
def _recordings() -> None:
    """The raw upstream answers with recorded traffic: read it in the test, so a
    checkout without the recordings skips here instead of failing in the server."""
    for name in (*JSON_CAPTURE.values(), *SSE_CAPTURE.values()):
        path_of(name)


HOP_RESPONSE_HEADERS = [
    ("Keep-Alive", "timeout=5, max=100"),
    ("Proxy-Authenticate", 'Basic realm="upstream"'),
    ("Proxy-Connection", "keep-alive"),
    ("Trailer", "X-Checksum"),
    ("Upgrade", "h2c"),
    ("Via", "1.1 upstream-lb"),
    ("X-Upstream-Hop", "named-by-connection"),
]
HOP_NAMES = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-connection",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "via",
    "x-upstream-hop",
}


def _credential(conn: Conn) -> str:
    h = conn.request.headers
    return (
        h.get("x-api-key")
        or h.get("x-goog-api-key")
        or h.get("authorization", "").removeprefix("Bearer ")
    )


async def upstream(conn: Conn) -> None:
    """Answers by the request's model: ``ok``, ``echo_key`` (an error quoting the
    credential it got), ``stream_echo_key`` (a stream whose error event quotes it),
    ``html500``, ``hop`` (hop-by-hop response headers)."""
    path = conn.request.target.split("?")[0]
    body = conn.request.json()
    if path.startswith("/v1beta/models/"):  # Gemini: the model and the stream in the URL
        protocol = GEMINI
        model, _, method = path.removeprefix("/v1beta/models/").rpartition(":")
        stream = method == "streamGenerateContent"
    else:
        protocol = UPSTREAM_OF_PATH[path]
        model = str(body.get("model", ""))
        stream = bool(body.get("stream"))
    if model == "echo_key":
        msg = f"Incorrect API key provided: {_credential(conn)}"
        if protocol == GEMINI:
            err: dict[str, Any] = {
                "error": {"code": 401, "message": msg, "status": "UNAUTHENTICATED"}
            }
        elif protocol == ANTHROPIC:
            err = {"type": "error", "error": {"type": "authentication_error", "message": msg}}
        else:
            err = {
                "error": {
                    "message": msg,
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            }
        await conn.json_reply(401, json.dumps(err).encode())
        return
    if model == "html500":
        await conn.json_reply(
            500, f"<html>proxy error for key {_credential(conn)}</html>".encode(), "text/html"
        )
        return
    headers: list[tuple[str, str]] = []
    connection = "close"
    if model == "hop":
        headers, connection = HOP_RESPONSE_HEADERS, "close, X-Upstream-Hop"
    if stream:
        frames = reply_from_capture(SSE_CAPTURE[protocol]).chunks
        if model == "stream_echo_key":
            msg = f"key {_credential(conn)} was revoked"
            if protocol == GEMINI:
                error = {"error": {"code": 500, "message": msg, "status": "INTERNAL"}}
                bad = b"data: " + json.dumps(error).encode() + b"\r\n\r\n"
            elif protocol == CHAT:
                bad = (
                    b"data: "
                    + json.dumps(
                        {
                            "error": {
                                "message": msg,
                                "type": "server_error",
                                "param": None,
                                "code": None,
                            }
                        }
                    ).encode()
                    + b"\n\n"
                )
            elif protocol == RESPONSES:
                bad = (
                    b"event: error\ndata: "
                    + json.dumps(
                        {
                            "type": "error",
                            "sequence_number": 3,
                            "code": "server_error",
                            "message": msg,
                            "param": None,
                        }
                    ).encode()
                    + b"\n\n"
                )
            else:
                bad = (
                    b"event: error\ndata: "
                    + json.dumps(
                        {"type": "error", "error": {"type": "api_error", "message": msg}}
                    ).encode()
                    + b"\n\n"
                )
            frames = [*frames[:3], bad]
        await conn.head(
            200,
            [("Content-Type", "text/event-stream"), *headers],
            chunked=True,
            connection=connection,
        )
        for f in frames:
            await conn.chunk(f)
        await conn.end_chunks()
        return
    whole = reply_from_capture(JSON_CAPTURE[protocol]).chunks[0]
    await conn.head(
        200,
        [("Content-Type", "application/json"), ("Content-Length", str(len(whole))), *headers],
        chunked=False,
        connection=connection,
    )
    await conn.raw(whole)


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self._lock2 = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        text = self.format(record)
        with self._lock2:
            self.lines.append(text)


LOGGERS = [
    "proxai_asgi",
    "uvicorn",
    "uvicorn.error",
    "uvicorn.access",
    "uvicorn.asgi",
    "httpx",
    "httpcore",
]


class Recorder:
    """Wraps the proxy app to record the response headers it sends (the ASGI boundary)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.starts: list[list[tuple[bytes, bytes]]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def recording(message: Any) -> None:
            if message["type"] == "http.response.start":
                self.starts.append(list(message.get("headers", [])))
            await send(message)

        await self.app(scope, receive, recording)


@dataclass
class Rig:
    good: RawServer
    evil: RawServer
    proxies: dict[str, LoopServer]  # by upstream protocol
    recorders: dict[str, Recorder]
    refused: dict[str, str]  # proxies whose upstream refuses connections
    logs: Capture


async def _inner(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"inner app"})


def _base(url: str, protocol: str) -> str:
    return url + "/v1" if protocol in (CHAT, RESPONSES) else url


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    capture = Capture()
    saved = {}
    for name in LOGGERS:
        lg = logging.getLogger(name)
        saved[name] = lg.level
        lg.setLevel(logging.DEBUG)
        lg.addHandler(capture)
    try:
        with ExitStack() as es:
            good = es.enter_context(RawServer(upstream).running())
            evil = es.enter_context(RawServer(upstream).running())
            proxies, recorders, refused = {}, {}, {}
            for target in CLIENTS:
                # No retries: each failure's answer is what is checked (tests/routing/
                # checks retries, and that no retry's log line holds a key).
                up = Upstream(target, _base(good.url, target), KEY, max_retries=0)  # type: ignore[arg-type]
                rec = Recorder(ProxaiMiddleware(_inner, upstream=up, max_body_size=64 * 1024))
                recorders[target] = rec
                proxies[target] = es.enter_context(
                    LoopServer(rec, log_level="debug", access_log=True, log_config=None)
                )
                closed = _base(f"http://127.0.0.1:{_closed_port()}", target)
                dead = Upstream(target, closed, KEY, max_retries=0)  # type: ignore[arg-type]
                refused[target] = es.enter_context(
                    LoopServer(
                        ProxaiMiddleware(_inner, upstream=dead), log_level="debug", log_config=None
                    )
                ).url
            yield Rig(good, evil, proxies, recorders, refused, capture)
    finally:
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(capture)
            logging.getLogger(name).setLevel(saved[name])


def body_for(client: str, model: str, stream: bool, **extra: Any) -> dict[str, Any]:
    if client == GEMINI:  # the model and the stream go in the URL (``client_path``)
        return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], **extra}
    if client == CHAT:
        b: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    elif client == RESPONSES:
        b = {"model": model, "input": "hi"}
    else:
        b = {"model": model, "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        b["stream"] = True
    b.update(extra)
    return b


CLIENT_CREDENTIALS = {
    "authorization": f"Bearer {CLIENT_SECRET}",
    "x-api-key": CLIENT_SECRET,
    "api-key": CLIENT_SECRET,
    "x-goog-api-key": CLIENT_SECRET,
    "cookie": f"session={CLIENT_SECRET}",
    "proxy-authorization": f"Basic {CLIENT_SECRET}",
}


# ------------------------------------------------------------------------ secrets


@pytest.mark.parametrize("pairs", [PAIRS, GEMINI_PAIRS], ids=["three", "with-gemini"])
def test_the_upstream_key_never_reaches_logs_bodies_or_headers(
    rig: Rig, pairs: list[tuple[str, str]]
) -> None:
    seen_before = len(rig.good.requests)
    exchanges = 0
    exposed: list[str] = []
    with httpx.Client(timeout=10) as http:
        for client, target in pairs:
            for model in ("ok", "echo_key", "stream_echo_key", "html500", "bad_request"):
                for stream in (False, True):
                    body: Any = body_for(client, model, stream)
                    if model == "bad_request":
                        body = {"model": "m", "messages": "not a list", "input": 1, "contents": 1}
                    r = http.post(
                        rig.proxies[target].url + client_path(client, model, stream),
                        json=body,
                        headers=CLIENT_CREDENTIALS,
                    )
                    exchanges += 1
                    visible = r.content.decode("latin-1") + repr(r.headers.multi_items())
                    if KEY in visible:
                        exposed.append(
                            f"{client}->{target} {model} stream={stream}: {r.status_code}"
                        )
            path = client_path(client, "ok", False)
            r = http.post(rig.refused[target] + path, json=body_for(client, "ok", False))
            exchanges += 1
            assert r.status_code == 502
            if KEY in r.content.decode("latin-1") + repr(r.headers.multi_items()):
                exposed.append(f"{client}->{target} refused")
    # The upstream did get the key, so the test had something to leak.
    got = [_key_of(req.headers) for req in rig.good.requests[seen_before:]]
    assert got and all(k == KEY for k in got)
    logs = "\n".join(rig.logs.lines)
    assert len(rig.logs.lines) > exchanges  # the access log and the exchange lines were captured
    assert KEY not in logs, [line for line in rig.logs.lines if KEY in line][:3]
    assert not exposed, (
        f"the upstream key reached the client in {len(exposed)} of {exchanges} exchanges: {exposed}"
    )


def _key_of(headers: dict[str, str]) -> str:
    return (
        headers.get("x-api-key")
        or headers.get("x-goog-api-key")
        or headers.get("authorization", "").removeprefix("Bearer ")
    )


def test_client_credentials_never_reach_an_upstream_that_has_its_own_key(rig: Rig) -> None:
    start = len(rig.good.requests)
    with httpx.Client(timeout=10) as http:
        for client, target in PAIRS:
            for stream in (False, True):
                r = http.post(
                    rig.proxies[target].url + PATH[client],
                    json=body_for(client, "ok", stream),
                    headers=CLIENT_CREDENTIALS,
                )
                assert r.status_code == 200, r.text
    reqs = rig.good.requests[start:]
    assert len(reqs) == 2 * len(PAIRS)
    for req in reqs:
        protocol = UPSTREAM_OF_PATH[req.target]
        leaked = {k: v for k, v in req.headers.items() if CLIENT_SECRET in v}
        assert not leaked, f"client credentials reached the {protocol} upstream: {leaked}"
        assert "cookie" not in req.headers and "proxy-authorization" not in req.headers
        if protocol == ANTHROPIC:
            assert req.headers["x-api-key"] == KEY and "authorization" not in req.headers
        else:
            assert (
                req.headers["authorization"] == f"Bearer {KEY}" and "x-api-key" not in req.headers
            )
        assert "api-key" not in req.headers


# ---------------------------------------------------------------------- hop-by-hop


def _send_raw(url: str, head: str, body: bytes = b"") -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode("latin-1") + body)  # no half-close: that reads as leaving
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out


def test_hop_by_hop_and_proxy_headers_are_stripped_toward_the_upstream(rig: Rig) -> None:
    start = len(rig.good.requests)
    for client, target in PAIRS:
        body = json.dumps(body_for(client, "ok", False)).encode()
        head = (
            f"POST {PATH[client]} HTTP/1.1\r\nHost: proxy.example\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close, X-Client-Hop\r\n"
            "X-Client-Hop: hop-value\r\n"
            "Keep-Alive: timeout=5\r\n"
            "TE: trailers\r\n"
            "Trailer: X-Checksum\r\n"
            "Proxy-Connection: keep-alive\r\n"
            "Proxy-Authorization: Basic cHJveHk6c2VjcmV0\r\n"
            "Forwarded: for=10.0.0.1;host=evil.example\r\n"
            "Via: 1.1 client-proxy\r\n"
            "X-Forwarded-For: 10.0.0.1\r\n"
            "X-Forwarded-Host: evil.example\r\n"
            "X-Forwarded-Proto: https\r\n"
            "X-Forwarded-Port: 443\r\n"
            "X-Real-IP: 10.0.0.1\r\n"
            "\r\n"
        )
        assert _send_raw(rig.proxies[target].url, head, body).startswith(b"HTTP/1.1 200")
    reqs = rig.good.requests[start:]
    assert len(reqs) == len(PAIRS)
    banned = {
        "keep-alive", "te", "trailer", "proxy-connection", "proxy-authorization", "forwarded",
        "via", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-port",
        "x-real-ip", "x-client-hop", "upgrade",
    }  # fmt: skip
    for req in reqs:
        leaked = banned & set(req.headers)
        assert not leaked, f"{req.target}: {leaked} reached the upstream"
        assert req.headers["host"] == rig.good.url.removeprefix("http://")
        assert "close, x-client-hop" not in req.headers.get("connection", "").lower()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_hop_by_hop_response_headers_do_not_reach_the_client(rig: Rig, stream: bool) -> None:
    with httpx.Client(timeout=10) as http:
        for client, target in PAIRS:
            rec = rig.recorders[target]
            n = len(rec.starts)
            r = http.post(
                rig.proxies[target].url + PATH[client], json=body_for(client, "hop", stream)
            )
            assert r.status_code == 200, r.text
            sent = {k.decode().lower() for k, _ in rec.starts[n]}
            leaked = HOP_NAMES & sent
            assert not leaked, f"{client}->{target}: the middleware sent {leaked} to the client"
            # And over the wire: nothing of the upstream's hop headers either.
            for name in (
                "keep-alive",
                "proxy-authenticate",
                "proxy-connection",
                "x-upstream-hop",
                "via",
                "trailer",
                "upgrade",
            ):
                assert name not in r.headers, f"{client}->{target}: {name} reached the client"


# ------------------------------------------------------------------ upstream URL


def test_the_request_cannot_choose_the_upstream_url(rig: Rig) -> None:
    evil_host = rig.evil.url.removeprefix("http://")
    start = len(rig.good.requests)
    statuses: dict[str, int] = {}
    for client, target in PAIRS:
        path = PATH[client]
        ok = json.dumps(body_for(client, "ok", False)).encode()
        steered = json.dumps(
            body_for(
                client,
                "ok",
                False,
                base_url=rig.evil.url,
                api_base=rig.evil.url,
                baseURL=rig.evil.url,
                url=rig.evil.url + path,
                endpoint=rig.evil.url + path,
                upstream=rig.evil.url,
            )
        ).encode()
        urlish_model = json.dumps(body_for(client, f"{rig.evil.url}/v1/x", False)).encode()
        tricks: list[tuple[str, str, bytes]] = [
            ("dotdot", f"POST {path}/../../evil HTTP/1.1\r\nHost: x\r\n", ok),
            ("dotdot-sibling", f"POST {path}/../responses HTTP/1.1\r\nHost: x\r\n", ok),
            ("encoded-dotdot", f"POST /v1/%2e%2e/v1/evil{path} HTTP/1.1\r\nHost: x\r\n", ok),
            ("double-slash", f"POST //{evil_host}{path} HTTP/1.1\r\nHost: x\r\n", ok),
            ("absolute-form", f"POST {rig.evil.url}{path} HTTP/1.1\r\nHost: {evil_host}\r\n", ok),
            (
                "query",
                f"POST {path}?base_url={rig.evil.url}&url={rig.evil.url} HTTP/1.1\r\nHost: x\r\n",
                ok,
            ),
            ("host", f"POST {path} HTTP/1.1\r\nHost: {evil_host}\r\n", ok),
            (
                "forwarding-headers",
                f"POST {path} HTTP/1.1\r\nHost: x\r\nX-Forwarded-Host: {evil_host}\r\n"
                f"Forwarded: host={evil_host};proto=http\r\nX-Original-URL: /evil\r\n"
                f"X-Rewrite-URL: /evil\r\nX-Forwarded-Prefix: //{evil_host}\r\n",
                ok,
            ),
            ("body-fields", f"POST {path} HTTP/1.1\r\nHost: x\r\n", steered),
            ("url-as-model", f"POST {path} HTTP/1.1\r\nHost: x\r\n", urlish_model),
        ]
        for name, head, body in tricks:
            head += (
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            )
            reply = _send_raw(rig.proxies[target].url, head, body)
            status = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1") else 0
            statuses[f"{name}:{client}->{target}"] = status
            assert status < 500, f"{name} {client}->{target}: {reply[:300]!r}"
    assert rig.evil.requests == [], (
        f"the request steered the proxy to another host: {rig.evil.requests}"
    )
    configured = {"/v1/chat/completions", "/v1/responses", "/v1/messages"}
    for req in rig.good.requests[start:]:
        assert req.target in configured, f"the request steered the upstream path: {req.target!r}"
        assert req.headers["host"] == rig.good.url.removeprefix("http://")
    served = sum(1 for s in statuses.values() if s == 200)
    print(sorted({k.split(":")[0] + "=" + str(v) for k, v in statuses.items()}))
    assert served > 0  # the tricks that matched an LLM path were served, by the configured upstream


# ------------------------------------------------------------------------ limits


def _nested(client: str, depth: int) -> bytes:
    """A valid request whose deepest value is ``depth`` levels down (the body is 1)."""
    body = json.dumps(body_for(client, "ok", False)).encode()
    inner = b"[" * (depth - 1) + b"]" * (depth - 1)
    return body[:-1] + b', "x_nested": ' + inner + b"}"


@pytest.mark.parametrize(("client", "target"), PAIRS, ids=[f"{c}->{u}" for c, u in PAIRS])
def test_size_and_nesting_limits_hold_before_any_upstream_work(
    rig: Rig, client: str, target: str
) -> None:
    url = rig.proxies[target].url + PATH[client]
    start = len(rig.good.requests)
    limit = 64 * 1024
    with httpx.Client(timeout=10) as http:
        too_deep = http.post(url, content=_nested(client, DEFAULT_MAX_JSON_DEPTH + 1))
        assert too_deep.status_code == 400
        assert "nested deeper than" in error_message(client, too_deep.json())
        big = json.dumps(body_for(client, "ok", False, padding="x" * limit)).encode()
        r = http.post(url, content=big)
        assert r.status_code == 413
        error_message(client, r.json())
        r = http.post(url, content=iter([big[:40_000], big[40_000:]]))  # chunked, no length
        assert r.status_code == 413
        assert rig.good.requests[start:] == []
        # The deepest body allowed goes through (to the upstream, translated or not).
        ok = http.post(url, content=_nested(client, DEFAULT_MAX_JSON_DEPTH))
        assert ok.status_code == 200, ok.text
        assert len(rig.good.requests) == start + 1
    # An announced oversized body is refused before a byte of it is read.
    host, port = rig.proxies[target].url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        # Not a byte of the body is sent: an answer at all shows none was waited for.
        sock.sendall(
            f"POST {PATH[client]} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {10**9}\r\n\r\n".encode()
        )
        reply = sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 413"), reply[:200]


def test_past_the_concurrency_limit_requests_queue_then_get_a_429_in_their_own_shape() -> None:
    release = threading.Event()

    async def slow(conn: Conn) -> None:
        while not release.is_set():
            await asyncio.sleep(0.01)
        await conn.json_reply(200, reply_from_capture("chat_json_text_basic").chunks[0])

    with RawServer(slow).running() as up:
        app = ProxaiMiddleware(
            _inner,
            upstream=Upstream("openai_chat_completions", up.url + "/v1", KEY),
            max_concurrency=1,
            queue_timeout=0.3,
        )
        with LoopServer(app) as proxy, httpx.Client(timeout=10) as http:
            holder = threading.Thread(
                target=http.post,
                args=(proxy.url + "/v1/chat/completions",),
                kwargs={"json": body_for(CHAT, "ok", False)},
            )
            holder.start()
            deadline = time.monotonic() + 5
            while not up.requests and time.monotonic() < deadline:
                time.sleep(0.005)
            for client in PROTOCOLS:
                t0 = time.monotonic()
                r = httpx.post(
                    proxy.url + PATH[client], json=body_for(client, "ok", False), timeout=5
                )
                waited = time.monotonic() - t0
                assert r.status_code == 429, r.text
                assert r.headers["retry-after"] == "1"
                assert "concurrency limit" in error_message(client, r.json())
                assert 0.25 < waited < 5, waited  # it queued for queue_timeout first
            release.set()
            holder.join(10)
        assert len(up.requests) == 1
