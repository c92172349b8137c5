"""The default middleware's own CPU, measured in its process: per small non-streamed
request and per event of a saturated stream, for every client <- upstream pair, against
an upstream in another process (``bench/servers/stream_upstream.py``, http or https with a
test CA). The middleware is called as an ASGI server calls it, so the figure is the
middleware's work plus its upstream connection's (sockets, TLS), without the ASGI
server's; ``time.process_time`` has none of ``/proc``'s 10 ms ticks.

Two checkouts compare in one run: each round runs every tree once, in turn, each in a
fresh process (the tree's own ``proxai_asgi`` and default proxy, this checkout's
inputs), so that load from outside hits them alike.

    .venv/bin/python scripts/default_cpu.py --trees .,/tmp/base --scheme https --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAIRS = [(c, u) for u in ("chat", "responses", "anthropic", "gemini")
         for c in ("chat", "responses", "anthropic", "gemini")]  # fmt: skip


async def _call(
    app: Any, path: str, body: dict[str, object], on_body: Callable[[bytes], None]
) -> None:
    """One request through ``app``, as an ASGI server makes it."""
    raw = json.dumps(body).encode()
    route, _, query = path.partition("?")
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
               (b"content-length", b"%d" % len(raw))]  # fmt: skip
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": route, "raw_path": route.encode(),
             "query_string": query.encode(), "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}  # fmt: skip
    done = asyncio.Event()
    first = True

    async def receive() -> dict[str, object]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": raw, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200, message
        elif message["type"] == "http.response.body":
            on_body(message.get("body", b""))
            if not message.get("more_body"):
                done.set()

    await app(scope, receive, send)


def _tree_modules() -> tuple[Any, Any]:
    """In a tree's process: this checkout's bench helpers (the same inputs for every
    tree), run on the tree's ``proxai_asgi``, and the tree's own default proxy."""
    spec = importlib.util.spec_from_file_location("bench_common", ROOT / "bench" / "_common.py")
    assert spec is not None and spec.loader is not None
    common = importlib.util.module_from_spec(spec)
    sys.modules["bench_common"] = common  # its dataclasses look their module up
    spec.loader.exec_module(common)
    servers = Path.cwd() / "bench" / "servers" / "default_proxy.py"
    name = "bench.servers.default_proxy" if servers.exists() else "bench.default_proxy"
    return common, importlib.import_module(name)


async def _measure(requests: int, streams: int) -> dict[str, list[float]]:
    """In a tree's process: µs of CPU per request and per upstream event, per pair."""
    common, proxy = _tree_modules()
    FULL, request_for, frames, synthetic = (
        common.FULL, common.request_for, common.frames, common.synthetic
    )  # fmt: skip
    app = proxy.app
    events = {u: len(frames(synthetic(FULL[u], int(os.environ["BENCH_DELTAS"])))) for u in FULL}
    out: dict[str, list[float]] = {}
    for client, upstream in PAIRS:
        small = request_for(client, upstream, stream=False)
        stream = request_for(client, upstream, stream=True)
        for _ in range(10):  # warm-up: connections, codecs, caches
            await _call(app, *small, lambda _: None)
        await _call(app, *stream, lambda _: None)
        t = time.process_time()
        for _ in range(requests):
            await _call(app, *small, lambda _: None)
        per_request = (time.process_time() - t) / requests * 1e6
        t = time.process_time()
        for _ in range(streams):
            await _call(app, *stream, lambda _: None)
        per_event = (time.process_time() - t) / (streams * events[upstream]) * 1e6
        out[f"{client}<-{upstream}"] = [per_request, per_event]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", default=".", help="checkouts to compare, comma-separated")
    parser.add_argument("--scheme", default="http", choices=["http", "https"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--streams", type=int, default=3)
    parser.add_argument("--deltas", type=int, default=4000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_measure(args.requests, args.streams))))
        return
    sys.path.insert(0, str(ROOT))  # not in the child: there the tree's package comes first
    from bench._common import free_port, make_certs, process, uvicorn

    trees = [Path(t).resolve() for t in args.trees.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        certs = Path(tmp)
        tls = make_certs(certs)
        port = free_port()
        env = {**os.environ, "BENCH_DELTAS": str(args.deltas)}
        env["BENCH_UPSTREAM"] = f"{args.scheme}://127.0.0.1:{port}"
        env["SSL_CERT_FILE"] = str(certs / "ca.pem")
        up_app = "bench.servers.stream_upstream:app"
        cmd = uvicorn(up_app, port, *(tls if args.scheme == "https" else []))
        results: dict[Path, list[dict[str, list[float]]]] = {t: [] for t in trees}
        with process(cmd, port, env):
            for _ in range(args.rounds):
                for tree in trees:
                    # This file, importing the tree's proxai_asgi and proxy (an older
                    # tree may not have this file).
                    counts = ["--requests", str(args.requests), "--streams", str(args.streams)]
                    child = [sys.executable, __file__, "--child", *counts]
                    cenv = {**env, "PYTHONPATH": str(tree)}
                    done = subprocess.run(
                        child, cwd=tree, env=cenv, capture_output=True, check=True
                    )
                    results[tree].append(json.loads(done.stdout.decode().splitlines()[-1]))
    print(f"{args.scheme}:// upstream, median of {args.rounds} rounds: proxy CPU µs per small")
    print("request | per saturated upstream event")
    print("pair                  | " + " | ".join(f"{t.name:>22}" for t in trees))
    for client, upstream in PAIRS:
        key = f"{client}<-{upstream}"
        cells = []
        for tree in trees:
            request = statistics.median(r[key][0] for r in results[tree])
            event = statistics.median(r[key][1] for r in results[tree])
            cells.append(f"{request:8.0f} | {event:6.2f}")
        print(f"{key:<21} | " + " | ".join(f"{c:>22}" for c in cells))
    for tree in trees:
        requests = [statistics.median(r[f"{c}<-{u}"][0] for r in results[tree]) for c, u in PAIRS]
        events = [statistics.median(r[f"{c}<-{u}"][1] for r in results[tree]) for c, u in PAIRS]
        print(f"{tree}: per request sum {sum(requests):.0f} µs (max {max(requests):.0f}); "
              f"per event {min(events):.2f}-{max(events):.2f} µs")  # fmt: skip


if __name__ == "__main__":
    main()
