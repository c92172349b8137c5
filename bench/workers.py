"""Throughput of the standalone server on 1 worker against N workers (``--workers``).

    .venv/bin/python -m bench.workers                # --workers 2 --rounds 3 --seconds 8
    .venv/bin/python -m bench.workers --before       # also the N workers as uvicorn.run
                                                     # starts them (Nagle on: the old path)

The server is the real command, ``python -m proxai_asgi --workers N``, answering from
its built-in demo upstream (a Chat Completions app inside each worker, no network hop):
every request is an Anthropic client's stream translated to Chat and back, so all the
work is the server's. The load generator is this process: a raw asyncio HTTP/1.1
client on ``--connections`` keep-alive connections, each sending its next request as
soon as the previous stream ended, counting complete 200 streams ending with
``message_stop`` (anything else is an error).

Kept fair: the same generator, connection count and request for both servers; runs
interleaved (1, N, 1, N, ...) so that load from other processes on this shared machine
hits both; each run starts after a warm-up second on every connection. The generator
takes CPU from the same two cores, so its own CPU use is printed (a generator near one
full core would be the limit, not the server), and so is the server's CPU per request
(all its processes, from /proc), which shows whether a worker got cheaper or only more
cores. So is the CPU everything else on the machine used meanwhile (and the load
average as each run starts): on a shared machine the second worker can only use what
other processes leave free. TCP segments and delayed ACKs per stream (the machine's
counters, /proc/net) show whether small writes were held back for ACKs (Nagle).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._common import Conn, Tally, free_port, raw_request  # noqa: E402

CLIENT = "anthropic_messages"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [k for k, v in parents.items() if v == p]
        out += kids
        frontier += kids
    return out


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, all cores (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields) - idle) / TICKS, sum(fields) / TICKS


def wait_for_quiet(limit: float, patience: float = 120.0) -> float:
    """Wait (at most ``patience`` seconds) until the rest of the machine uses less than
    ``limit`` cores over a second; nothing of this bench runs meanwhile. Returns the
    cores the others used in the last second looked at."""
    deadline = time.monotonic() + patience
    while True:
        busy0, _ = machine_cpu()
        t0 = time.monotonic()
        time.sleep(1.0)
        others = (machine_cpu()[0] - busy0) / (time.monotonic() - t0)
        if others < limit or time.monotonic() > deadline:
            return others


def sockets(pid: int) -> int:
    """Sockets a process holds open (its client connections, plus the listener)."""
    fds = Path(f"/proc/{pid}/fd")
    return sum(1 for fd in fds.iterdir() if os.readlink(fd).startswith("socket:"))


def tcp_counters() -> dict[str, int]:
    """The machine's TCP counters (``Tcp: OutSegs``, ``TcpExt: DelayedACKs``, ...)."""
    out: dict[str, int] = {}
    for name in ("snmp", "netstat"):
        lines = Path(f"/proc/net/{name}").read_text().splitlines()
        for head, values in zip(lines[::2], lines[1::2], strict=True):
            kind, *keys = head.split()
            kind = kind.rstrip(":")
            out.update((kind + k, int(v)) for k, v in zip(keys, values.split()[1:], strict=True))
    return out


UVICORN_RUN = (
    "import sys, uvicorn; uvicorn.run('proxai_asgi.server.cli:worker_app', factory=True, "
    "host='127.0.0.1', port=int(sys.argv[1]), workers=int(sys.argv[2]), log_level='warning')"
)


def start_server(
    workers: int, before: bool = False
) -> tuple[subprocess.Popen[bytes], int, list[int]]:
    """The server at log level warning (no line per exchange); ready when it answers
    HTTP and all its worker processes exist. ``before``: started as uvicorn.run did."""
    port = free_port()
    command = [sys.executable, "-m", "proxai_asgi", "--port", str(port)]
    command += ["--log-level", "warning", "--workers", str(workers)]
    env = dict(os.environ)
    if before:
        command = [sys.executable, "-c", UVICORN_RUN, str(port), str(workers)]
        env["PROXAI_WORKER_ARGV"] = '["--log-level", "warning"]'
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        start_new_session=True,  # its own process group: stopped as one below
    )
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise RuntimeError("the server did not start")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                ready = s.recv(64).startswith(b"HTTP/1.1 ")  # any answer
        except OSError:
            ready = False
        pids = [proc.pid, *descendants(proc.pid)]
        if ready and len(pids) >= workers + (workers > 1):
            return proc, port, pids
        time.sleep(0.2)


