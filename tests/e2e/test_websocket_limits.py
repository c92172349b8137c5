"""What a Responses WebSocket may hold: idle time, open connections, kept history.

- A connection idle for ``websocket_idle_timeout`` is closed with 1000 ("idle timeout").
- Past ``websocket_max_connections`` open connections a handshake gets a 503 with
  ``retry-after`` (servers without the denial extension: opened, closed with 1013).
- What a connection keeps between turns (its last response's input and output, to
  continue it) is about the bytes the client sent, measured with tracemalloc, and at
  most ``websocket_max_history`` bytes: past that, continuing it is a 413 frame.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosedOK, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.server.cli import build_app, build_parser
from proxai_asgi.server.config import ConfigError
from proxai_asgi.server.demo import DemoUpstream
from proxai_asgi.transport.upstream import Message
from tests.helpers.demo_proxy import CHAT, middleware
from tests.helpers.servers import serve


@contextmanager
def proxy(transport: str, **options: Any) -> Iterator[str]:
    """The middleware before the demo model (over HTTP or as the wrapped app); yields
    the socket's URL."""
    with ExitStack() as stack:
        app = middleware(DemoUpstream(), transport, stack, **options)
        url = stack.enter_context(serve(app, websockets=True))
        yield url.replace("http://", "ws://") + "/v1/responses"


def create(**fields: Any) -> str:
    return json.dumps({"type": "response.create", "model": "m"} | fields)


def answer(ws: ClientConnection) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    for _ in range(1000):
        frame = json.loads(ws.recv(timeout=30))
        frames.append(frame)
        if frame["type"] in ("response.completed", "response.failed", "error"):
            return frames
    raise AssertionError("no terminal frame")


