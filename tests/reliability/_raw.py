"""Loopback servers the reliability tests control byte by byte.

``RawServer``: an asyncio TCP server on 127.0.0.1 (port 0) in its own thread that reads
one HTTP/1.1 request per connection and hands it to a scripted handler, which writes
whatever it likes (a partial body, a socket closed mid-chunk, headers no ASGI server
would let through) and can watch for the peer going away.

``LoopServer``: uvicorn serving an app on a loop this module owns, so a test can count
the tasks left on that loop and look inside the app's connection pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import uvicorn

from tests.helpers.servers import StoppableServer

T = TypeVar("T")


@dataclass
class RawRequest:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    received_at: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    request: RawRequest
    closed_at: float | None = None  # when the peer's close was seen

    async def head(
        self,
        status: int,
        headers: list[tuple[str, str]],
        *,
        chunked: bool,
        connection: str = "close",
    ) -> None:
        lines = [f"HTTP/1.1 {status} X"]
        lines += [f"{k}: {v}" for k, v in headers]
        if chunked:
            lines.append("Transfer-Encoding: chunked")
        lines.append(f"Connection: {connection}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.writer.drain()

    async def chunk(self, data: bytes) -> None:
        if data:
            self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await self.writer.drain()

    async def end_chunks(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    async def raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def json_reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        headers = [("Content-Type", ctype), ("Content-Length", str(len(body)))]
        await self.head(status, headers, chunked=False)
        await self.raw(body)

    async def wait_peer_close(self, timeout: float) -> float | None:
        """Block until the peer closes (EOF or reset); returns the time it was seen."""
        try:
            async with asyncio.timeout(timeout):
                while await self.reader.read(65536):
                    pass
        except TimeoutError:
            return None
        except OSError:
            pass
        self.closed_at = time.monotonic()
        return self.closed_at


Handler = Callable[[Conn], Awaitable[None]]


@dataclass
class RawServer:
    handler: Handler
    requests: list[RawRequest] = field(default_factory=list)
    conns: list[Conn] = field(default_factory=list)
    open_connections: int = 0
    port: int = 0
    loop: asyncio.AbstractEventLoop | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open_connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers: dict[str, str] = {}
            for line in lines[1:]:
                if ":" in line:
                    k, _, v = line.partition(":")
                    headers[k.strip().lower()] = v.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            req = RawRequest(method, target, headers, body, time.monotonic())
            self.requests.append(req)
            conn = Conn(reader, writer, req)
            self.conns.append(conn)
            await self.handler(conn)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open_connections -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @contextlib.contextmanager
    def running(self) -> Iterator[RawServer]:
        started = threading.Event()
        stop: asyncio.Event | None = None

        async def main() -> None:
            nonlocal stop
            stop = asyncio.Event()
            self.loop = asyncio.get_running_loop()
            server = await asyncio.start_server(self._serve_one, "127.0.0.1", 0, backlog=1024)
            self.port = server.sockets[0].getsockname()[1]
            started.set()
            async with server:
                await stop.wait()
                server.close()
                # Handlers still running (a stalled script) are cancelled.
                for task in asyncio.all_tasks():
                    if task is not asyncio.current_task():
                        task.cancel()

        thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
        thread.start()
        if not started.wait(10):
            raise RuntimeError("raw server did not start")
        try:
            yield self
        finally:
            assert self.loop is not None and stop is not None
            self.loop.call_soon_threadsafe(stop.set)
            thread.join(timeout=10)


class LoopServer:
    """uvicorn on 127.0.0.1:0 on an event loop owned here (``.loop``), in a thread."""

    def __init__(self, app: Any, **config: Any) -> None:
        self.app = app
        self.config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            lifespan="off",
            ws="none",
            log_level=config.pop("log_level", "warning"),
            http=config.pop("http", "h11"),  # not httptools, which the test extra installs
            **config,
        )
        self.server = StoppableServer(self.config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.url = ""

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.serve())

    def __enter__(self) -> LoopServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.005)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        self.thread.join(timeout=10)
        self.loop.close()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 5) -> T:
        """Run ``coro`` on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks alive on the server's loop (the one asking excluded)."""

        async def snapshot() -> list[asyncio.Task[Any]]:
            me = asyncio.current_task()
            return [t for t in asyncio.all_tasks() if t is not me]

        return self.call(snapshot())
