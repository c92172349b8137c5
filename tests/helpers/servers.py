"""Real loopback servers for end-to-end tests: uvicorn on 127.0.0.1, port 0, in a
thread, always stopped. ``httpx.ASGITransport`` buffers whole bodies, so anything
about streaming needs these."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn

from proxai_asgi.transport.upstream import ASGIApp, Receive, Scope, Send

from .captures import load

# uvicorn's server for a test: asyncio with h11, or uvloop with httptools.
Server = Literal["asyncio", "uvloop"]


class StoppableServer(uvicorn.Server):
    """uvicorn's server, stopped at once by ``stop()`` from another thread. uvicorn looks
    at ``should_exit`` every 0.1 s, and the suite starts and stops hundreds of servers:
    waiting out that tick each time was seconds of every run. (A bare future and timer
    per tick, no task: the leak checks count a server loop's tasks.)"""

    _loop: asyncio.AbstractEventLoop | None = None
    _tick: asyncio.Future[None] | None = None

    async def main_loop(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):  # (the Date header, uvicorn's own checks)
            counter = (counter + 1) % 864000
            tick = self._tick = loop.create_future()
            timer = loop.call_later(0.1, _settle, tick)
            await tick
            timer.cancel()

    def stop(self) -> None:
        self.should_exit = True
        loop, tick = self._loop, self._tick
        if loop is not None and tick is not None:
            with contextlib.suppress(RuntimeError):  # its loop has already closed
                loop.call_soon_threadsafe(_settle, tick)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_running: set[StoppableServer] = set()  # what ``serve`` has started and not yet stopped


def stop_all() -> None:
    """Tell every server ``serve`` started to stop, without waiting: each one's
    shutdown (up to 0.1 s while a client's kept-alive connection closes) then runs
    beside the others', and ``serve``'s exit only joins it."""
    for server in list(_running):
        server.stop()


@contextlib.contextmanager
def serve(
    app: ASGIApp,
    *,
    websockets: bool = False,
    tls: tuple[str, str] | None = None,
    close_app: bool = False,
    server: Server = "asyncio",
) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port); yields ``http://127.0.0.1:PORT``.
    ``websockets=True`` serves WebSocket upgrades too (uvicorn's ``websockets``
    implementation, from the ``test`` extra). ``tls=(certfile, keyfile)`` serves
    HTTPS and yields ``https://127.0.0.1:PORT``. ``close_app=True`` awaits
    ``app.aclose()`` on the server's loop once it has stopped, as a lifespan shutdown
    would: a middleware's pooled connections then end cleanly instead of being left
    open on a dead loop (a TLS upstream waits for their close_notify).
    ``server="uvloop"`` serves on uvloop with httptools, what uvicorn picks by itself
    when they are installed; otherwise asyncio with h11, named so that installing them
    changes nothing else."""
    fast = server == "uvloop"
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="off",
        ws="websockets-sansio" if websockets else "none",
        loop="uvloop" if fast else "asyncio",
        http="httptools" if fast else "h11",
        ssl_certfile=tls[0] if tls else None,
        ssl_keyfile=tls[1] if tls else None,
    )
    server = StoppableServer(config)

    async def serve_then_close() -> None:
        await server.serve()
        await app.aclose()  # type: ignore[attr-defined]

    def run_then_close() -> None:
        with asyncio.Runner(loop_factory=_uvloop_factory() if fast else None) as runner:
            runner.run(serve_then_close())

    run = run_then_close if close_app else server.run
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.005)
    port = server.servers[0].sockets[0].getsockname()[1]
    _running.add(server)
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        server.stop()
        thread.join(timeout=10)
        _running.discard(server)


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    import uvloop

    return uvloop.new_event_loop


class UpstreamCrash(Exception):
    """A scripted upstream failing mid-body (its server drops the connection)."""


@dataclass
class Reply:
    status: int
    headers: list[tuple[str, str]]
    chunks: list[bytes]
    delay: float = 0.0  # seconds between chunks
    stall_after: int | None = None  # after this many chunks, go silent for ``stall`` s
    stall: float = 0.0
    crash_after: int | None = None  # after this many chunks, the upstream app raises


def sse_frames(body: bytes) -> list[bytes]:
    """An SSE body cut after every frame, so the upstream streams event by event (frames
    end with a blank line: LF LF, or CRLF CRLF as Gemini writes them)."""
    sep = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    out: list[bytes] = []
    rest = body
    while rest:
        i = rest.find(sep)
        if i < 0:
            out.append(rest)
            break
        out.append(rest[: i + len(sep)])
        rest = rest[i + len(sep) :]
    return out


def reply_from_capture(name: str, delay: float = 0.0) -> Reply:
    rec = load(name)["response"]
    body = rec["body"]
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    ctype = rec.get("headers", {}).get("content-type", "application/json")
    headers = [
        (k, v)
        for k, v in rec.get("headers", {}).items()
        if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")
    ]
    if not any(k.lower() == "content-type" for k, _ in headers):
        headers.append(("content-type", ctype))
    chunks = sse_frames(data) if "event-stream" in ctype else [data]
    return Reply(rec["status"], headers, chunks, delay)


@dataclass
class Seen:
    path: str
    query: bytes
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class FakeUpstream:
    """An ASGI upstream that answers with scripted replies and records requests.

    ``replies`` are used in order (the last one repeats). ``cancelled`` is set when a
    streamed reply was cut short because the proxy went away."""

    replies: list[Reply | Callable[[Seen], Reply]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    cancelled: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)

    def push(self, reply: Reply | Callable[[Seen], Reply]) -> FakeUpstream:
        self.replies.append(reply)
        return self

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        seen = Seen(scope["path"], scope.get("query_string", b""), headers, body)
        self.seen.append(seen)
        script = self.replies[min(len(self.seen), len(self.replies)) - 1]
        reply = script(seen) if callable(script) else script
        raw = [(k.lower().encode(), v.encode()) for k, v in reply.headers]
        await send({"type": "http.response.start", "status": reply.status, "headers": raw})
        disconnected = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            disconnected.set()

        watcher = asyncio.ensure_future(watch())
        try:
            for i, chunk in enumerate(reply.chunks):
                if i == reply.crash_after:
                    raise UpstreamCrash(f"scripted crash after {i} chunks")
                pause = reply.stall if i == reply.stall_after else reply.delay
                if pause:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(disconnected.wait(), pause)
                if disconnected.is_set():
                    self.cancelled.set()
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            self.finished.set()
        except (asyncio.CancelledError, OSError):
            self.cancelled.set()
            raise
        finally:
            watcher.cancel()