async def load(
    port: int, connections: int, seconds: float, pids: list[int]
) -> tuple[int, Tally, str, int]:
    """(streams in the measured seconds, their tally, sockets per worker, streams in
    all, warm-up included: what the CPU and TCP figures cover)."""
    request = raw_request(CLIENT, "openai_chat_completions")  # any model: the demo answers
    conns = [Conn(port) for _ in range(connections)]
    tally = Tally()
    measuring = False
    done = total = 0

    async def worker(conn: Conn, until: float) -> None:
        nonlocal done, total
        while time.perf_counter() < until:
            status, body = await conn.exchange(request)
            total += 1
            if measuring:
                tally.check(CLIENT, status, body)
                done += 1

    # Clients arrive one at a time (every 10 ms) and start sending at once: a burst
    # of connects lands mostly on whichever worker wakes first (its accept loop takes
    # all that is queued), while a client arriving during traffic is accepted by a
    # worker that is free, as a server's clients are.
    async def arrive(k: int, conn: Conn) -> None:
        await asyncio.sleep(0.01 * k)
        await conn.connect()
        await worker(conn, warm)

    warm = time.perf_counter() + 0.01 * connections + 1.0
    await asyncio.gather(*(arrive(k, c) for k, c in enumerate(conns)))
    measuring = True
    # sockets per worker process (connections + the shared listener)
    split = "/".join(str(n) for n in map(sockets, pids[1:] or pids) if n)
    await asyncio.gather(*(worker(c, time.perf_counter() + seconds) for c in conns))
    for c in conns:
        await c.close()
    return done, tally, split, total


def run(
    workers: int, args: argparse.Namespace, before: bool = False
) -> tuple[dict[str, float], str]:
    if args.quiet is not None:
        wait_for_quiet(args.quiet)
    proc, port, pids = start_server(workers, before)
    try:
        load_average = os.getloadavg()[0]
        tcp0 = tcp_counters()
        gen0 = resource.getrusage(resource.RUSAGE_SELF)
        cpu0 = cpu_seconds(pids)
        busy0, all0 = machine_cpu()
        t0 = time.perf_counter()
        done, tally, split, total = asyncio.run(load(port, args.connections, args.seconds, pids))
        wall = time.perf_counter() - t0  # warm-up included, as in the CPU figures
        cpu = cpu_seconds(pids) - cpu0
        busy1, all1 = machine_cpu()
        gen1 = resource.getrusage(resource.RUSAGE_SELF)
        gen = (gen1.ru_utime - gen0.ru_utime) + (gen1.ru_stime - gen0.ru_stime)
        tcp1 = tcp_counters()
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # any worker left behind
    assert not tally.errors and tally.ok == done, (tally.errors, tally.statuses)
    return {
        "rps": done / args.seconds,
        "server_cpu_ms": 1000 * cpu / total,
        "server_cores": cpu / wall,
        "generator_cores": gen / wall,
        "generator_cpu_ms": 1000 * gen / total,
        # cores busy with anything else on this shared machine (other sessions)
        "other_cores": max(0.0, (busy1 - busy0) - cpu - gen) / wall,
        "cores": (all1 - all0) / wall,
        "load_average": load_average,
        # per stream (machine-wide counters: other sessions' traffic too)
        "segments": (tcp1["TcpOutSegs"] - tcp0["TcpOutSegs"]) / total,
        "delayed_acks": (tcp1["TcpExtDelayedACKs"] - tcp0["TcpExtDelayedACKs"]) / total,
    }, split


