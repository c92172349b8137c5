"""The wrapped app as the upstream: what its sends become for the reader."""

from __future__ import annotations

import anyio
import pytest

from proxai_asgi.transport.inner_transport import _Inbox

pytestmark = pytest.mark.anyio


def _body(n: int) -> dict[str, object]:
    return {"type": "http.response.body", "body": b"%d" % n, "more_body": True}


async def test_a_burst_of_sends_is_taken_in_one_read() -> None:
    inbox = _Inbox()
    for n in range(5):
        await inbox.put(_body(n))
    assert [m["body"] for m in await inbox.take()] == [b"0", b"1", b"2", b"3", b"4"]


async def test_the_app_waits_while_the_reader_is_limit_messages_behind() -> None:
    inbox = _Inbox(limit=2)
    await inbox.put(_body(0))
    await inbox.put(_body(1))
    third_sent = anyio.Event()

    async def app() -> None:
        await inbox.put(_body(2))
        third_sent.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(app)
        await anyio.wait_all_tasks_blocked()
        assert not third_sent.is_set()  # blocked: two unread
        assert len(await inbox.take()) == 2
        with anyio.fail_after(5):
            await third_sent.wait()
    assert [m["body"] for m in await inbox.take()] == [b"2"]


async def test_a_reader_waiting_on_an_app_that_ends_gets_nothing_more() -> None:
    inbox = _Inbox()
    got: list[list[object]] = []

    async def reader() -> None:
        got.append(list(await inbox.take()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.wait_all_tasks_blocked()
        await inbox.put(_body(7))
        inbox.close()
    assert got == [[_body(7)]]
    assert await inbox.take() == []
