"""``failover.Race`` on its own: what a healthy request pays for the attempt loop (no
task for a plain route's one attempt, no task for a hedge that is never due), and
hedging a slow attempt on both anyio backends."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from proxai_asgi import Upstream
from proxai_asgi.routing.plan import Target
from proxai_asgi.serving.failover import Failed, Race

pytestmark = pytest.mark.anyio


def _targets(n: int, first_content_timeout: float = 10.0) -> list[Target]:
    up = Upstream(
        "openai_chat_completions",
        "http://127.0.0.1:9/v1",
        api_key=[f"k{i}" for i in range(n)] if n > 1 else "k0",
        first_content_timeout=first_content_timeout,
    )
    return [Target(m, "m", 0) for m in up.members]


def _race(targets: list[Target], attempt: Any) -> Race:
    return Race(None, targets, attempt, None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_one_target_race_runs_its_attempt_in_the_callers_task() -> None:
    ran_in: list[asyncio.Task[Any] | None] = []

    async def attempt(race: Race, target: Target) -> Failed | None:
        ran_in.append(asyncio.current_task())
        assert race.claim(target)
        return None

    race = _race(_targets(1), attempt)
    await race.run()
    assert ran_in == [asyncio.current_task()]
    assert race.winner is not None and race.record.count == 1


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_attempt_answering_in_time_starts_no_task_and_no_hedge() -> None:
    """A pool's first attempt runs in the caller's task; its hedge is a timer, called
    off when the attempt ends, so no second attempt follows."""
    before = len(asyncio.all_tasks())
    during: list[int] = []
    tried: list[Target] = []

    async def attempt(race: Race, target: Target) -> Failed | None:
        tried.append(target)
        during.append(len(asyncio.all_tasks()))
        assert race.claim(target)
        return None

    targets = _targets(2, first_content_timeout=0.02)
    await _race(targets, attempt).run()
    await anyio.sleep(0.08)  # past the hedge's delay
    assert during == [before]
    assert tried == targets[:1]


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_slow_first_attempt_is_hedged_by_the_next_target() -> None:
    cancelled: list[Target] = []

    async def attempt(race: Race, target: Target) -> Failed | None:
        if target.upstream.key_index == 0:  # silent until the winner cancels it
            try:
                await anyio.sleep(30)
            except anyio.get_cancelled_exc_class():
                cancelled.append(target)
                raise
        assert race.claim(target)
        return None

    targets = _targets(2, first_content_timeout=0.02)
    race = _race(targets, attempt)
    with anyio.fail_after(5):
        await race.run()
    assert race.winner is targets[1]
    assert cancelled == [targets[0]]
    assert race.record.count == 2


class _State:
    """The routing state's writes, counted."""

    def __init__(self) -> None:
        self.binds: list[tuple[str, str]] = []

    async def recovered(self, name: str) -> None:
        pass

    async def bind(self, session: str, target: str, ttl: float) -> None:
        self.binds.append((session, target))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("already_bound", [True, False])
async def test_a_session_is_bound_after_its_answer_unless_it_was_bound_there(
    already_bound: bool,
) -> None:
    """A binding found on the member that answers was renewed when it was looked up:
    writing it again would be a Redis round trip on every turn of a conversation."""

    async def attempt(race: Race, target: Target) -> Failed | None:
        assert race.claim(target)
        return None

    targets = _targets(2)
    state = _State()
    race = Race(None, targets, attempt, state, "session")  # type: ignore[arg-type]
    race.bound = targets[0].member if already_bound else None
    await race.run()
    assert state.binds == ([] if already_bound else [("session", targets[0].member)])
