"""Stored Responses: what a chained request costs, and what a stored turn weighs.

    .venv/bin/python bench/store.py              # --turns 10,50 --runs 200

A conversation of agent-loop turns (a user message, then the model's text and a tool
call, the tool's output, the model's answer: about 2 KB of JSON per turn) is stored
turn by turn, as the middleware stores it (``stored_responses.prepare``, the answer
recorded as a Responses object written by the codec). Then, per backend (memory,
SQLite, a real ``redis-server`` on loopback):

- **chained**: the request the client sends with ``previous_response_id`` (only the
  new message) through ``prepare`` (store read of the whole chain + expansion) and the
  request translation to a Chat upstream (``decode_request`` + ``encode_request``);
- **unchained**: the same conversation sent inline with ``store: false``, through the
  same two steps;

median of ``--runs`` runs each, and the difference. And the bytes one stored turn
takes: the encoded record, the memory store's Python allocations (tracemalloc), the
SQLite file, Redis's ``used_memory``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxai_asgi import canonical as c  # noqa: E402
from proxai_asgi.codec import UpstreamOptions  # noqa: E402
from proxai_asgi.errors import TranslationReport  # noqa: E402
from proxai_asgi.protocols import get_codec  # noqa: E402
from proxai_asgi.responses_state import stored_responses as sr  # noqa: E402
from proxai_asgi.store import MemoryStore, ResponseStore  # noqa: E402
from proxai_asgi.store.redis import RedisStore  # noqa: E402
from proxai_asgi.store.sqlite import SQLiteStore  # noqa: E402

RESPONSES = get_codec("openai_responses")
CHAT = get_codec("openai_chat_completions")
SCOPE: dict[str, Any] = {"headers": [(b"authorization", b"Bearer sk-bench")]}
TOOL = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a shell command and return its output.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
LOREM = "The build of the package finished; three tests failed in the parser module. "


def user(n: int) -> dict[str, Any]:
    text = f"Turn {n}: look at the failing test in src/parser_{n}.py and fix it. " * 3
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def answer(n: int, request: c.Request, response_id: str) -> bytes:
    """The model's turn as the Responses codec writes it to the client, under the id
    the proxy minted for it."""
    call = c.ToolCall(
        id=f"call_{n:04d}",
        name="exec_command",
        arguments=json.dumps({"cmd": f"pytest -x tests/test_parser_{n}.py"}),
    )
    response = c.Response(
        id=response_id,
        model="gpt-5.5",
        content=[c.Text(text=LOREM * 6), call],
        stop_reason="tool_use",
        usage=c.Usage(input_tokens=1000 + n, output_tokens=200),
    )
    return RESPONSES.encode_response(response, request)


def tool_output(n: int) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"call_{n:04d}", "output": LOREM * 8}


def body(fields: dict[str, Any]) -> bytes:
    return json.dumps({"model": "gpt-5.5", "tools": [TOOL], **fields}).encode()


async def build(service: sr.StoredResponses, turns: int) -> tuple[str, list[Any]]:
    """Stores ``turns`` turns; returns the last id and the whole conversation."""
    previous: str | None = None
    history: list[Any] = []
    for n in range(turns):
        new = [tool_output(n - 1), user(n)] if n else [user(n)]
        fields: dict[str, Any] = {"input": new}
        if previous:
            fields["previous_response_id"] = previous
        expanded, turn = await sr.prepare(service, SCOPE, body(fields), RESPONSES)
        assert turn is not None
        request = RESPONSES.decode_request(expanded, TranslationReport())
        data = answer(n, request, turn.response_id)
        await turn.observe(200, data, False)
        previous = turn.response_id  # the id the client is given (minted by the proxy)
        history += [*new, *json.loads(data)["output"]]
    history.append(tool_output(turns - 1))
    assert previous is not None
    return previous, history


async def request_path(service: sr.StoredResponses, data: bytes) -> None:
    expanded, _ = await sr.prepare(service, SCOPE, data, RESPONSES)
    request = RESPONSES.decode_request(expanded, TranslationReport())
    CHAT.encode_request(request, TranslationReport(), UpstreamOptions())


async def median_us(work: Callable[[], Awaitable[None]], runs: int) -> float:
    for _ in range(min(20, runs)):
        await work()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await work()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def bench_backend(name: str, store: ResponseStore, turns: int, runs: int) -> dict[str, float]:
    service = sr.StoredResponses(store)
    last, history = await build(service, turns)
    chained = body({"input": [tool_output(turns - 1)], "previous_response_id": last})
    inline = body({"input": history, "store": False})
    t_chained = await median_us(lambda: request_path(service, chained), runs)
    t_inline = await median_us(lambda: request_path(service, inline), runs)
    return {"chained": t_chained, "inline": t_inline, "kb": len(inline) / 1024}


async def main_async(turn_counts: list[int], runs: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="proxai-store-bench-"))
    redis_bin = shutil.which("redis-server")
    port = free_port()
    redis_proc = None
    if redis_bin:
        redis_proc = subprocess.Popen(
            [redis_bin, "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
            stdout=subprocess.DEVNULL,
        )
        time.sleep(0.3)  # a bench, not a test: give it a moment to listen
    try:
        print(
            f"{'backend':8} {'turns':>5} {'body KB':>8} {'chained µs':>11} "
            f"{'inline µs':>10} {'chained - inline':>17}"
        )
        for turns in turn_counts:
            stores: list[tuple[str, ResponseStore]] = [
                ("memory", MemoryStore()),
                ("sqlite", SQLiteStore(str(tmp / f"bench{turns}.db"))),
            ]
            if redis_proc:
                url = f"redis://127.0.0.1:{port}/0"
                stores.append(("redis", RedisStore(url, prefix=f"bench{turns}:")))
            for name, store in stores:
                r = await bench_backend(name, store, turns, runs)
                await store.aclose()
                print(
                    f"{name:8} {turns:>5} {r['kb']:>8.0f} {r['chained']:>11.0f} "
                    f"{r['inline']:>10.0f} {r['chained'] - r['inline']:>+17.0f}"
                )
        await sizes(tmp, port if redis_proc else None)
    finally:
        if redis_proc:
            redis_proc.terminate()
            redis_proc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


async def sizes(tmp: Path, redis_port: int | None, turns: int = 500) -> None:
    """Bytes per stored turn, each backend holding ``turns`` turns."""
    tracemalloc.start()
    memory = MemoryStore()
    before = tracemalloc.get_traced_memory()[0]
    service = sr.StoredResponses(memory)
    await build(service, turns)
    # The records stay; what the build left besides them is garbage by now.
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    print(f"\nbytes per stored turn ({turns} turns):")
    print(f"  encoded record      {memory.bytes / turns:>8.0f}")
    print(f"  memory store        {held / turns:>8.0f}  (Python allocations)")
    db = tmp / "size.db"
    sqlite = SQLiteStore(str(db))
    await build(sr.StoredResponses(sqlite), turns)
    await sqlite.aclose()
    print(f"  sqlite file         {os.path.getsize(db) / turns:>8.0f}")
    if redis_port is not None:
        url = f"redis://127.0.0.1:{redis_port}/1"
        redis = RedisStore(url)
        await redis.redis.flushdb()
        start = (await redis.redis.info("memory"))["used_memory"]
        await build(sr.StoredResponses(redis), turns)
        used = (await redis.redis.info("memory"))["used_memory"] - start
        await redis.aclose()
        print(f"  redis used_memory   {used / turns:>8.0f}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--turns", default="10,50")
    p.add_argument("--runs", type=int, default=200)
    args = p.parse_args()
    asyncio.run(main_async([int(t) for t in args.turns.split(",")], args.runs))


if __name__ == "__main__":
    main()
