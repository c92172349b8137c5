"""Do this machine's two vCPUs slow each other down? (Issue 16 §2: why 2 workers serve
about as much as 1.)

A probe process pinned to CPU 0 runs a fixed pure-Python loop and reports how much of
it gets done per second of *its own* CPU time (``time.process_time``), which does not
depend on how much CPU time the scheduler gives it. Meanwhile CPU 1 alternates, window
by window, between a pinned busy loop of ours ("busy") and nothing of ours ("idle";
other processes may still use it, so its measured utilisation from ``/proc/stat`` is
printed with each window). If the two vCPUs were independent cores, the probe's work per
CPU-second would be the same in both kinds of window; if they share one physical core
(SMT siblings on the host) or its memory bandwidth, it drops when CPU 1 is busy.

    .venv/bin/python scripts/cpu_siblings.py            # --windows 20 --seconds 1.0
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
from pathlib import Path
from typing import Any


def _busy(stop: Any) -> None:
    os.sched_setaffinity(0, {1})
    x = 0
    while not stop.is_set():
        for i in range(100_000):
            x += i * i


def _cpu_busy_fraction(before: list[int], after: list[int]) -> float:
    delta = [b - a for a, b in zip(before, after, strict=True)]
    idle = delta[3] + delta[4]
    total = sum(delta)
    return (total - idle) / total if total else 0.0


def _cpu1() -> list[int]:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu1 "):
            return [int(x) for x in line.split()[1:]]
    raise RuntimeError("no cpu1 in /proc/stat")


def _probe_window(seconds: float) -> float:
    """Loop iterations per second of this process's own CPU time."""
    done = 0
    c0, t0 = time.process_time(), time.monotonic()
    x = 0
    while time.monotonic() - t0 < seconds:
        for i in range(10_000):
            x += i * i
        done += 10_000
    return done / (time.process_time() - c0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--windows", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    os.sched_setaffinity(0, {0})
    rates: dict[str, list[float]] = {"idle": [], "busy": []}
    for w in range(args.windows):
        kind = "busy" if w % 2 else "idle"
        stop = mp.Event()
        worker = mp.Process(target=_busy, args=(stop,)) if kind == "busy" else None
        if worker is not None:
            worker.start()
            time.sleep(0.1)  # let it reach its loop
        before = _cpu1()
        rate = _probe_window(args.seconds)
        cpu1 = _cpu_busy_fraction(before, _cpu1())
        if worker is not None:
            stop.set()
            worker.join(timeout=10)
        rates[kind].append(rate)
        print(f"window {w:2d}: CPU 1 {kind:4s} ({cpu1:4.0%} busy)  probe {rate / 1e6:6.2f} M/CPU-s")
    idle, busy = statistics.median(rates["idle"]), statistics.median(rates["busy"])
    print(
        f"median probe rate: CPU 1 idle of ours {idle / 1e6:.2f}, busy {busy / 1e6:.2f} "
        f"M iterations per CPU-second ({busy / idle:.2f}x)"
    )


if __name__ == "__main__":
    main()
