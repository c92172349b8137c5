"""Issue 28: what routing costs a healthy request (one that the first target answers).

Processes on 127.0.0.1: the fake upstream (``bench/servers/stream_upstream.py``, all
four protocols, instant answers) and four proxies in front of it
(``bench/servers/default_proxy.py``, one route per upstream protocol):

- ``single``: a plain route, one upstream, no key: every request still goes through the
  attempt loop (``serving/failover.py``) and is held back until its first content
  (``serving/attempts.py``), but the plan has one target and asks no state;
- ``again``: the same, a second process: the control, whose ratio to ``single`` is
  what this machine's noise looks like in this run;
- ``routed``: each route with a two-key pool and a fallback of another protocol
  (``BENCH_ROUTING=on``): the cooldown look-up, the session key (from a hash of the
  conversation, the requests carry no session header), the affinity look-up and
  binding after the answer, in the process's memory state;
- ``before``: ``single`` served from the commit before the routing core (``--before``,
  extracted with ``git archive`` into a temporary directory, or a checkout's
  directory): what the hold-back and the attempt loop cost everyone.

For every client <- upstream pair (the four pass-through and the twelve translated),
interleaved round by round with the proxies' order rotated each time:
- proxy CPU per event of a saturated stream (``--deltas`` text deltas, two tool calls),
  from ``/proc`` (own code + kernel), and the stream's time to its end (median);
- proxy CPU per small non-streamed request, and its added time (the same request sent
  straight to the upstream subtracted; p50);
- a short stream's (three deltas) added time to its first event (p50).
Every figure is a ratio within the run: ``routed / single``, ``single / before``, and
the control ``again / single``. Proxies on the first CPU, upstream and client on the
others (as ``--pin`` elsewhere), unless ``--no-pin``.

    .venv/bin/python -m bench.routing              # --rounds 7 --deltas 4000 --requests 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from bench._common import (
    FULL,
    ROOT,
    cpu_seconds,
    frames,
    free_port,
    one_stream,
    process,
    request_for,
    split_cpus,
    synthetic,
    uvicorn,
)

PROTOCOLS = ("chat", "responses", "anthropic", "gemini")
PROXIES = ("single", "again", "routed", "before")
# (numerator, denominator, column title)
RATIOS = (("routed", "single", "routed / single"), ("single", "before", "single / before"),
          ("again", "single", "control: again / single"))  # fmt: skip
MEASURES = (
    ("cpu_event", "proxy CPU per saturated event"),
    ("stream_time", "a saturated stream's time to its end (median)"),
    ("cpu_request", "proxy CPU per small request"),
    ("added", "added time, small request (p50)"),
    ("added_first", "added time to a short stream's first event (p50)"),
)
Pair = tuple[str, str]  # client, upstream


def extract(commit: str, into: Path) -> Path:
    """``commit``'s tree, as files (no git worktree to clean up afterwards); a
    directory is a checkout already."""
    if Path(commit).is_dir():
        return Path(commit)
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


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


class Samples:
    """Everything measured of one proxy on one pair, over every round."""

    def __init__(self) -> None:
        self.stream_cpu = 0.0
        self.events = 0
        self.seconds: list[float] = []
        self.request_cpu = 0.0
        self.requests = 0
        self.latency: list[float] = []
        self.first: list[float] = []


def measure(args: argparse.Namespace, before: Path | None) -> dict[str, dict[str, float]]:
    """Per-pair figures of every proxy: ``{"single chat<-chat": {measure: value}}``."""
    env = {**os.environ, "BENCH_DELTAS": str(args.deltas)}
    proxy_cpus, load_cpus = split_cpus() if args.pin else (None, None)
    if load_cpus is not None:
        os.sched_setaffinity(0, load_cpus)
    names = [p for p in PROXIES if p != "before" or before is not None]
    pairs: list[Pair] = [(cl, up) for up in PROTOCOLS for cl in PROTOCOLS]
    samples = {(p, pair): Samples() for p in names for pair in pairs}
    direct: dict[str, list[list[float]]] = {up: [[], []] for up in PROTOCOLS}
    counts = {up: len(frames(synthetic(FULL[up], args.deltas))) for up in PROTOCOLS}
    with ExitStack() as es:
        up_port = free_port()
        up_cmd = uvicorn("bench.servers.stream_upstream:app", up_port)
        es.enter_context(process(up_cmd, up_port, env, cpus=load_cpus))
        upstream = f"http://127.0.0.1:{up_port}"
        proxies: dict[str, tuple[str, int]] = {}
        for name in names:
            port = free_port()
            penv = {**env, "BENCH_UPSTREAM": upstream, "BENCH_ROUTING": "off"}
            if name == "routed":
                penv["BENCH_ROUTING"] = "on"
            tree = before if name == "before" and before is not None else ROOT
            cmd = uvicorn("bench.servers.default_proxy:app", port)
            proc = es.enter_context(process(cmd, port, penv, tree, cpus=proxy_cpus))
            proxies[name] = (f"http://127.0.0.1:{port}", proc.pid)
        client = es.enter_context(httpx.Client(timeout=120))
        for name in names:  # warm-up: connections, codecs, caches
            base, _ = proxies[name]
            for cl, up in pairs:
                for stream in (True, False):
                    path, body = request_for(cl, up, stream=stream, short=True)
                    client.post(base + path, json=body).raise_for_status()
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            print(f"round {r + 1} of {args.rounds}: {', '.join(order)}", flush=True)
            n = args.requests
            for up in PROTOCOLS:
                path, body = request_for(up, up, stream=False)
                direct[up][0] += [timed_post(client, upstream + path, body) for _ in range(n)]
                path, body = request_for(up, up, stream=True, short=True)
                direct[up][1] += [first_event(client, upstream + path, body) for _ in range(n)]
            for pair in pairs:
                cl, up = pair
                for name in order:
                    base, pid = proxies[name]
                    s = samples[(name, pair)]
                    path, body = request_for(cl, up, stream=True)
                    cpu0 = cpu_seconds(pid)
                    s.seconds.append(one_stream(client, base + path, body)[1])
                    s.stream_cpu += cpu_seconds(pid) - cpu0
                    s.events += counts[up]
                    path, body = request_for(cl, up, stream=False)
                    cpu0 = cpu_seconds(pid)
                    s.latency += [timed_post(client, base + path, body) for _ in range(n)]
                    s.request_cpu += cpu_seconds(pid) - cpu0
                    s.requests += args.requests
                    path, body = request_for(cl, up, stream=True, short=True)
                    s.first += [first_event(client, base + path, body) for _ in range(n)]
    med = statistics.median
    out: dict[str, dict[str, float]] = {}
    for (name, (cl, up)), s in samples.items():
        out[f"{name} {cl}<-{up}"] = {
            "cpu_event": s.stream_cpu / s.events * 1e6,
            "stream_time": med(s.seconds) * 1000,
            "cpu_request": s.request_cpu / s.requests * 1e6,
            "added": med(s.latency) - med(direct[up][0]),
            "added_first": med(s.first) - med(direct[up][1]),
        }
    return out


def report(fig: dict[str, dict[str, float]]) -> None:
    names = [p for p in PROXIES if any(k.startswith(p + " ") for k in fig)]
    pairs = [f"{cl}<-{up}" for up in PROTOCOLS for cl in PROTOCOLS]
    units = {"cpu_event": "µs", "cpu_request": "µs"}
    print("\nper pair (CPU in µs, times in ms):")
    print(f"{'pair':<22}" + "".join(f"| {m:<11}" for m, _ in MEASURES))
    for pair in pairs:
        for name in names:
            f = fig[f"{name} {pair}"]
            cells = "".join(f"| {f[m]:<11.3f}" for m, _ in MEASURES)
            print(f"{name + ' ' + pair:<22}{cells}")
    ratios = [r for r in RATIOS if r[0] in names and r[1] in names]
    head = " | ".join(f"{title}: pass-through | translated" for _, _, title in ratios)
    print("\nmedian of pairs (lowest-highest); pass-through: 4 pairs, translated: 12")
    print(f"| | {head} |")
    for m, title in MEASURES:
        row: list[str] = []
        for a, b, _ in ratios:
            for translated in (False, True):
                rs = [
                    fig[f"{a} {p}"][m] / fig[f"{b} {p}"][m]
                    for p in pairs
                    if (p.split("<-")[0] != p.split("<-")[1]) == translated
                ]
                row.append(f"{statistics.median(rs):.2f}x ({min(rs):.2f}-{max(rs):.2f})")
        print(f"| {title} | " + " | ".join(row) + " |")
    for m, title in MEASURES:
        unit = units.get(m, "ms")
        means = {n: statistics.median(fig[f"{n} {p}"][m] for p in pairs) for n in names}
        each = ", ".join(f"{n} {v:.3f} {unit}" for n, v in means.items())
        print(f"{title}, median of pairs: {each}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--deltas", type=int, default=4000)
    parser.add_argument("--requests", type=int, default=20, help="per pair, proxy and round")
    parser.add_argument(
        "--before", default="85581ee", help="the commit (or checkout) to compare; '' for none"
    )
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = extract(args.before, Path(tmp)) if args.before else None
        report(measure(args, before))


if __name__ == "__main__":
    main()
