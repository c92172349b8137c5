"""Issue 16 §1: the path a user gets with no options, for http:// and https:// upstreams.

Processes on 127.0.0.1: the fake upstream (``bench/servers/stream_upstream.py``, all four
protocols) once over http and once over https (a test CA made here with trustme), and
for each scheme two proxies (``bench/servers/default_proxy.py``): ``ProxaiMiddleware`` with no
performance options ("default"), and the same with ``lean_http=False`` ("httpx", the
default before this change). The client (httpx, counting ``data:`` in raw bytes so that
it is not the bottleneck) measures, for every pair of client and upstream protocol:

- events/s of a saturated stream (``--deltas`` text deltas + two tool calls), median
  of ``--runs``, and the proxy process's CPU per event over those runs (/proc);
- the same stream paced (0.2 ms between upstream frames, ``--paced-deltas``): proxy
  CPU per event;
- latency of a small non-streamed request, p50 over ``--requests``, against the same
  request sent straight to the upstream (over TLS for https: the client trusts the
  test CA), i.e. the time the proxy adds to the first byte;
- the same for a short stream (three deltas): the time to its first event, p50 over
  ``--requests``, one stream after another as an agent loop sends them (a proxy that
  cannot reuse its upstream connection after a stream pays a connect, over https a
  handshake, on the next one).

Measurements of the two proxies are interleaved direction by direction.
``--base-tree DIR --transports default,base`` measures instead the default proxy of
this checkout against the same proxy served from another checkout (a worktree of the
commit to compare with), interleaved the same way. A transport named ``NAME@uvloop``
(``--transports default,default@uvloop``) is that proxy served by uvicorn on uvloop with
httptools (what ``uvicorn`` picks by itself when they are installed, as
``proxai-asgi[server]`` installs them); every other proxy, and the upstream, runs on
asyncio with h11, named explicitly so that installing them changes nothing else.

    .venv/bin/python -m bench.default_path                  # --schemes http,https
"""

from __future__ import annotations

import argparse
import os
import ssl
import statistics
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench._common import (
    FULL,
    ROOT,
    Row,
    frames,
    free_port,
    make_certs,
    one_stream,
    process,
    request_for,
    split_cpus,
    synthetic,
    uvicorn,
)

PROTOCOLS = ("chat", "responses", "anthropic", "gemini")
TRANSPORTS = ("default", "httpx")
TARGETS = "translated >= 0.9x pass-through events/s; added p50 <= 0.75 ms; CPU <= 8 µs/event"


def proxy_app(tree: Path) -> str:
    """The default proxy's module in ``tree``, wherever that checkout keeps it."""
    if (tree / "bench" / "servers" / "default_proxy.py").exists():
        return "bench.servers.default_proxy:app"
    return "bench.default_proxy:app"  # a checkout from before bench/servers/


def first_event(client: httpx.Client, url: str, body: dict[str, object]) -> float:
    """Milliseconds to a stream's first event; the stream is read to its end."""
    t = time.perf_counter()
    first = 0.0
    with client.stream("POST", url, json=body) as r:
        r.raise_for_status()
        for chunk in r.iter_raw():
            if not first and b"data:" in chunk:
                first = time.perf_counter() - t
    return first * 1000


def timed_post(client: httpx.Client, url: str, body: dict[str, object]) -> float:
    t = time.perf_counter()
    client.post(url, json=body).raise_for_status()
    return (time.perf_counter() - t) * 1000


