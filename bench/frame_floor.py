"""Issue 16 §1's CPU per event against the floor of forwarding a frame in Python.

The proxy's CPU per streamed event, pinned (the proxies on the first CPU, the upstream
and this client on the others, as ``bench/default_path.py --pin``), for:

- ``tcp``: a TCP relay on asyncio protocols (``bench/servers/tcp_relay.py``): a socket read
  and a socket write per read, nothing else;
- ``asgi``: an ASGI app under uvicorn that sends every read of the upstream on as one
  body message (``bench/servers/asgi_relay.py``): the floor of any ASGI middleware;
- ``default``: ``ProxaiMiddleware`` as a user mounts it (``bench/servers/default_proxy.py``),
  Chat passed through and translated for Anthropic and Responses clients;

each on asyncio with h11 and on uvloop with httptools (``NAME@uvloop``; the TCP relay
has no HTTP parser). All streams are the same Chat stream (``--deltas`` text deltas and
two tool calls from ``bench/servers/stream_upstream.py``, one frame per write), interleaved
proxy by proxy, run by run. CPU is the proxy process's (``/proc``), split into its own
code and the kernel.

    .venv/bin/python -m bench.frame_floor          # --runs 9 --deltas 4000
"""

from __future__ import annotations

import argparse
import os
import statistics
from contextlib import ExitStack

import httpx

from bench._common import (
    PY,
    Row,
    frames,
    free_port,
    process,
    request_for,
    split_cpus,
    synthetic,
    uvicorn,
)

PROXIES = ("tcp", "tcp@uvloop", "asgi", "asgi@uvloop", "default", "default@uvloop")
# (client protocol, path through the proxy): what each proxy is asked for
PAIRS = {"tcp": ("chat",), "asgi": ("chat",), "default": ("chat", "anthropic", "responses")}


def _command(name: str, fast: bool, port: int, upstream_port: int) -> list[str]:
    if name == "tcp":
        loop = "uvloop" if fast else "asyncio"
        return [PY, "-m", "bench.servers.tcp_relay", "--port", str(port), "--upstream",
                str(upstream_port), "--loop", loop]  # fmt: skip
    app = "bench.servers.asgi_relay:app" if name == "asgi" else "bench.servers.default_proxy:app"
    return uvicorn(app, port, fast=fast)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--proxies", default=",".join(PROXIES), type=lambda s: s.split(","))
    args = parser.parse_args()
    proxy_cpus, load_cpus = split_cpus()
    os.sched_setaffinity(0, load_cpus)
    env = {**os.environ, "BENCH_DELTAS": str(args.deltas)}
    up_port = free_port()
    events = len(frames(synthetic("openai_chat_completions", args.deltas)))
    with ExitStack() as es:
        up_cmd = uvicorn("bench.servers.stream_upstream:app", up_port)
        es.enter_context(process(up_cmd, up_port, env, cpus=load_cpus))
        penv = {**env, "BENCH_UPSTREAM": f"http://127.0.0.1:{up_port}"}
        penv["BENCH_UPSTREAM_PORT"] = str(up_port)
        servers: dict[str, tuple[str, int]] = {}
        for proxy in args.proxies:
            name, _, loop = proxy.partition("@")
            port = free_port()
            cmd = _command(name, loop == "uvloop", port, up_port)
            proc = es.enter_context(process(cmd, port, penv, cpus=proxy_cpus))
            servers[proxy] = (f"http://127.0.0.1:{port}", proc.pid)
        client = es.enter_context(httpx.Client(timeout=120))
        rows = {
            (proxy, cl): Row(events, 0)
            for proxy in args.proxies
            for cl in PAIRS[proxy.partition("@")[0]]
        }
        for warm in (True, False):
            for _ in range(1 if warm else args.runs):
                for (proxy, cl), row in rows.items():
                    base, pid = servers[proxy]
                    path, body = request_for(cl, "chat", stream=True)
                    if warm:
                        client.post(base + path, json=body).raise_for_status()
                    else:
                        row.stream(client, base + path, body, pid)
    print(f"{args.deltas} deltas, {events} upstream events per stream, median of {args.runs}")
    print("| proxy | client <- upstream | events/s | CPU µs per event | own code | kernel |")
    print("|---|---|---:|---:|---:|---:|")
    for (proxy, cl), row in rows.items():
        per_event = row.cpu / row.events * 1e6
        user, kernel = row.ticks
        share = kernel / max(1, user + kernel)
        print(
            f"| {proxy} | {cl} <- chat | {statistics.median(row.rates):,.0f} "
            f"| {per_event:.1f} | {per_event * (1 - share):.1f} | {per_event * share:.1f} |"
        )


if __name__ == "__main__":
    main()
