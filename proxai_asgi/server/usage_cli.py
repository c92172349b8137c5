"""``proxai-asgi usage``: the usage ledger read back, as records or sums.

``--json`` alone prints every record as one JSON array (DESIGN.md's contract); the
default is the sums by owner, model and day as a table (``--by`` other keys,
``--json`` with ``--by`` the sums as JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

import anyio
import msgspec

from ..usage.ledger import open_ledger
from ..usage.ledger.schema import since_text
from ..usage.ledger.summary import DEFAULT_KEYS, KEYS, as_json, parse_keys, summarize, table
from ..usage.record import UsageRecord


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="proxai-asgi usage",
        description="Read the usage ledger: the sums by owner, model and day as a table, "
        "or (--json alone) every record as one JSON array.",
    )
    p.add_argument(
        "--ledger",
        help="sqlite:///path or postgresql://user@host/db (default $PROXAI_LEDGER)",
    )
    p.add_argument("--json", action="store_true", help="JSON: the records, or with --by the sums")
    p.add_argument(
        "--by",
        help=f"sum by these keys, comma-separated, of {', '.join(KEYS)} "
        f"(default {','.join(DEFAULT_KEYS)})",
    )
    p.add_argument("--since", help="only records at or after this ISO 8601 date or time (UTC)")
    p.add_argument("--owner", help="only this owner's records")
    return p


async def _read(url: str, since: str | None, owner: str | None) -> list[UsageRecord]:
    ledger = open_ledger(url)
    assert ledger is not None
    try:
        return await ledger.records(since=since, owner=owner)
    finally:
        await ledger.aclose()


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    url = args.ledger or os.environ.get("PROXAI_LEDGER")
    try:
        if not url:
            raise ValueError("--ledger (or $PROXAI_LEDGER) is required")
        if url.startswith("sqlite:///") and not os.path.exists(url.removeprefix("sqlite:///")):
            raise ValueError(f"--ledger: no ledger file at {url.removeprefix('sqlite:///')}")
        if url.startswith("memory"):
            raise ValueError("--ledger: a memory ledger is the serving process's own")
        by = parse_keys(args.by) if args.by else DEFAULT_KEYS
        since_text(args.since)  # a bad date is said before anything is opened
        records = anyio.run(_read, url, args.since, args.owner)
    except ValueError as exc:
        print(f"proxai-asgi usage: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the ledger cannot be read (its message names no secret)
        print(f"proxai-asgi usage: {exc}", file=sys.stderr)
        return 1
    if args.json and not args.by:
        sys.stdout.write(msgspec.json.encode(records).decode() + "\n")
    elif args.json:
        print(json.dumps(as_json(summarize(records, by))))
    else:
        print(table(summarize(records, by), by))
    return 0
