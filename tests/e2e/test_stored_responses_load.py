"""Issue 26: what one client's stored-Responses request costs everyone else.

- A body of a million empty ``input`` items (a few MB) gets its 400 from the codec's
  validation before anything of it is expanded: the event loop is held no longer,
  and memory grows no more, than for the same body with the store off.
- A SQLite store whose file another process holds a write lock on answers every
  request within about one ``busy_timeout``, side by side, not one after another.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.store.sqlite import SQLiteStore
from tests.e2e.test_stored_responses import ANTHROPIC, CHAT, COMMAND, MODEL, proxy
from tests.helpers.scripted_model import ScriptedModel

ITEMS = 300_000


async def post(app: Any, body: bytes) -> tuple[int, bytes]:
    """One ``POST /v1/responses`` through the middleware's ASGI interface."""
    chunks = [body[at : at + 65536] for at in range(0, len(body), 65536)]
    sent: list[Any] = []

    async def receive() -> Any:
        if chunks:
            return {"type": "http.request", "body": chunks.pop(0), "more_body": bool(chunks)}
        await asyncio.Event().wait()  # the client stays; never reached

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/responses",
        "raw_path": b"/v1/responses",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"authorization", b"Bearer sk-c")],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1),
        "root_path": "",
    }
    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


async def held(app: Any, body: bytes) -> tuple[int, float, int]:
    """The answer's status, the longest the event loop was held meanwhile (a ticker's
    longest wait between two 2 ms sleeps), and the peak of traced memory."""
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    tracemalloc.start()
    try:
        status, _ = await post(app, body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        done = True
        await task
    return status, max(gaps), peak


def _upstream(transport: str) -> Upstream:
    if transport == "inner":
        return Upstream.inner_app(CHAT)
    return Upstream(CHAT, "http://127.0.0.1:9/v1", "sk-upstream")  # never reached


@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("continued", [False, True], ids=["new", "continued"])
def test_stored_input_expansion_is_validated_first_and_never_holds_the_loop(
    transport: str, continued: bool
) -> None:
    head = b'{"model":"gpt-5.5",'
    if continued:
        head += b'"previous_response_id":"resp_unknown",'
    body = head + b'"input":[' + b",".join([b"{}"] * ITEMS) + b"]}"
    model = ScriptedModel(CHAT, COMMAND)

    async def run() -> tuple[tuple[int, float, int], tuple[int, float, int]]:
        stored = ProxaiMiddleware(model, upstream=_upstream(transport))
        plain = ProxaiMiddleware(model, upstream=_upstream(transport), store="off")
        try:
            await post(stored, b'{"model":"gpt-5.5","input":"warm up"}')
            # the same body where no store is involved: what validation alone costs
            return await held(plain, body), await held(stored, body)
        finally:
            await stored.aclose()
            await plain.aclose()

    (base_status, base_gap, base_peak), (status, gap, peak) = asyncio.run(run())
    assert base_status == 400 and status == 400
    # The stored layer adds next to nothing to what the codec's validation takes.
    assert gap < 2 * base_gap + 0.3, (gap, base_gap)
    assert peak < 1.5 * base_peak + 2 * len(body), (peak, base_peak, len(body))


@contextmanager
def foreign_write_lock(path: Path) -> Iterator[None]:
    """Another process's connection holding the database's write lock meanwhile."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        taken.set()
        release.wait(30)
        db.execute("ROLLBACK")
        db.close()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert taken.wait(10)
        yield
    finally:
        release.set()
        thread.join()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("transport", ["http", "inner"])
def test_sqlite_store_answers_side_by_side_under_a_foreign_write_lock(
    tmp_path: Path, transport: str, stream: bool
) -> None:
    timeout, n = 0.5, 6
    path = tmp_path / "locked.db"
    store = SQLiteStore(str(path), busy_timeout=timeout)
    model = ScriptedModel(ANTHROPIC, COMMAND)
    with proxy(model, transport, store=store) as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        first = client.responses.create(model=MODEL, input="remember 4711")
        results: list[Any] = [None] * n

        def continue_it(k: int) -> None:
            kw: dict[str, Any] = {"input": f"turn {k}", "previous_response_id": first.id}
            try:
                if stream:
                    events = list(client.responses.create(model=MODEL, stream=True, **kw))
                    results[k] = events[-1].type
                else:
                    results[k] = client.responses.create(model=MODEL, **kw).status
            except openai.APIStatusError as exc:
                results[k] = exc.status_code

        with foreign_write_lock(path):
            started = time.perf_counter()
            threads = [threading.Thread(target=continue_it, args=(k,)) for k in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            elapsed = time.perf_counter() - started
        client.close()
    # Each read goes on without waiting (the expiry refresh is skipped while locked);
    # each answer's save waits one busy_timeout, side by side, then is given up.
    assert all(r in ("completed", "response.completed") for r in results), results
    assert elapsed < (n - 1) * timeout, elapsed


@pytest.mark.parametrize("transport", ["http", "inner"])
def test_sqlite_store_locked_past_its_busy_timeout_is_a_503_in_the_clients_shape(
    tmp_path: Path, transport: str
) -> None:
    path = tmp_path / "new.db"
    store = SQLiteStore(str(path), busy_timeout=0.2)
    model = ScriptedModel(CHAT, COMMAND)
    with proxy(model, transport, store=store) as url, foreign_write_lock(path):
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        started = time.perf_counter()
        with pytest.raises(openai.APIStatusError) as caught:
            client.responses.create(model=MODEL, input="hi", previous_response_id="resp_1")
        elapsed = time.perf_counter() - started
        client.close()
    assert caught.value.status_code == 503
    assert caught.value.response.json()["error"]["code"] == "store_unavailable"
    assert elapsed < 5, elapsed  # one busy_timeout (0.2 s), not sqlite's default 5 s


@pytest.mark.parametrize("transport", ["http", "inner"])
def test_a_large_stored_input_is_kept_whole_and_continued(transport: str) -> None:
    """An input past the size made into stored items off the event loop: every item
    kept (with an id) and sent on when the conversation continues."""
    model = ScriptedModel(CHAT, COMMAND)
    items = [{"role": "user", "content": f"note {k:05d} " + "x" * 80} for k in range(2000)]
    with proxy(model, transport) as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        first = client.responses.create(model=MODEL, input=items)  # type: ignore[arg-type]
        listed = list(client.responses.input_items.list(first.id, order="asc", limit=100))
        client.responses.create(model=MODEL, input="and?", previous_response_id=first.id)
        client.close()
    assert len(listed) == 2000 and all(item.id for item in listed)
    decoded = model.exchanges[1].decoded
    assert decoded is not None
    sent = [p.text for m in decoded.messages for p in m.content if hasattr(p, "text")]
    assert sum(1 for t in sent if t.startswith("note ")) == 2000 and sent[-1] == "and?"
