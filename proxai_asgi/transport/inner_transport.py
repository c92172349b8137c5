"""The wrapped ASGI app as the upstream, in-process: no network hop.

The app runs in a task of its own. What it sends goes into an ``_Inbox`` that the caller
reads like an HTTP body: every message the app sent since the last read comes back at
once, so a burst of sends (a stream's deltas) costs one wake-up of the reader rather than
two task switches per message, which is what a memory object stream costs (it
checkpoints on every send and every receive). Leaving the context cancels the app, which
is how a client disconnect reaches it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio

from ..codec import PathCall
from ..errors import ProxyError
from ..routing import Upstream
from .pumping import beside
from .upstream import ASGIApp, Message, RawHeaders, Scope, UpstreamResponse

logger = logging.getLogger("proxai_asgi")

_CRASH = "proxai.crash"  # our own message: the app raised


class _Inbox:
    """Messages from the app, taken in batches; the app waits once ``limit`` are
    unread (the reader is slower than the app)."""

    __slots__ = ("_items", "_limit", "_readable", "_writable", "closed")

    def __init__(self, limit: int = 64) -> None:
        self._items: deque[Message] = deque()
        self._limit = limit
        self._readable: anyio.Event | None = None
        self._writable: anyio.Event | None = None
        self.closed = False  # the app is done: nothing more will come

    async def put(self, message: Message) -> None:
        while len(self._items) >= self._limit:
            self._writable = writable = anyio.Event()
            await writable.wait()
        self._items.append(message)
        self._wake_reader()

    def close(self) -> None:
        self.closed = True
        self._wake_reader()

    def _wake_reader(self) -> None:
        if self._readable is not None:
            self._readable.set()
            self._readable = None

    async def take(self) -> list[Message]:
        """Everything sent and not yet taken, waiting for one message if there is none;
        [] once the app is done and everything was taken."""
        while not self._items:
            if self.closed:
                return []
            self._readable = readable = anyio.Event()
            await readable.wait()
        batch = list(self._items)
        self._items.clear()
        if self._writable is not None:
            self._writable.set()
            self._writable = None
        return batch


class InnerTransport:
    """The wrapped app as a ``transport.base.Transport`` for one request: the client's
    ``scope`` and the ``call`` it makes are what the app is called with."""

    __slots__ = ("app", "call", "scope")

    def __init__(self, app: ASGIApp, scope: Scope, call: PathCall | None = None) -> None:
        self.app = app
        self.scope = scope
        self.call = call

    def serves(self, upstream: Upstream, url: str | None = None) -> bool:
        return upstream.inner

    def open(
        self,
        upstream: Upstream,
        headers: RawHeaders,
        body: bytes,
        *,
        raw: bool,
        url: str | None = None,
        method: bytes = b"POST",
    ) -> AbstractAsyncContextManager[UpstreamResponse]:
        """``raw`` and ``url`` do not apply: the app's body arrives as it sent it, at
        the upstream's path."""
        assert method == b"POST", "the wrapped app is only posted to"
        return open_inner(self.app, self.scope, upstream, headers, body, self.call)


@asynccontextmanager
async def open_inner(
    app: ASGIApp,
    scope: Scope,
    upstream: Upstream,
    headers: RawHeaders,
    body: bytes,
    call: PathCall | None = None,
) -> AsyncIterator[UpstreamResponse]:
    """Call the wrapped ASGI app as the upstream; yields once it started its answer."""
    path, query = upstream.path_for(call)
    inner_scope = dict(scope)
    inner_scope.update(
        path=path,
        raw_path=path.encode(),
        query_string=query,
        method="POST",
        headers=[*headers, (b"content-length", str(len(body)).encode())],
    )
    inner_scope.setdefault("state", {})
    inbox = _Inbox()
    finished = anyio.Event()
    body_sent = False

    async def receive() -> Message:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def run_app() -> None:
        try:
            await app(inner_scope, receive, inbox.put)
        except Exception:  # the inner app crashed: to the client, an upstream fault
            logger.exception("inner app raised while serving %s", path)
            await inbox.put({"type": _CRASH})
        finally:
            inbox.close()

    # Errors of this body and of the caller's (an upstream error status turned into a
    # ProxyError, a client disconnect) leave as themselves, not wrapped in an
    # ExceptionGroup, so both transports share the caller's one error path. ``beside``
    # runs the app as a bare task on asyncio: a task group costs ~75 µs a request.
    failure: Exception | None = None
    async with beside(run_app):
        try:
            batch = await inbox.take()
            if not batch:
                raise ProxyError(502, "inner app sent no response", kind="bad_gateway")
            start = batch[0]
            if start.get("type") == _CRASH:
                raise ProxyError(502, "inner app failed before responding", kind="bad_gateway")
            if start.get("type") != "http.response.start":
                raise ProxyError(502, "inner app sent no response start", kind="bad_gateway")
            headers = [(bytes(k).lower(), bytes(v)) for k, v in start.get("headers", [])]
            yield UpstreamResponse(int(start["status"]), headers, _chunks(inbox, batch[1:]))
        except Exception as exc:
            failure = exc
        finally:
            finished.set()
    if failure is not None:
        raise failure


async def _chunks(inbox: _Inbox, batch: list[Message]) -> AsyncIterator[bytes]:
    """The body: what the app sent since the last read, as one chunk per read (a
    network read holds what arrived meanwhile the same way)."""
    while True:
        data: list[bytes] = []
        for message in batch:
            kind = message.get("type")
            if kind == "http.response.body":
                part = message.get("body", b"")
                if part:
                    data.append(part)
                if not message.get("more_body", False):
                    if data:
                        yield b"".join(data)
                    return
            elif kind == _CRASH:
                if data:
                    yield b"".join(data)
                raise ProxyError(502, "inner app failed mid-body", kind="bad_gateway")
        if data:
            yield data[0] if len(data) == 1 else b"".join(data)
        batch = await inbox.take()
        if not batch:
            return  # the app returned without ending its body: the caller sees a cut