def history(items: int) -> list[dict[str, Any]]:
    """A Codex-like conversation: messages, calls and their outputs."""
    out: list[dict[str, Any]] = []
    for i in range(items // 3):
        text = {"type": "input_text", "text": f"run step {i}"}
        out.append({"type": "message", "role": "user", "content": [text]})
        args = json.dumps({"cmd": f"ls -la /tmp/{i}"})
        out.append(
            {"type": "function_call", "call_id": f"call_{i}", "name": "sh", "arguments": args}
        )
        out.append({"type": "function_call_output", "call_id": f"call_{i}", "output": f"ok {i}"})
    return out


@pytest.mark.parametrize("transport", ["http", "inner"])
def test_an_idle_websocket_is_closed_after_the_idle_timeout(transport: str) -> None:
    with proxy(transport, websocket_idle_timeout=0.3) as url, connect(url) as ws:
        ws.send(create(input="hi"))  # a generated turn: the timer starts after it
        assert answer(ws)[-1]["type"] == "response.completed"
        t0 = time.monotonic()
        with pytest.raises(ConnectionClosedOK):
            ws.recv(timeout=10)
        assert time.monotonic() - t0 >= 0.25
        assert ws.close_code == 1000 and ws.close_reason == "idle timeout"


def test_an_active_websocket_is_not_closed_for_idleness() -> None:
    with proxy("inner", websocket_idle_timeout=0.4) as url, connect(url) as ws:
        for _ in range(4):  # 0.8 s in all, but never 0.4 s without a frame
            time.sleep(0.2)
            ws.send(create(input="hi", generate=False))
            assert answer(ws)[-1]["type"] == "response.completed"


def test_websockets_past_the_connection_limit_get_a_503() -> None:
    with proxy("inner", websocket_max_connections=2) as url, ExitStack() as stack:
        first = stack.enter_context(connect(url))
        stack.enter_context(connect(url))
        with pytest.raises(InvalidStatus) as info:
            connect(url, open_timeout=10)
        assert info.value.response.status_code == 503
        assert info.value.response.headers["retry-after"] == "1"
        assert json.loads(info.value.response.body)["error"]["code"] == "too_many_connections"
        first.close()
        deadline = time.monotonic() + 10
        while True:  # the server sees the close a moment later
            try:
                with connect(url, open_timeout=10) as ws:
                    ws.send(create(input="hi", generate=False))
                    assert answer(ws)[-1]["type"] == "response.completed"
                break
            except InvalidStatus:
                assert time.monotonic() < deadline
                time.sleep(0.02)


def test_continuing_a_conversation_larger_than_the_history_bound_is_a_413() -> None:
    with proxy("inner", websocket_max_history=4000) as url, connect(url) as ws:
        ws.send(create(input=history(9), generate=False))  # well under 4000 bytes
        small = answer(ws)[-1]["response"]["id"]
        ws.send(create(input="and?", previous_response_id=small))
        assert answer(ws)[-1]["type"] == "response.completed"

        ws.send(create(input=history(90), generate=False))  # over 4000 bytes
        big = answer(ws)[-1]["response"]["id"]
        ws.send(create(input="and?", previous_response_id=big))
        (frame,) = answer(ws)
        assert frame["type"] == "error" and frame["status"] == 413
        assert frame["error"]["code"] == "request_too_large"
        assert "4000 bytes" in frame["error"]["message"]


# ------------------------------------------------------------ bytes held per socket


async def _held_by_an_idle_socket(turns: list[dict[str, Any]]) -> tuple[int, int]:
    """Bytes still allocated once ``turns`` have been answered and the socket is idle,
    and the bytes sent: the middleware driven in-process as a server would (connect,
    frames, wait). A turn with ``previous_response_id: True`` continues the last."""
    app = ProxaiMiddleware(DemoUpstream(), upstream=Upstream.inner_app(CHAT))
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    done: asyncio.Queue[str] = asyncio.Queue()

    async def send(message: Message) -> None:
        event = json.loads(message.get("text") or "{}")
        if event.get("type") == "response.completed":
            done.put_nowait(event["response"]["id"])
        elif event.get("type") == "error":
            done.put_nowait(f"error: {event}")

    scope = {
        "type": "websocket",
        "path": "/v1/responses",
        "raw_path": b"/v1/responses",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8080")],
        "scheme": "ws",
        "server": ("127.0.0.1", 8080),
        "client": ("127.0.0.1", 50000),
        "subprotocols": [],
        "asgi": {"version": "3.0"},
    }
    inbox.put_nowait({"type": "websocket.connect"})
    task = asyncio.create_task(app(scope, inbox.get, send))
    for _ in range(20):
        await asyncio.sleep(0)
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    sent, last = 0, None
    for turn in turns:
        if turn.get("previous_response_id") is True:
            turn = turn | {"previous_response_id": last}
        text = create(**turn)
        sent += len(text.encode())
        inbox.put_nowait({"type": "websocket.receive", "text": text})
        del text
        last = await asyncio.wait_for(done.get(), 60)
        assert last.startswith("resp_"), last
    del turns
    for _ in range(20):
        await asyncio.sleep(0)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    inbox.put_nowait({"type": "websocket.disconnect", "code": 1000})
    await asyncio.wait_for(task, 10)
    return held, sent


def test_an_idle_websocket_holds_about_the_bytes_its_client_sent() -> None:
    """A warm-up with a 1 MB Codex-like history, then a generated turn that continues
    it: the idle socket keeps the conversation (to continue it again), in about the
    bytes sent -- not the decoded items, which took 16 times that."""
    turns = [
        {"input": history(10_500), "generate": False, "store": False},
        {"input": "and?", "previous_response_id": True, "store": False},
    ]
    tracemalloc.start()
    try:
        # Once first: what every connection shares (decoders made on first use, the
        # encoders' reused buffer) is then there before the measured one starts.
        asyncio.run(_held_by_an_idle_socket(list(turns)))
        held, sent = asyncio.run(_held_by_an_idle_socket(turns))
    finally:
        tracemalloc.stop()
    ratio = held / sent
    print(f"an idle socket holds {held} bytes for {sent} sent: {ratio:.2f}x")
    assert sent > 1_000_000
    assert 0.5 < ratio < 1.5, ratio  # the conversation is kept, and compactly


def test_the_websocket_limits_from_toml_and_the_environment(tmp_path: Path) -> None:
    def limits_of(argv: list[str], env: dict[str, str]) -> tuple[Any, ...]:
        app = build_app(build_parser().parse_args(argv), env)[0]
        return app.sockets.idle_timeout, app.sockets.max_connections, app.sockets.max_history

    assert limits_of([], {}) == (300.0, 256, 32 * 1024 * 1024)
    conf = tmp_path / "proxai.toml"
    conf.write_text(
        "[server]\nwebsocket_idle_timeout = 60\nwebsocket_max_connections = 8\n"
        "websocket_max_history = 1000000\n"
    )
    assert limits_of(["--config", str(conf)], {}) == (60.0, 8, 1_000_000)
    env = {"PROXAI_WEBSOCKET_IDLE_TIMEOUT": "0.5", "PROXAI_WEBSOCKET_MAX_CONNECTIONS": "3"}
    assert limits_of(["--config", str(conf)], env) == (0.5, 3, 1_000_000)
    with pytest.raises(ConfigError, match="websocket_max_connections"):
        limits_of([], {"PROXAI_WEBSOCKET_MAX_CONNECTIONS": "0"})
    with pytest.raises(ConfigError, match="not a number"):
        limits_of([], {"PROXAI_WEBSOCKET_IDLE_TIMEOUT": "soon"})
