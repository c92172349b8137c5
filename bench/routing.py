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
- proxy CPU per event of a paced stream (``--paced-deltas``, 0.2 ms between frames:
  one frame a read, where a cost per read shows; the stream's own costs included);
- proxy CPU per small non-streamed request, and its added time (the same request sent
  straight to the upstream subtracted; p50);
- a short stream's (three deltas) added time to its first event and to its first
  content (p50): the hold-back moves the events before the content, not the content.
Every figure is a ratio within the run: ``routed / single``, ``single / before``, and
the control ``again / single``. ``--accounting`` (issue 29) measures instead
``accounted``: ``single`` with ``metrics=True``, a SQLite ``ledger=`` and
``cost_header=True`` (``BENCH_ACCOUNTING=on``), against ``single`` and the control.
Proxies on the first CPU, upstream and client on the
others (as ``--pin`` elsewhere), unless ``--no-pin``. ``--redis``: the routing state
(and the store) of every proxy in a ``redis-server`` started here, on the client's CPU.

    .venv/bin/python -m bench.routing   # --rounds 7 --deltas 4000 --paced-deltas 400 --requests 20
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
PROXIES = ("single", "again", "routed", "accounted", "before")
# (numerator, denominator, column title)
RATIOS = (("routed", "single", "routed / single"), ("single", "before", "single / before"),
          ("accounted", "single", "accounted / single"),
          ("again", "single", "control: again / single"))  # fmt: skip
MEASURES = (
    ("cpu_event", "proxy CPU per saturated event"),
    ("cpu_paced", "proxy CPU per paced event (one frame a read)"),
    ("stream_time", "a saturated stream's time to its end (median)"),
    ("cpu_request", "proxy CPU per small request"),
    ("added", "added time, small request (p50)"),
    ("added_first", "added time to a short stream's first event (p50)"),
    ("added_content", "added time to a short stream's first content (p50)"),
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


def first_event(client: httpx.Client, url: str, body: dict[str, object]) -> tuple[float, float]:
    """Milliseconds to a stream's first event and to its first content (the synthetic
    stream's first text, ``tok0``, in any protocol); the stream is read to its end."""
    t = time.perf_counter()
    first = content = 0.0
    seen = b""
    with client.stream("POST", url, json=body) as r:
        r.raise_for_status()
        for chunk in r.iter_raw():
            if not first and b"data:" in chunk:
                first = time.perf_counter() - t
            if not content:
                seen += chunk
                if b"tok0" in seen:
                    content = time.perf_counter() - t
    return first * 1000, content * 1000


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
        self.paced_cpu = 0.0
        self.paced_events = 0
        self.request_cpu = 0.0
        self.requests = 0
        self.latency: list[float] = []
        self.first: list[float] = []
        self.content: list[float] = []

    def figures(self, direct: list[list[float]]) -> dict[str, float]:
        med = statistics.median
        return {
            "cpu_event": self.stream_cpu / self.events * 1e6,
            "cpu_paced": self.paced_cpu / self.paced_events * 1e6,
            "stream_time": med(self.seconds) * 1000,
            "cpu_request": self.request_cpu / self.requests * 1e6,
            "added": med(self.latency) - med(direct[0]),
            "added_first": med(self.first) - med(direct[1]),
            "added_content": med(self.content) - med(direct[2]),
        }


class Bench:
    """The upstream, the client, and what has been measured so far."""

    def __init__(self, args: argparse.Namespace, before: Path | None, es: ExitStack) -> None:
        self.args = args
        self.before = before
        self.env = {**os.environ, "BENCH_DELTAS": str(args.deltas)}
        self.env["BENCH_PACED_DELTAS"] = str(args.paced_deltas)
        cpus: tuple[set[int] | None, set[int] | None] = split_cpus() if args.pin else (None, None)
        self.proxy_cpus, load_cpus = cpus
        if load_cpus is not None:
            os.sched_setaffinity(0, load_cpus)
        port = free_port()
        cmd = uvicorn("bench.servers.stream_upstream:app", port)
        es.enter_context(process(cmd, port, self.env, cpus=load_cpus))
        self.upstream = f"http://127.0.0.1:{port}"
        self.client = es.enter_context(httpx.Client(timeout=120))
        self.store: dict[str, str] = {}
        if args.redis:  # the routing state (and the store) in a real redis-server
            port = free_port()
            cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"]
            es.enter_context(process(cmd, port, cpus=load_cpus))
            self.store = {"BENCH_STORE": f"redis://127.0.0.1:{port}/0"}
            self.before = before = None  # its proxy knows no store: it would mix two
        skip = {"routed"} if args.accounting else {"accounted"}
        if before is None:
            skip.add("before")
        self.names = [p for p in PROXIES if p not in skip]
        self.pairs: list[Pair] = [(cl, up) for up in PROTOCOLS for cl in PROTOCOLS]
        self.samples = {(p, pair): Samples() for p in self.names for pair in self.pairs}
        self.direct: dict[str, list[list[float]]] = {up: [[], [], []] for up in PROTOCOLS}
        self.counts = {up: len(frames(synthetic(FULL[up], args.deltas))) for up in PROTOCOLS}
        self.paced = {up: len(frames(synthetic(FULL[up], args.paced_deltas))) for up in PROTOCOLS}

    def start(self, name: str, es: ExitStack) -> tuple[str, int]:
        """A fresh ``name`` proxy, warmed up (connections, codecs, caches)."""
        port = free_port()
        env = {**self.env, **self.store, "BENCH_UPSTREAM": self.upstream, "BENCH_ROUTING": "off"}
        if name == "routed":
            env["BENCH_ROUTING"] = "on"
        if name == "accounted":
            env["BENCH_ACCOUNTING"] = "on"
        tree = self.before if name == "before" and self.before is not None else ROOT
        cmd = uvicorn("bench.servers.default_proxy:app", port)
        proc = es.enter_context(process(cmd, port, env, tree, cpus=self.proxy_cpus))
        base = f"http://127.0.0.1:{port}"
        for cl, up in self.pairs:
            for stream in (True, False):
                path, body = request_for(cl, up, stream=stream, short=True)
                self.client.post(base + path, json=body).raise_for_status()
        return base, proc.pid

    def round(self, r: int) -> None:
        """Fresh processes every round, so that what differs between two processes of
        the same code (memory layout, hash seeds) averages out like the rest."""
        names = self.names
        order = names[r % len(names) :] + names[: r % len(names)]
        print(f"round {r + 1} of {self.args.rounds}: {', '.join(order)}", flush=True)
        n, client, url = self.args.requests, self.client, self.upstream
        for up in PROTOCOLS:
            path, body = request_for(up, up, stream=False)
            self.direct[up][0] += [timed_post(client, url + path, body) for _ in range(n)]
            path, body = request_for(up, up, stream=True, short=True)
            for _ in range(n):
                first, content = first_event(client, url + path, body)
                self.direct[up][1].append(first)
                self.direct[up][2].append(content)
        with ExitStack() as es:
            proxies = {name: self.start(name, es) for name in order}
            for pair in self.pairs:
                for name in order:
                    self.measure(pair, *proxies[name], self.samples[(name, pair)])

    def measure(self, pair: Pair, base: str, pid: int, s: Samples) -> None:
        cl, up = pair
        n, client = self.args.requests, self.client
        path, body = request_for(cl, up, stream=True)
        cpu0 = cpu_seconds(pid)
        s.seconds.append(one_stream(client, base + path, body)[1])
        s.stream_cpu += cpu_seconds(pid) - cpu0
        s.events += self.counts[up]
        path, body = request_for(cl, up, stream=True, paced=True)
        cpu0 = cpu_seconds(pid)
        one_stream(client, base + path, body)
        s.paced_cpu += cpu_seconds(pid) - cpu0
        s.paced_events += self.paced[up]
        path, body = request_for(cl, up, stream=False)
        cpu0 = cpu_seconds(pid)
        s.latency += [timed_post(client, base + path, body) for _ in range(n)]
        s.request_cpu += cpu_seconds(pid) - cpu0
        s.requests += n
        path, body = request_for(cl, up, stream=True, short=True)
        for _ in range(n):
            first, content = first_event(client, base + path, body)
            s.first.append(first)
            s.content.append(content)


def measure(args: argparse.Namespace, before: Path | None) -> dict[str, dict[str, float]]:
    """Per-pair figures of every proxy: ``{"single chat<-chat": {measure: value}}``."""
    with ExitStack() as es:
        bench = Bench(args, before, es)
        for r in range(args.rounds):
            bench.round(r)
    return {
        f"{name} {cl}<-{up}": s.figures(bench.direct[up])
        for (name, (cl, up)), s in bench.samples.items()
    }


def report(fig: dict[str, dict[str, float]]) -> None:
    names = [p for p in PROXIES if any(k.startswith(p + " ") for k in fig)]
    pairs = [f"{cl}<-{up}" for up in PROTOCOLS for cl in PROTOCOLS]
    units = {"cpu_event": "µs", "cpu_paced": "µs", "cpu_request": "µs"}
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
    parser.add_argument("--paced-deltas", type=int, default=400)
    parser.add_argument("--requests", type=int, default=20, help="per pair, proxy and round")
    parser.add_argument(
        "--before", default="85581ee", help="the commit (or checkout) to compare; '' for none"
    )
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    parser.add_argument(
        "--redis", action="store_true", help="every proxy with store=redis:// (no 'before')"
    )
    parser.add_argument(
        "--accounting",
        action="store_true",
        help="metrics, a SQLite ledger and the cost header against a plain route (no 'before')",
    )
    args = parser.parse_args()
    if args.accounting:
        args.before = ""
    with tempfile.TemporaryDirectory() as tmp:
        before = extract(args.before, Path(tmp)) if args.before else None
        report(measure(args, before))


if __name__ == "__main__":
    main()
