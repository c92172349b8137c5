"""Admission: a client that never finishes its body holds no concurrency slot.

The concurrency slot (``max_concurrency``) is taken once the body is in and checked;
the body must be in within ``body_timeout`` seconds, else the client gets a 408 in its
own protocol's shape and the connection is closed (the rest of the body is never read).
The stalled clients are raw sockets to uvicorn on 127.0.0.1; the upstream is the demo
model, over HTTP and as the wrapped app.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.server.cli import build_app, build_parser
from proxai_asgi.server.demo import DemoUpstream
from tests.helpers.demo_proxy import CHAT, CLIENTS, body_for, middleware, path_for

from ._raw import LoopServer
from ._shapes import error_message

BODY_TIMEOUT = 1.0


@contextmanager
def _proxy(transport: str, **options: Any) -> Iterator[str]:
    """The middleware (uvicorn with h11, for raw sockets) before the demo model."""
    with ExitStack() as stack:
        app = middleware(DemoUpstream(), transport, stack, **options)
        yield stack.enter_context(LoopServer(app)).url


def _stall(url: str, path: str, body: bytes) -> socket.socket:
    """A client that announces ``body`` and sends half of it, then nothing more."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body[: len(body) // 2])
    return sock


def _reply(sock: socket.socket) -> tuple[bytes, dict[bytes, bytes], bytes]:
    """Status line, headers and body of the answer, read until the server closes."""
    data = b""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        chunk = sock.recv(65536)
        if not chunk:
            break  # closed by the server: what a 408 must end with
        data += chunk
    else:
        raise AssertionError(f"the connection was not closed: {data[:300]!r}")
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.split(b"\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(b":") for x in lines)}
    return status, headers, body


@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("client", CLIENTS)
def test_stalled_bodies_hold_no_concurrency_slot_and_get_a_408(client: str, transport: str) -> None:
    """Two clients send half a body and stall, on a proxy with one slot: a normal
    client is answered at once, and each stalled one gets a 408 in its own protocol's
    shape once ``body_timeout`` has passed, its connection then closed. (Whether the
    request asks for a stream makes no difference: no body, no request.)"""
    path, body = path_for(client, False), json.dumps(body_for(client, False)).encode()
    options = {"max_concurrency": 1, "queue_timeout": 5.0, "body_timeout": BODY_TIMEOUT}
    with _proxy(transport, **options) as url:
        stalled = [_stall(url, path, body) for _ in range(2)]
        t0 = time.monotonic()
        time.sleep(0.1)  # the stalled requests are in the middleware, reading
        r = httpx.post(url + path, content=body, timeout=10)
        answered = time.monotonic() - t0
        assert r.status_code == 200, r.text
        assert answered < BODY_TIMEOUT, answered  # it did not wait for them to time out
        for sock in stalled:
            with sock:
                status, headers, reply = _reply(sock)
            assert status.startswith(b"HTTP/1.1 408"), status
            assert headers[b"connection"] == b"close"
            message = error_message(client, json.loads(reply))
            assert "not received within 1 seconds" in message
        assert time.monotonic() - t0 >= BODY_TIMEOUT * 0.9


def test_a_body_sent_slowly_but_in_time_is_served() -> None:
    """The timeout bounds the whole body, not each read: a body in three parts, the
    last 0.3 s before the deadline, is served."""
    body = json.dumps(body_for(CHAT, False)).encode()
    with _proxy("inner", body_timeout=BODY_TIMEOUT) as url:

        def parts() -> Iterator[bytes]:
            for i in range(3):
                yield body[i * len(body) // 3 : (i + 1) * len(body) // 3]
                if i < 2:
                    time.sleep(0.35)

        r = httpx.post(url + "/v1/chat/completions", content=parts(), timeout=10)
    assert r.status_code == 200, r.text


def test_the_body_timeout_is_set_from_python_toml_and_the_environment(tmp_path: Path) -> None:
    def app_from(argv: list[str], env: dict[str, str]) -> ProxaiMiddleware:
        return build_app(build_parser().parse_args(argv), env)[0]

    assert ProxaiMiddleware(DemoUpstream(), upstream=Upstream.inner_app(CHAT)).body_timeout == 30
    assert app_from([], {}).body_timeout == 30.0
    conf = tmp_path / "proxai.toml"
    conf.write_text("[server]\nbody_timeout = 2.5\n")
    assert app_from(["--config", str(conf)], {}).body_timeout == 2.5
    assert app_from(["--config", str(conf)], {"PROXAI_BODY_TIMEOUT": "7"}).body_timeout == 7.0
