"""The ledger as the middleware fills it: one record per exchange with the fields
the contract lists, over both transports, streamed and not; owners that outlive the
process; and a ledger outage during traffic that fails no request and loses no
acknowledged record."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Route, Upstream
from proxai_asgi.usage.ledger import Ledger, MemoryLedger, open_ledger
from proxai_asgi.usage.ledger.batch import BatchLedger
from proxai_asgi.usage.record import UsageRecord
from tests.helpers.postgres_server import PostgresServer
from tests.helpers.servers import FakeUpstream, reply_from_capture, serve

from .conftest import ENGINES, ledger_url, quick

UPSTREAM_KEY = "sk-upstream-secret"
CLIENT_KEY = "sk-client-secret"


async def _app_404(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


@contextlib.contextmanager
def proxy(fake: FakeUpstream, ledger: str | Ledger, *, inner: bool) -> Iterator[str]:
    """A proxy with ``ledger`` in front of ``fake`` (Anthropic Messages), served and
    closed (the ledger with it) on exit."""
    with contextlib.ExitStack() as es:
        if inner:
            up = Upstream.inner_app("anthropic_messages", name="claude", api_key=UPSTREAM_KEY)
            app = ProxaiMiddleware(fake, routes=[Route("claude-*", up)], ledger=ledger)
        else:
            base = es.enter_context(serve(fake))
            up = Upstream("anthropic_messages", base, UPSTREAM_KEY, name="claude")
            app = ProxaiMiddleware(_app_404, routes=[Route("claude-*", up)], ledger=ledger)
        yield es.enter_context(serve(app, close_app=True))


def chat(base: str, model: str = "claude-x", *, stream: bool = False) -> httpx.Response:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    r = httpx.post(
        base + "/v1/chat/completions",
        headers={"authorization": f"Bearer {CLIENT_KEY}"},
        json=body,
        timeout=10,
    )
    assert r.status_code == 200, r.text
    return r


def read(url: str) -> list[UsageRecord]:
    async def main() -> list[UsageRecord]:
        ledger = open_ledger(url)
        assert ledger is not None
        try:
            return await ledger.records()
        finally:
            await ledger.aclose()

    return anyio.run(main)


def owner_key(url: str) -> bytes:
    async def main() -> bytes:
        ledger = open_ledger(url)
        assert isinstance(ledger, BatchLedger)
        try:
            return await ledger.owner_secret()
        finally:
            await ledger.aclose()

    return anyio.run(main)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize("engine", ENGINES)
def test_one_record_per_exchange_with_every_field(
    engine: str, inner: bool, stream: bool, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    capture = "anthropic_sse_text_basic" if stream else "anthropic_json_cache_read"
    fake = FakeUpstream().push(reply_from_capture(capture))
    url = ledger_url(engine, request, tmp_path)
    memory = MemoryLedger()
    before = datetime.now(UTC)
    with proxy(fake, memory if engine == "memory" else url, inner=inner) as base:
        chat(base, stream=stream)
    after = datetime.now(UTC)
    (rec,) = anyio.run(memory.records) if engine == "memory" else read(url)
    assert rec.request_id.startswith("req_")
    assert before - timedelta(seconds=1) <= datetime.fromisoformat(rec.time) <= after
    assert rec.time.endswith("+00:00")
    assert rec.owner.startswith("key:") and CLIENT_KEY not in rec.owner
    if engine != "memory":  # the key the ledger keeps, not one random per process
        digest = hmac.new(owner_key(url), CLIENT_KEY.encode(), hashlib.sha256).hexdigest()
        assert rec.owner == "key:" + digest[:40]
    assert (rec.route, rec.upstream) == ("claude-*", "claude")
    assert rec.key_id == "k-" + hashlib.sha256(UPSTREAM_KEY.encode()).hexdigest()[:12]
    assert (rec.client_protocol, rec.upstream_protocol) == (
        "openai_chat_completions",
        "anthropic_messages",
    )
    assert (rec.requested_model, rec.served_model) == ("claude-x", "claude-sonnet-4-20250514")
    assert (rec.status, rec.stream, rec.attempts, rec.fallback_index) == (200, stream, 1, 0)
    tokens = (rec.input_tokens, rec.output_tokens, rec.cache_read_tokens)
    assert tokens == ((17, 15, 0) if stream else (12, 350, 4167))  # input without the cache
    assert (rec.cache_write_5m_tokens, rec.cache_write_1h_tokens, rec.reasoning_tokens) == (0, 0, 0)
    assert (rec.ttft_ms is not None) == stream
    assert rec.duration_ms > 0 and (rec.ttft_ms or 0) <= rec.duration_ms


def test_owners_stay_the_same_over_a_restart_with_a_sql_ledger(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'usage.db'}"
    fake = FakeUpstream().push(reply_from_capture("anthropic_json_text_basic"))
    for _ in range(2):  # two processes, one after the other
        with proxy(fake, url, inner=True) as base:
            chat(base)
    first, second = read(url)
    assert first.owner == second.owner and first.request_id != second.request_id


# ------------------------------------------------------------------- outages

BOUND = 1.5  # seconds: no request waits for the ledger (a fast answer takes ~10 ms)


def traffic(base: str, models: list[str]) -> None:
    for model in models:
        start = time.perf_counter()
        chat(base, model)
        assert time.perf_counter() - start < BOUND, f"{model} waited for the ledger"


def wait_for_failure(ledger: BatchLedger) -> None:
    deadline = time.monotonic() + 5
    while ledger.failures == 0:
        assert time.monotonic() < deadline, "the ledger never tried to write"
        time.sleep(0.01)


def check_exactly_once(url: str, ledger: BatchLedger, models: list[str]) -> None:
    assert (ledger.accepted, ledger.dropped, ledger.unwritten) == (len(models), 0, 0)
    written = [r.requested_model for r in read(url)]
    assert sorted(written) == sorted(models)  # each acknowledged record, once


def test_postgres_stopped_mid_traffic_fails_no_request_and_loses_nothing(
    postgres: PostgresServer,
) -> None:
    url = postgres.schema_url("t_outage")
    ledger = quick(url, connect_timeout=1)
    assert isinstance(ledger, BatchLedger)
    fake = FakeUpstream().push(reply_from_capture("anthropic_json_text_basic"))
    models = [f"claude-{i}" for i in range(30)]
    try:
        with proxy(fake, ledger, inner=True) as base:
            traffic(base, models[:10])
            postgres.stop()
            traffic(base, models[10:20])
            wait_for_failure(ledger)
            assert ledger.unwritten > 0
            postgres.start()
            traffic(base, models[20:])
    finally:
        if postgres.process is None:
            postgres.start()
    check_exactly_once(url, ledger, models)


def test_a_locked_sqlite_file_fails_no_request_and_loses_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'usage.db'}"
    ledger = quick(url, busy_timeout=0.05)
    assert isinstance(ledger, BatchLedger)
    fake = FakeUpstream().push(reply_from_capture("anthropic_json_text_basic"))
    models = [f"claude-{i}" for i in range(30)]
    with proxy(fake, ledger, inner=True) as base:
        traffic(base, models[:10])
        other = sqlite3.connect(tmp_path / "usage.db", isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
        try:
            traffic(base, models[10:20])
            wait_for_failure(ledger)
        finally:
            other.execute("ROLLBACK")
            other.close()
        traffic(base, models[20:])
    check_exactly_once(url, ledger, models)


def test_a_sqlite_file_that_cannot_be_opened_yet_loses_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "not-yet"
    url = f"sqlite:///{folder / 'usage.db'}"
    ledger = quick(url)
    assert isinstance(ledger, BatchLedger)
    fake = FakeUpstream().push(reply_from_capture("anthropic_json_text_basic"))
    models = [f"claude-{i}" for i in range(20)]
    with proxy(fake, ledger, inner=True) as base:
        traffic(base, models[:10])
        wait_for_failure(ledger)
        folder.mkdir()  # the volume is mounted
        traffic(base, models[10:])
    check_exactly_once(url, ledger, models)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_ledger_writes_from_a_middleware_on_any_event_loop(
    backend: str, tmp_path: Path
) -> None:
    """The writer is a thread, not a task: the same on trio as on asyncio."""
    url = f"sqlite:///{tmp_path / 'usage.db'}"
    answer = reply_from_capture("anthropic_json_cache_read").chunks[0]

    async def upstream(scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    async def main() -> None:
        up = Upstream.inner_app("anthropic_messages", name="claude")
        app = ProxaiMiddleware(upstream, routes=[Route("claude-*", up)], ledger=url)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app), base_url="http://proxy"
        ) as client:
            for n in range(3):
                body = {"model": f"claude-{n}", "messages": [{"role": "user", "content": "hi"}]}
                r = await client.post("/v1/chat/completions", json=body)
                assert r.status_code == 200
        await app.aclose()

    anyio.run(main, backend=backend)
    records = read(url)
    assert sorted(r.requested_model or "" for r in records) == ["claude-0", "claude-1", "claude-2"]
    assert {r.cache_read_tokens for r in records} == {4167}
