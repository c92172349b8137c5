"""Start-up cost: ``import proxai_asgi`` and every registered codec, each in a fresh
interpreter, as ``python -X importtime`` reports it (the cumulative time of every
top-level import the statement made). Median of the runs.

    .venv/bin/python bench/import_time.py            # --runs 9
    .venv/bin/python bench/import_time.py --against /path/to/other/checkout

``--against`` times another checkout of the package too, its runs interleaved with
this one's (same conditions on a shared machine). Also lists the heaviest modules a
plain ``import proxai_asgi`` loads, and which of httpx, h11, asyncio it loads (each is
needed only by some upstreams).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODECS = "from proxai_asgi.protocols import all_codecs; all_codecs()"
STATEMENTS = {
    "import proxai_asgi": "import proxai_asgi",
    "import proxai_asgi + every codec loaded": "import proxai_asgi; " + CODECS,
}
WATCH = ("httpx", "h11", "asyncio", "ssl")


# Bytecode caches as an installed package has them (this machine's environment sets
# PYTHONDONTWRITEBYTECODE, which makes every import compile its source: ~3x slower).
# They go to a prefix outside the tree, written by a first, unmeasured run.
ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "PYTHONPYCACHEPREFIX": "/tmp/proxai-bench-pycache",
}


def importtime(statement: str, root: Path = ROOT) -> list[tuple[int, int, str]]:
    """(self µs, cumulative µs, indented name) per import, as -X importtime prints,
    with the package imported from ``root``."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        cwd=root,
        env=ENV,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not line.startswith("import time:"):
            continue
        try:
            own, total = int(parts[0].split(":")[1]), int(parts[1])
        except ValueError:
            continue  # the header line
        rows.append((own, total, parts[2][1:]))
    return rows


def statement_ms(rows: list[tuple[int, int, str]], baseline: set[str]) -> float:
    """Cumulative time of the top-level imports the statement itself made (what the
    interpreter imported at start-up, ``site`` and its finders, is left out)."""
    return sum(t for _, t, n in rows if not n.startswith(" ") and n not in baseline) / 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--against", type=Path, help="another checkout, timed interleaved")
    args = parser.parse_args()
    roots = {"": ROOT} if args.against is None else {"this ": ROOT, "other ": args.against}
    baseline = {n for _, _, n in importtime("pass") if not n.startswith(" ")}
    for label, statement in STATEMENTS.items():
        times: dict[str, list[float]] = {name: [] for name in roots}
        for root in roots.values():
            importtime(statement, root)  # writes the bytecode caches
        for _ in range(args.runs):
            for name, root in roots.items():
                times[name].append(statement_ms(importtime(statement, root), baseline))
        for name, runs in times.items():
            spread = f"{min(runs):.1f}-{max(runs):.1f}"
            median = statistics.median(runs)
            print(f"{name}{label}: median {median:.1f} ms ({spread}, {args.runs} runs)")
    rows = importtime("import proxai_asgi")
    start = len(importtime("pass"))
    rows = rows[start - 1 :] if start else rows  # the statement's own imports
    loaded = {n.strip() for _, _, n in rows}
    print(
        "loaded by a plain import:", ", ".join(m for m in WATCH if m in loaded) or "none of", WATCH
    )
    print("heaviest modules (self ms):")
    for own, _, name in sorted(rows, reverse=True)[:12]:
        print(f"  {own / 1000:6.1f}  {name.strip()}")


if __name__ == "__main__":
    main()
