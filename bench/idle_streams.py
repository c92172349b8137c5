"""Memory per open idle stream: resident memory the proxy process holds for each
streaming exchange that has sent its first event and then waits on its upstream.

An upstream (``bench/servers/idle_upstream.py``, own process) answers every streaming
request with its first Chat SSE event and then sends nothing until the client goes away. N clients
(raw sockets in this process) open streams through the proxy (``python -m proxai_asgi``
under uvicorn, own process) at once, each reading until that first event arrives; the
proxy's VmRSS (``/proc/PID/status``) is read before and with all N open, then
everything is closed. Done for pass-through (Chat client) and translated (Anthropic
and Responses clients); the upstream's own growth is shown as a bare-uvicorn
reference (it holds the same N connections with no proxy logic).

    .venv/bin/python -m bench.idle_streams           # N=500
    IDLE_STREAMS=1000 .venv/bin/python -m bench.idle_streams
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from contextlib import ExitStack

from bench._common import PY, free_port, process, rss_kb, uvicorn

BODIES = {
    "pass-through (chat -> chat)": (
        "/v1/chat/completions",
        {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]},
    ),
    "translated (anthropic client -> chat)": (
        "/v1/messages",
        {
            "model": "m",
            "stream": True,
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "x"}],
        },
    ),
    "translated (responses client -> chat)": (
        "/v1/responses",
        {"model": "m", "stream": True, "input": "x"},
    ),
}


async def open_stream(port: int, path: str, body: bytes) -> asyncio.StreamWriter:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    writer.write(head + body)
    await writer.drain()
    seen = b""
    while b"data:" not in seen:  # the first event has reached the client
        chunk = await asyncio.wait_for(reader.read(65536), 30)
        if not chunk:
            raise RuntimeError(f"stream closed before its first event: {seen[:300]!r}")
        seen += chunk
    if b" 200 " not in seen.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"not a 200: {seen[:300]!r}")
    return writer


async def close_all(writers: list[asyncio.StreamWriter]) -> None:
    for w in writers:
        w.close()
    for w in writers:
        with contextlib.suppress(Exception):
            await w.wait_closed()


async def settle(pid: int, seconds: float = 1.0) -> int:
    await asyncio.sleep(seconds)
    return rss_kb(pid)


async def measure(
    proxy_pid: int, up_pid: int, port: int, path: str, body: bytes, n: int
) -> dict[str, float]:
    # Warm-up: codecs imported, pools and allocator arenas in use.
    await close_all([await open_stream(port, path, body) for _ in range(20)])
    base, up_base = await settle(proxy_pid), rss_kb(up_pid)
    t = time.perf_counter()
    writers: list[asyncio.StreamWriter] = []
    for i in range(0, n, 50):  # 50 at a time: a burst of N connects overflows nothing
        writers += await asyncio.gather(
            *(open_stream(port, path, body) for _ in range(min(50, n - i)))
        )
    opened = time.perf_counter() - t
    held, up_held = await settle(proxy_pid), rss_kb(up_pid)
    await close_all(writers)
    after = await settle(proxy_pid, 2.0)
    return {
        "base_kb": base,
        "held_kb": held,
        "after_kb": after,
        "per_stream_kb": (held - base) / n,
        "upstream_per_stream_kb": (up_held - up_base) / n,
        "open_s": opened,
    }


def run_path(label: str, path: str, body: bytes, n: int) -> dict[str, float]:
    """Fresh upstream and proxy processes per path: freed memory is kept by the
    allocator, so a second path measured in the same process would reuse the first's."""
    up_port, px_port = free_port(), free_port()
    up_cmd = uvicorn("bench.servers.idle_upstream:app", up_port, "--backlog", "4096")
    px_cmd = [PY, "-m", "proxai_asgi", "--port", str(px_port), "--upstream-protocol",
              "openai_chat_completions", "--upstream-url", f"http://127.0.0.1:{up_port}/v1",
              "--log-level", "warning"]  # fmt: skip
    with ExitStack() as es:
        up = es.enter_context(process(up_cmd, up_port))
        px = es.enter_context(process(px_cmd, px_port))
        return asyncio.run(measure(px.pid, up.pid, px_port, path, body, n))


def main() -> None:
    n = int(os.environ.get("IDLE_STREAMS", "500"))
    print(f"{n} concurrent idle streams (first event sent, then nothing), proxy VmRSS:")
    print(
        "| path | RSS before | RSS with N open | per open stream | after close | "
        "upstream (bare uvicorn) per stream |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for label, (path, obj) in BODIES.items():
        r = run_path(label, path, json.dumps(obj).encode(), n)
        print(
            f"| {label} | {r['base_kb'] / 1024:.1f} MB | {r['held_kb'] / 1024:.1f} MB | "
            f"{r['per_stream_kb']:.1f} KB | {r['after_kb'] / 1024:.1f} MB | "
            f"{r['upstream_per_stream_kb']:.1f} KB |",
            flush=True,
        )


if __name__ == "__main__":
    main()