def measure(scheme: str, args: argparse.Namespace, certs: Path) -> Results:
    """Every measurement interleaved: run by run, each transport and each client
    protocol in turn, so that load from outside hits all of them alike."""
    env = {**os.environ, "BENCH_DELTAS": str(args.deltas)}
    env["BENCH_PACED_DELTAS"] = str(args.paced_deltas)
    up_port = free_port()
    tls = ["--ssl-certfile", str(certs / "cert.pem"), "--ssl-keyfile", str(certs / "key.pem")]
    rows: dict[tuple[str, str, str], Row] = {}
    direct: dict[str, list[float]] = {up: [] for up in PROTOCOLS}
    direct_first: dict[str, list[float]] = {up: [] for up in PROTOCOLS}
    # --pin: the proxies on the first CPU, the load (upstream and this client) on the
    # others, as in a deployment where the model server and the client are elsewhere
    proxy_cpus, load_cpus = args.cpus
    if load_cpus is not None:
        os.sched_setaffinity(0, load_cpus)
    with ExitStack() as es:
        up_app = "bench.servers.stream_upstream:app"
        up_cmd = uvicorn(up_app, up_port, *(tls if scheme == "https" else []))
        es.enter_context(process(up_cmd, up_port, env, cpus=load_cpus))
        upstream = f"{scheme}://127.0.0.1:{up_port}"
        proxies: dict[str, tuple[str, int]] = {}
        for transport in args.transports:
            port = free_port()
            name, _, server = transport.partition("@")
            penv = {**env, "BENCH_UPSTREAM": upstream, "BENCH_TRANSPORT": name}
            penv["SSL_CERT_FILE"] = str(certs / "ca.pem")
            # "base": this proxy as another checkout has it (uvicorn imports from cwd)
            tree = Path(args.base_tree) if name == "base" else ROOT
            cmd = uvicorn(proxy_app(tree), port, fast=server == "uvloop")
            proc = es.enter_context(process(cmd, port, penv, tree, cpus=proxy_cpus))
            proxies[transport] = (f"http://127.0.0.1:{port}", proc.pid)
        verify = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        client = es.enter_context(httpx.Client(timeout=120, verify=verify))
        counts = {up: len(frames(synthetic(FULL[up], args.deltas))) for up in PROTOCOLS}
        paced_counts = {up: len(frames(synthetic(FULL[up], args.paced_deltas))) for up in PROTOCOLS}
        pairs = [(t, cl, up) for up in PROTOCOLS for t in args.transports for cl in PROTOCOLS]
        for key in pairs:  # warm-up: connections, codecs, caches
            rows[key] = Row(counts[key[2]], paced_counts[key[2]])
            base, _ = proxies[key[0]]
            path, body = request_for(key[1], key[2], stream=True)
            one_stream(client, base + path, body)
        for _ in range(args.runs):
            for t, cl, up in pairs:
                base, pid = proxies[t]
                path, body = request_for(cl, up, stream=True)
                rows[(t, cl, up)].stream(client, base + path, body, pid)
        for _ in range(args.paced_runs):
            for t, cl, up in pairs:
                base, pid = proxies[t]
                path, body = request_for(cl, up, stream=True, paced=True)
                rows[(t, cl, up)].paced(client, base + path, body, pid)
        for i in range(args.requests // 10 + 2):
            for up in PROTOCOLS:
                path, body = request_for(up, up, stream=False)
                samples = [timed_post(client, upstream + path, body) for _ in range(10)]
                if i >= 2:  # the first rounds warm up
                    direct[up] += samples
            for t, cl, up in pairs:
                base, _ = proxies[t]
                path, body = request_for(cl, up, stream=False)
                samples = [timed_post(client, base + path, body) for _ in range(10)]
                if i >= 2:
                    rows[(t, cl, up)].latencies += samples
        for i in range(args.requests // 10 + 2):
            for up in PROTOCOLS:
                path, body = request_for(up, up, stream=True, short=True)
                samples = [first_event(client, upstream + path, body) for _ in range(10)]
                if i >= 2:
                    direct_first[up] += samples
            for t, cl, up in pairs:
                base, _ = proxies[t]
                path, body = request_for(cl, up, stream=True, short=True)
                samples = [first_event(client, base + path, body) for _ in range(10)]
                if i >= 2:
                    rows[(t, cl, up)].first_events += samples
    direct_p50 = {up: statistics.median(v) for up, v in direct.items()}
    first_p50 = {up: statistics.median(v) for up, v in direct_first.items()}
    return Results(scheme, rows, direct_p50, first_p50, args.transports)


@dataclass
class Results:
    scheme: str
    rows: dict[tuple[str, str, str], Row]
    direct_p50: dict[str, float]
    direct_first_p50: dict[str, float]
    transports: list[str]


def report(res: Results) -> None:
    print(
        f"\n{res.scheme}:// upstream. direct p50 ms: "
        + ", ".join(f"{u} {res.direct_p50[u]:.2f}" for u in PROTOCOLS)
    )
    print(
        "client <- upstream     | events/s saturated (x pass-through) | paced (x) | "
        "proxy CPU µs/event saturated / paced | added p50 ms | added first event p50 ms"
    )
    for t in res.transports:
        print(f"[{t}]")
        worst = [9.0, 9.0, 0.0, 0.0, 0.0]
        ratios: list[float] = []  # saturated, translated pairs
        addeds: list[float] = []
        firsts: list[float] = []
        for up in PROTOCOLS:
            base = res.rows[(t, up, up)]
            for cl in PROTOCOLS:
                row = res.rows[(t, cl, up)]
                rate = statistics.median(row.rates)
                ratio = rate / statistics.median(base.rates)
                paced = statistics.median(row.paced_rates)
                paced_ratio = paced / statistics.median(base.paced_rates)
                cpu = row.cpu / row.events * 1e6
                paced_cpu = row.paced_cpu / row.paced_events * 1e6
                added = statistics.median(row.latencies) - res.direct_p50[up]
                added_first = statistics.median(row.first_events) - res.direct_first_p50[up]
                print(
                    f"{cl:>9} <- {up:<10} | {rate:8.0f} ({ratio:4.2f}x) | {paced:6.0f} "
                    f"({paced_ratio:4.2f}x) | {cpu:5.1f} / {paced_cpu:5.1f} | {added:+5.2f} "
                    f"| {added_first:+5.2f}"
                )
                firsts.append(added_first)
                worst[4] = max(worst[4], added_first)
                addeds.append(added)
                if cl != up:
                    ratios.append(ratio)
                    worst[0] = min(worst[0], ratio)
                    worst[1] = min(worst[1], paced_ratio)
                worst[2] = max(worst[2], cpu)
                worst[3] = max(worst[3], added)
        print(
            f"{res.scheme} {t}: worst translated / pass-through {worst[0]:.2f}x saturated, "
            f"{worst[1]:.2f}x paced; worst proxy CPU {worst[2]:.1f} µs/event saturated; "
            f"worst added p50 {worst[3]:+.2f} ms, first event {worst[4]:+.2f} ms"
        )
        rows = [r for (t2, _, _), r in res.rows.items() if t2 == t]
        user, kernel = (sum(r.ticks[i] for r in rows) for i in (0, 1))
        per_event = sum(r.cpu for r in rows) / sum(r.events for r in rows) * 1e6
        kernel_share = kernel / max(1, user + kernel)
        print(
            f"{res.scheme} {t}: proxy CPU per saturated event, all pairs: {per_event:.1f} µs, "
            f"{per_event * (1 - kernel_share):.1f} in the process's own code (user) and "
            f"{per_event * kernel_share:.1f} in the kernel ({kernel_share:.0%}: socket reads "
            "and writes, loopback TCP)"
        )
        print(
            f"{res.scheme} {t}: median translated / pass-through {statistics.median(ratios):.2f}x "
            f"saturated, {sum(r < 0.9 for r in ratios)} of {len(ratios)} below 0.9x; median "
            f"added p50 {statistics.median(addeds):+.2f} ms, "
            f"{sum(a <= 0.75 for a in addeds)} of {len(addeds)} pairs <= 0.75 ms; median added "
            f"first event p50 {statistics.median(firsts):+.2f} ms, "
            f"{sum(a <= 0.75 for a in firsts)} of {len(firsts)} pairs <= 0.75 ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schemes", default="http,https")
    parser.add_argument("--deltas", type=int, default=4000)
    parser.add_argument("--paced-deltas", type=int, default=400)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--paced-runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--transports", default=",".join(TRANSPORTS), type=lambda s: s.split(","))
    parser.add_argument("--base-tree", help="checkout whose proxy the transport 'base' runs")
    parser.add_argument(
        "--pin",
        action="store_true",
        help="proxies on one CPU, upstream and client on the rest (no scheduler contention)",
    )
    args = parser.parse_args()
    args.cpus = split_cpus() if args.pin else (None, None)  # before this process is pinned
    with tempfile.TemporaryDirectory() as tmp:
        certs = Path(tmp)
        make_certs(certs)
        print(f"targets: {TARGETS}")
        for scheme in args.schemes.split(","):
            report(measure(scheme, args, certs))


if __name__ == "__main__":
    main()
