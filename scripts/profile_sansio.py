"""Where the sans-IO time of one streamed direction goes: cProfile over the same loop
bench/sansio.py times, top functions by own time.

    .venv/bin/python scripts/profile_sansio.py chat anthropic            # synthetic stream
    .venv/bin/python scripts/profile_sansio.py responses anthropic --capture
    .venv/bin/python scripts/profile_sansio.py anthropic responses --reads   # saturated reads

cProfile adds a fixed cost per Python call, so read the shares, not the µs.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._common import SHORT, capture_body, frames, reads, synthetic, translated  # noqa: E402

CAPTURE = {
    "chat": "chat_sse_parallel_tool_calls",
    "responses": "responses_sse_reasoning_summary",
    "anthropic": "anthropic_sse_thinking_signature_delta",
}
LONG = {v: k for k, v in SHORT.items()}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("upstream", choices=list(LONG))
    p.add_argument("client", choices=list(LONG))
    p.add_argument("--capture", action="store_true", help="the real capture, not synthetic")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--reads", action="store_true", help="8 KB reads, not one frame per read")
    args = p.parse_args()
    up, client = LONG[args.upstream], LONG[args.client]
    body = capture_body(CAPTURE[args.upstream]) if args.capture else synthetic(up)  # type: ignore[arg-type]
    chunks = reads(body) if args.reads else frames(body)
    run = translated(chunks, up, client)  # type: ignore[arg-type]
    repeat = 300 if args.capture else 10
    run()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(repeat):
        run()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