def one_connection(workers: int, before: bool, streams: int = 40) -> list[float]:
    """Durations (ms, sorted) of ``streams`` streams one after another on one keep-alive
    connection to an otherwise idle server: what Nagle costs a stream, whatever else
    runs on the machine (it waits on the client's delayed ACK, not on a core)."""
    proc, port, _ = start_server(workers, before)
    request = raw_request(CLIENT, "openai_chat_completions")

    async def durations() -> list[float]:
        conn = Conn(port)
        out = []
        for k in range(streams + 5):  # the first 5 warm up
            t0 = time.perf_counter()
            status, body = await conn.exchange(request)
            assert status == 200 and b"message_stop" in body, (status, body[-200:])
            if k >= 5:
                out.append(1000 * (time.perf_counter() - t0))
        await conn.close()
        return sorted(out)

    try:
        return asyncio.run(durations())
    finally:
        proc.terminate()
        proc.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def independent(count: int, args: argparse.Namespace) -> float:
    """Streams/s of ``count`` single-worker servers on their own ports, each loaded by
    its own generator process with its share of the connections: what this machine
    allows when nothing is shared between the server processes."""
    servers = [start_server(1) for _ in range(count)]
    try:
        readers = []
        for _, port, pids in servers:
            r, w = os.pipe()
            if os.fork() == 0:  # a generator process
                os.close(r)
                done = asyncio.run(load(port, args.connections // count, args.seconds, pids))[0]
                os.write(w, str(done).encode())
                os._exit(0)
            os.close(w)
            readers.append(r)
        total = 0
        for r in readers:
            os.wait()
            total += int(os.read(r, 64))
        return total / float(args.seconds)
    finally:
        for proc, _, _ in servers:
            proc.terminate()
            proc.wait(30)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument(
        "--independent",
        action="store_true",
        help="instead: 1 server against N single-worker servers on N ports, a generator each",
    )
    parser.add_argument(
        "--quiet",
        type=float,
        metavar="CORES",
        help="before each run, wait (up to 2 min) until other processes use under CORES",
    )
    parser.add_argument(
        "--before",
        action="store_true",
        help="also run the N workers as uvicorn.run starts them (before serve_workers.py)",
    )
    args = parser.parse_args()
    if args.independent:
        for r in range(args.rounds):
            one, many = independent(1, args), independent(args.workers, args)
            print(
                f"round {r + 1}: 1 server {one:,.0f} streams/s; {args.workers} independent "
                f"servers {many:,.0f} streams/s ({many / one:.2f}x)",
                flush=True,
            )
        return
    n = args.workers
    kinds = [(1, False), (n, False)] + [(n, True)] * args.before
    if args.before:
        print("One keep-alive connection, 40 streams one after another, ms per stream:")
        for w, before in kinds:
            d = one_connection(w, before)
            label = f"{w} workers as uvicorn.run starts them" if before else f"{w} worker(s)"
            print(f"  {label}: median {statistics.median(d):.1f}, p90 {d[len(d) * 9 // 10]:.1f}")
    results: dict[tuple[int, bool], list[dict[str, float]]] = {k: [] for k in kinds}
    print(
        "| run | workers | streams/s | server CPU/stream | server cores "
        "| generator cores (CPU/stream) "
        "| other processes' cores | load avg | TCP segments/stream | delayed ACKs/stream "
        "| sockets per worker |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in range(args.rounds):
        for w, before in kinds:
            x, split = run(w, args, before)
            results[w, before].append(x)
            label = f"{w} (uvicorn.run, Nagle on)" if before else str(w)
            print(
                f"| {r + 1} | {label} | {x['rps']:,.0f} | {x['server_cpu_ms']:.2f} ms "
                f"| {x['server_cores']:.2f} | {x['generator_cores']:.2f} "
                f"({x['generator_cpu_ms']:.2f} ms) "
                f"| {x['other_cores']:.2f} of {x['cores']:.1f} | {x['load_average']:.2f} "
                f"| {x['segments']:.1f} | {x['delayed_acks']:.2f} | {split} |",
                flush=True,
            )
    for kind, name in [((n, False), f"{n} workers"), ((n, True), f"{n} workers (uvicorn.run)")]:
        if kind in results:
            ratios = [
                x["rps"] / one["rps"]
                for one, x in zip(results[1, False], results[kind], strict=True)
            ]
            # rounds in which other processes took under 0.15 core during both runs
            quiet = [
                ratio
                for ratio, one, x in zip(ratios, results[1, False], results[kind], strict=True)
                if max(one["other_cores"], x["other_cores"]) < 0.15
            ]
            print(
                f"{name} / 1 worker, streams/s, per round: "
                + ", ".join(f"{x:.2f}x" for x in ratios)
                + f" (median {statistics.median(ratios):.2f}x; rounds with the machine to "
                + f"ourselves: {len(quiet)}"
                + (f", median {statistics.median(quiet):.2f}x)" if quiet else ")")
            )


if __name__ == "__main__":
    main()
