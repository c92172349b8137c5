"""failoverbench's sixteen faults, run by our own faulty provider
(``tests/helpers/faulty_upstream.py``) through ``ProxaiMiddleware``: a Chat client (the
openai SDK) asks for each scenario's model, routed to a Chat upstream that fails in
that scenario's way, with the catalogue's fallback model as the route's ``Fallback``.
Each test asserts the catalogue's checks, its durations scaled by ``SCALE``.

The faults are TCP-level (resets, stalls, chunked bodies cut short), so the upstream is
reached over HTTP only; the wrapped-app transport cannot produce them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import openai
import pytest

from proxai_asgi import Fallback, ProxaiMiddleware, Route, Upstream
from tests.helpers.faulty_upstream import ANSWER, FaultyUpstream, faulty_upstream
from tests.helpers.servers import serve

SCALE = 0.05  # every duration of the catalogue's full profile, times this
# The routing knobs scaled the same way (a 30 s stall becomes 1.5 s, so a first
# content timeout of 0.4 s stands for 8 s).
KNOBS: dict[str, Any] = {
    "connect_timeout": 1.0,
    "read_timeout": 3.0,
    "first_content_timeout": 0.4,
    "stream_idle_timeout": 0.4,
    "retry_budget": 1.5,
    "max_retry_after": 1.5,
    "target_cooldown": 0.5,
    "key_cooldown": 60.0,
}
PROMPT = [{"role": "user", "content": "Explain in sixty words why routing matters."}]

# id -> (model, fallback model)
SCENARIOS = {
    "S01": ("fb-s01-429-retry-after", "fb-ok"),
    "S02": ("fb-s02-429-persistent", "fb-ok"),
    "S03": ("fb-s03-500-then-200", "fb-ok"),
    "S04": ("fb-s04-503-persistent", "fb-ok"),
    "S05": ("fb-s05-reset", "fb-ok"),
    "S06": ("fb-s06-no-response", "fb-ok"),
    "S07": ("fb-s07-slow-ttft", "fb-ok"),
    "S08": ("fb-s08-stream-cut", "fb-ok"),
    "S09": ("fb-s09-stream-stall", "fb-ok"),
    "S10": ("fb-s10-malformed-chunk", "fb-ok"),
    "S11": ("fb-s11-no-done", "fb-ok"),
    "S12": ("fb-s12-context-length", "fb-ok"),
    "S13": ("fb-s13-content-filter", "fb-ok"),
    "S14": ("fb-s14-stream-cut", "fb-ok-noprefill"),
    "S15": ("fb-s15-flap", "fb-ok"),
    "S16": ("fb-s16-503-persistent", "fb-ok"),
}
STREAMED = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])


@dataclass
class Stack:
    fake: FaultyUpstream
    url: str  # the proxy's


def _routes(base: str) -> list[Route]:
    """One upstream per scenario model, as ``bench/failoverbench.toml`` configures:
    what is learnt about one fault never touches another model or the fallback."""

    def chat(name: str, **extra: Any) -> Upstream:
        return Upstream("openai_chat_completions", base + "/v1", name=name, **KNOBS, **extra)

    ok = chat("fb-ok")
    # The noprefill target rejects an assistant prefill: it may only restart.
    noprefill = chat("fb-ok-noprefill", continuation="restart")
    targets = {"fb-ok": ok, "fb-ok-noprefill": noprefill}
    routes = [Route(model, up) for model, up in targets.items()]
    for sid, (model, fallback) in SCENARIOS.items():
        fb = Fallback(targets[fallback], model=fallback)
        routes.append(Route(model, chat(sid.lower()), fallbacks=[fb]))
    return routes


@pytest.fixture(scope="module")
def _stacks() -> Iterator[dict[object, Stack]]:
    with faulty_upstream(scale=SCALE) as (fake, base), ExitStack() as es:
        made: dict[object, Stack] = {}

        class Stacks(dict[object, Stack]):
            def __missing__(self, key: object) -> Stack:
                # A proxy per variant: what one learned (a cooled-down primary) must
                # not decide the other's attempts, as failoverbench runs each once.
                app = ProxaiMiddleware(_not_found, routes=_routes(base))
                made[key] = self[key] = Stack(fake, es.enter_context(serve(app)))
                return made[key]

        yield Stacks()


@pytest.fixture
def stack(_stacks: dict[object, Stack], request: pytest.FixtureRequest) -> Stack:
    params = getattr(request.node, "callspec", None)
    return _stacks[params.params.get("stream") if params else None]


async def _not_found(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


@dataclass
class Result:
    ok: bool
    text: str = ""
    model: str | None = None
    usage: dict[str, Any] | None = None
    error: BaseException | None = None
    elapsed: float = 0.0

    @property
    def complete(self) -> bool:
        return self.ok and " ".join(self.text.split()) == ANSWER


def ask(url: str, model: str, stream: bool, timeout: float) -> Result:
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0,
                           timeout=timeout)  # fmt: skip
    t0 = time.monotonic()
    try:
        if not stream:
            r = client.chat.completions.create(model=model, messages=PROMPT)  # type: ignore[arg-type]
            usage = r.usage.model_dump() if r.usage else None
            text = r.choices[0].message.content or ""
            return Result(True, text, r.model, usage, elapsed=time.monotonic() - t0)
        parts: list[str] = []
        got = Result(True)
        chunks = client.chat.completions.create(
            model=model, messages=PROMPT, stream=True,  # type: ignore[arg-type]
            stream_options={"include_usage": True},
        )  # fmt: skip
        for chunk in chunks:
            got.model = chunk.model or got.model
            if chunk.usage:
                got.usage = chunk.usage.model_dump()
            parts += [c.delta.content for c in chunk.choices if c.delta.content]
        got.text, got.elapsed = "".join(parts), time.monotonic() - t0
        return got
    except Exception as exc:  # an SDK error, a cut stream, a malformed chunk
        return Result(False, error=exc, elapsed=time.monotonic() - t0)
    finally:
        client.close()


def run(stack: Stack, sid: str, stream: bool, timeout: float = 8.0) -> Result:
    stack.fake.reset()
    return ask(stack.url, SCENARIOS[sid][0], stream, timeout)


def primary(stack: Stack, sid: str) -> list[float]:
    return [a.t for a in stack.fake.attempts(SCENARIOS[sid][0])]


def fallback(stack: Stack, sid: str) -> list[float]:
    return [a.t for a in stack.fake.attempts(SCENARIOS[sid][1])]


def alive(stack: Stack) -> bool:
    return ask(stack.url, "fb-ok", False, 3.0).complete


def within(times: list[float], window: float) -> int:
    return sum(1 for t in times if t - times[0] < window)


T = FaultyUpstream(scale=SCALE).timing  # the scaled durations the fake uses


@STREAMED
def test_s01_a_429_with_retry_after_is_retried_after_the_wait(stack: Stack, stream: bool) -> None:
    got = run(stack, "S01", stream)
    assert got.complete
    times = primary(stack, "S01")
    assert len(times) >= 2 and times[1] - times[0] >= 0.9 * T("retry_after")
    assert within(times, 1.5 * SCALE) <= 2


@STREAMED
def test_s02_a_persistent_429_backs_off_then_fails_over(stack: Stack, stream: bool) -> None:
    got = run(stack, "S02", stream)
    times = primary(stack, "S02")
    assert within(times, 3 * SCALE) <= 4 and len(times) <= 6
    assert got.complete and got.model == "fb-ok"


@STREAMED
def test_s03_one_500_is_retried_on_the_same_target(stack: Stack, stream: bool) -> None:
    got = run(stack, "S03", stream)
    assert got.complete and got.model == SCENARIOS["S03"][0]
    assert len(primary(stack, "S03")) == 2 and fallback(stack, "S03") == []


@STREAMED
def test_s04_a_persistent_503_fails_over_within_the_budget(stack: Stack, stream: bool) -> None:
    got = run(stack, "S04", stream)
    assert got.complete and got.model == "fb-ok"
    assert 1 <= len(primary(stack, "S04")) <= 6 and len(fallback(stack, "S04")) == 1


@STREAMED
def test_s05_a_reset_before_headers_is_answered(stack: Stack, stream: bool) -> None:
    got = run(stack, "S05", stream)
    assert got.complete
    assert len(primary(stack, "S05")) + len(fallback(stack, "S05")) == 2


@STREAMED
def test_s06_a_silent_provider_is_left_long_before_its_own_limit(
    stack: Stack, stream: bool
) -> None:
    got = run(stack, "S06", stream)
    assert got.complete and got.model == "fb-ok"
    assert got.elapsed < T("no_response") / 4
    assert len(primary(stack, "S06")) == 1  # a silent target is not asked again


@STREAMED
def test_s07_a_slow_first_token_is_raced_by_the_fallback(stack: Stack, stream: bool) -> None:
    got = run(stack, "S07", stream)
    assert got.complete
    assert got.elapsed < T("slow_first_token")  # the first content timeout fired
    assert len(fallback(stack, "S07")) == 1


@STREAMED
def test_s08_a_stream_cut_mid_answer_is_continued_to_the_whole_answer(
    stack: Stack, stream: bool
) -> None:
    got = run(stack, "S08", stream)
    assert got.complete, got.text or got.error  # never a truncated success
    assert got.usage is not None


@STREAMED
def test_s09_a_stalled_stream_is_detected_and_completed(stack: Stack, stream: bool) -> None:
    got = run(stack, "S09", stream)
    assert got.complete, got.text or got.error
    if stream:
        assert got.elapsed < T("stall")  # the idle timeout, not the upstream's close
    assert got.elapsed <= 45 * SCALE
    assert alive(stack)


@STREAMED
def test_s10_a_malformed_chunk_leaks_nothing_and_the_answer_completes(
    stack: Stack, stream: bool
) -> None:
    got = run(stack, "S10", stream)
    if stream:  # the bad event dropped (or the answer continued): the whole answer
        assert got.complete, got.text or got.error
    else:  # a garbled body: answered again, or a clean error in the client's shape
        assert got.complete or isinstance(got.error, openai.APIStatusError), got.error
    assert alive(stack)


@STREAMED
def test_s11_a_stream_without_done_is_finished_promptly_with_usage(
    stack: Stack, stream: bool
) -> None:
    got = run(stack, "S11", stream)
    assert got.complete and got.usage is not None
    assert got.elapsed < 1.0


@STREAMED
def test_s12_context_length_is_not_retried_but_the_fallback_answers(
    stack: Stack, stream: bool
) -> None:
    got = run(stack, "S12", stream)
    assert len(primary(stack, "S12")) == 1
    assert got.complete and got.model == "fb-ok"


@STREAMED
def test_s13_a_content_filter_refusal_is_answered_as_the_provider_answered(
    stack: Stack, stream: bool
) -> None:
    got = run(stack, "S13", stream)
    assert len(primary(stack, "S13")) == 1 and fallback(stack, "S13") == []
    assert isinstance(got.error, openai.BadRequestError)
    assert "content_policy_violation" in str(got.error.body)


@STREAMED
def test_s14_a_cut_answer_restarts_on_a_fallback_that_rejects_prefill(
    stack: Stack, stream: bool
) -> None:
    got = run(stack, "S14", stream)
    assert got.complete, got.text or got.error
    # Capability-aware: the restart target is never sent a prefill it rejects.
    assert all(a.prefill is None for a in stack.fake.attempts("fb-ok-noprefill"))


@STREAMED
def test_s15_a_flapping_primary_is_skipped_then_returned_to(stack: Stack, stream: bool) -> None:
    stack.fake.reset()
    model, down, results = SCENARIOS["S15"][0], T("flap_down"), []
    t0 = time.monotonic()
    for i in range(20):
        time.sleep(max(0.0, t0 + i * 4 * SCALE - time.monotonic()))
        results.append(ask(stack.url, model, stream, 30 * SCALE))
    assert all(r.complete for r in results), [r.error for r in results if not r.complete]
    served = [a.t for a in stack.fake.attempts(model) if a.action.startswith("200")]
    assert served and served[0] - down <= 30 * SCALE  # back on the primary
    # Probe discipline: while it is down, at most one primary attempt per request.
    during = sum(1 for i in range(20) if i * 4 * SCALE < down)
    assert len([a for a in stack.fake.attempts(model) if a.t < down]) <= during


@STREAMED
def test_s16_the_fallback_answer_reports_its_own_model_and_usage(
    stack: Stack, stream: bool
) -> None:
    got = run(stack, "S16", stream)
    assert got.complete and got.model == "fb-ok"
    assert len(primary(stack, "S16")) <= 6
    # The fallback's own usage: failed attempts are never counted in.
    assert got.usage is not None and got.usage["completion_tokens"] == 60
