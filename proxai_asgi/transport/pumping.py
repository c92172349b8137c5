"""Reading an upstream body under watch: a stall ends it with a 504, a client that
leaves cancels it. One watcher task per exchange; the cost per chunk is a clock read."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ..errors import ProxyError, ResponseAborted
from ..routing import Upstream
from .upstream import Receive, UpstreamResponse

logger = logging.getLogger("proxai_asgi")


def _never() -> bool:
    return False


def _loop_clock() -> Callable[[], float]:
    """``anyio.current_time``, bound once: on asyncio it is the running loop's
    ``time`` (what anyio returns), without the ~1 µs backend lookup per call."""
    try:
        return asyncio.get_running_loop().time
    except RuntimeError:  # another backend (trio)
        return anyio.current_time


@asynccontextmanager
async def beside(watcher: Callable[[], Coroutine[Any, Any, None]]) -> AsyncIterator[None]:
    """Run ``watcher`` while the body runs; stop it when the body ends.

    On asyncio a bare task (~9 µs) rather than an anyio task group (~75 µs to open
    and close): this runs on every request."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another backend (trio): a task group
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
        return
    task = loop.create_task(watcher())
    try:
        yield
    finally:
        task.cancel()
        if task.done() and not task.cancelled() and task.exception() is not None:
            logger.debug("watcher failed: %r", task.exception())


async def until_disconnect(receive: Receive, work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` and cancel it the moment the client goes away, which closes the
    upstream request with it."""
    error: ProxyError | ResponseAborted | None = None
    with anyio.CancelScope() as scope:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            scope.cancel()

        async with beside(watch):
            try:
                await work
            except (ProxyError, ResponseAborted) as exc:
                error = exc  # raised after the scope, unwrapped
    if error is not None:
        raise error


async def pump(
    resp: UpstreamResponse,
    up: Upstream,
    on_chunk: Callable[[bytes], Awaitable[bool]],
    tool_open: Callable[[], bool] = _never,
    quiet: list[float] | None = None,
) -> None:
    """Feed the upstream body to ``on_chunk`` (which returns True to stop early),
    failing with 504 when the upstream stalls: ``stream_idle_timeout`` anywhere, or
    the shorter ``tool_stall_timeout`` while a tool call's arguments are half sent
    (``tool_open``).

    One watchdog task per stream wakes only at possible deadlines, so the cost per
    chunk is a clock read, not a timer (a per-chunk ``fail_after`` cost several µs on
    every token). ``quiet`` (if given) gets how long the upstream had sent nothing
    when the body ended or broke: a stall before a cut tells routing the target is
    stuck, not just its connection."""
    # read_timeout bounds every wait for upstream bytes, here as in httpx.
    idle = min(up.stream_idle_timeout, up.read_timeout)
    tool_idle = min(idle, up.tool_stall_timeout)
    clock = _loop_clock()
    last = clock()
    stalled: float | None = None
    error: ProxyError | None = None
    with anyio.CancelScope() as scope:

        async def watchdog() -> None:
            nonlocal stalled
            while True:
                limit = tool_idle if tool_open() else idle
                now = clock()
                if now - last >= limit:
                    stalled = limit
                    scope.cancel()
                    return
                # Wake by this deadline, or within tool_idle of now: a chunk that
                # arrives meanwhile may open a tool call and shorten the limit.
                await anyio.sleep(min(last + limit - now, tool_idle) + 0.001)

        async with beside(watchdog):
            try:
                async for chunk in resp:
                    last = clock()
                    if await on_chunk(chunk):
                        break
            except ProxyError as exc:
                error = exc
            finally:
                if quiet is not None:
                    quiet.append(clock() - last)
    if stalled is not None:
        where = "in the middle of tool-call arguments" if stalled != idle else "mid-stream"
        raise ProxyError(504, f"upstream sent nothing for {stalled:g}s {where}", kind="timeout")
    if error is not None:
        raise error
