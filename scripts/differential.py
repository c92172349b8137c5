"""Differential run: every recorded exchange through the production middleware, in
every direction, streamed and not, over each upstream transport; the bytes each client
and each upstream received, written to one JSON file. Run it before and after a
refactor and compare the files:

    git worktree add /tmp/before <commit>            # the checkout to compare against
    python scripts/differential.py /tmp/before.json --root /tmp/before
    python scripts/differential.py /tmp/after.json --compare /tmp/before.json

``--root`` imports ``proxai_asgi`` from another checkout (default: this one), so one
copy of this harness measures both sides. ``--transports lean,httpx`` picks transports
(default all three); ``--only 'gemini_*'`` some recordings (repeatable; the
basic text recordings must stay in the directory, they answer the requests sent toward
each upstream); ``--store memory`` runs with the memory store instead of none (see
below); ``--captures DIR`` the recordings (default ``$PROXAI_CAPTURES`` or
``../shared/fixtures/captures`` beside the checkout). The exit status is 1 when
anything differs; the output is one count line per transport and the first differing
cases with a short diff.

Transports, each a fresh ``ProxaiMiddleware`` per case:
- ``lean``: the default transport (the lean HTTP/1.1 pool) to an HTTP upstream;
- ``httpx``: the same upstream with ``lean_http=False`` (the middleware's own httpx
  client);
- ``inner``: the wrapped app, ``Upstream.inner_app(protocol)``, no network hop.
The upstream is one replay ASGI app answering with the recording; for ``lean`` and
``httpx`` uvicorn (h11) serves it on 127.0.0.1, on this run's event loop.

Determinism (a run compared with itself shows 0 differences; the check of that is
``tests/test_differential.py`` and comparing two runs of one commit):
- the store is off by default (``store="off"``): with a store, every Responses answer
  from a non-Responses upstream gets a random minted id (``resp_`` + 48 hex) and item
  ids derived from it (``msg_<same hex>_0``, ``fc_``, ``rs_``). ``--store memory`` runs
  the store path too and replaces exactly those ids by ``<minted>`` (``MINTED``);
- ``time.time`` and ``time.time_ns`` are frozen during the run (answers without a
  timestamp get "now"; a stream that never announced itself gets ``resp_proxai_<ns>``);
- the upstream's ``host`` request header (it names the random port) and the client's
  ``date``/``server`` response headers are left out.
Nothing else is normalized: randomness a change brings in shows as differences.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import fnmatch
import itertools
import json
import os
import re
import socket
import sys
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    MutableMapping,
    Sequence,
)
from pathlib import Path
from typing import Any, Literal

import httpx
import uvicorn

# Spelled out here rather than imported: the harness must run against checkouts whose
# modules are laid out differently (only the public API is imported, from --root).
ProtocolName = Literal[
    "openai_chat_completions", "openai_responses", "anthropic_messages", "gemini_generate_content"
]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

HERE = Path(__file__).resolve().parents[1]
TRANSPORTS = ("lean", "httpx", "inner")
PROTOCOLS: tuple[ProtocolName, ...] = (
    "openai_chat_completions",
    "openai_responses",
    "anthropic_messages",
    "gemini_generate_content",
)
PREFIX: dict[str, ProtocolName] = {
    "chat": "openai_chat_completions",
    "responses": "openai_responses",
    "anthropic": "anthropic_messages",
    "gemini": "gemini_generate_content",
}
BASE_PATH = {
    "openai_chat_completions": "/v1",
    "openai_responses": "/v1",
    "anthropic_messages": "",
    "gemini_generate_content": "",
}
TEXT_RECORD = {
    "openai_chat_completions": "chat_json_text_basic",
    "openai_responses": "responses_json_text_basic",
    "anthropic_messages": "anthropic_json_text_basic",
    "gemini_generate_content": "gemini_json_text_basic",
}
# The id a stored Responses answer gets, minted per request (``resp_`` + 48 hex), and
# the item ids derived from it (``msg_<same hex>_0``); replaced by a placeholder only
# when a store is on (``--store memory``). No recording holds such an id.
MINTED = re.compile(r"\b([a-z]+_)[0-9a-f]{48}(?![0-9a-f])")
FROZEN = 1_700_000_000


def default_captures() -> Path:
    override = os.environ.get("PROXAI_CAPTURES")
    if override:
        return Path(override).expanduser().resolve()
    return HERE.parent / "shared" / "fixtures" / "captures"


def client_call(
    protocol: ProtocolName, stream: bool, body: dict[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """Path and body of a small client request (or the recorded one)."""
    if protocol == "gemini_generate_content":
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        payload = body or {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        payload = {k: v for k, v in payload.items() if k not in ("model", "stream")}
        return f"/v1beta/models/m:{method}", payload
    if protocol == "openai_chat_completions":
        payload = body or {"messages": [{"role": "user", "content": "hi"}]}
        path = "/v1/chat/completions"
    elif protocol == "openai_responses":
        payload = body or {"input": "hi"}
        path = "/v1/responses"
    else:
        payload = body or {"max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
        path = "/v1/messages"
    return path, {**payload, "model": "m", "stream": stream}


class Replay:
    """The upstream: answers every request with ``record``'s response (one body chunk,
    its recorded headers but content-length) and notes what it was sent."""

    def __init__(self) -> None:
        self.record: dict[str, Any] = {}
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = sorted(
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k.lower() != b"host"
        )
        self.seen.append(
            {
                "method": scope["method"],
                "path": scope["path"],
                "query": scope.get("query_string", b"").decode("latin-1"),
                "headers": headers,
                "body": body.decode("utf-8", "replace"),
            }
        )
        resp = self.record["response"]
        raw = resp["body"]
        data = raw.encode() if isinstance(raw, str) else json.dumps(raw).encode()
        out = [
            (k.lower().encode(), str(v).encode())
            for k, v in resp.get("headers", {}).items()
            if k.lower() != "content-length"
        ]
        await send({"type": "http.response.start", "status": resp["status"], "headers": out})
        await send({"type": "http.response.body", "body": data, "more_body": False})


class Harness:
    """One replay upstream, served over HTTP for ``lean`` and ``httpx``."""

    def __init__(self, captures: Path, transports: Sequence[str], store: str = "off") -> None:
        from proxai_asgi import ProxaiMiddleware, Upstream

        self.middleware, self.upstream = ProxaiMiddleware, Upstream
        self.captures = captures
        self.transports = tuple(transports)
        self.store = store
        self.replay = Replay()
        self.base = ""

    async def one(
        self,
        transport: str,
        client: ProtocolName,
        upstream: ProtocolName,
        record: dict[str, Any],
        stream: bool,
        use_request: bool,
    ) -> dict[str, Any]:
        replay = self.replay
        replay.record, replay.seen = record, []
        key = "sk-differential-0000"
        if transport == "inner":
            up = self.upstream.inner_app(upstream)  # (forwards the client's own key)
        else:
            up = self.upstream(upstream, self.base + BASE_PATH[upstream], api_key=key)
        mw = self.middleware(
            replay,
            upstream=up,
            lean_http=transport == "lean",
            store=self.store,
        )
        request_body = record["request"].get("body") if use_request else None
        path, payload = client_call(client, stream, request_body)
        try:
            asgi = httpx.ASGITransport(mw)
            async with httpx.AsyncClient(transport=asgi, base_url="http://proxy") as cl:
                r = await cl.post(path, json=payload, headers={"authorization": "Bearer k"})
        finally:
            await mw.aclose()
        keep = {k: v for k, v in r.headers.items() if k not in ("date", "server")}
        return {
            "status": r.status_code,
            "headers": sorted(keep.items()),
            "body": r.content.decode("utf-8", "replace"),
            "upstream_request": replay.seen,
        }

    def text_record(self, protocol: ProtocolName) -> dict[str, Any]:
        record: dict[str, Any] = json.loads(
            (self.captures / f"{TEXT_RECORD[protocol]}.json").read_text()
        )
        return record

    async def cases(self, transport: str, paths: Iterable[Path]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for path in paths:
            record = json.loads(path.read_text())
            origin = PREFIX.get(path.name.split("_", 1)[0])
            if origin is None or "response" not in record:
                continue
            for client in PROTOCOLS:
                for stream in (False, True):
                    # The recorded answer, to every client.
                    key = f"{path.stem}|{origin}->{client}|stream={stream}"
                    out[key] = await self.one(transport, client, origin, record, stream, False)
                    # The recorded request, toward every upstream (answered by that
                    # protocol's basic text recording).
                    if client == origin or "body" not in record.get("request", {}):
                        continue
                    for target in PROTOCOLS:
                        if target == client:
                            continue
                        key = f"{path.stem}|request {client}->{target}|stream={stream}"
                        answer = self.text_record(target)
                        done = await self.one(transport, client, target, answer, stream, True)
                        out[key] = done["upstream_request"]
        return out

    async def run(self, paths: Sequence[Path]) -> dict[str, dict[str, Any]]:
        """Every case over every transport: ``{transport: {case: what was seen}}``."""
        result: dict[str, dict[str, Any]] = {}
        async with self.serving():
            for transport in self.transports:
                result[transport] = await self.cases(transport, paths)
        text = json.dumps(result)  # (and tuples become lists, as a written file has them)
        if self.store != "off":
            text = MINTED.sub(r"\1<minted>", text)
        normal: dict[str, dict[str, Any]] = json.loads(text)
        return normal

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        if not set(self.transports) & {"lean", "httpx"}:
            yield
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            self.replay,
            log_level="warning",
            lifespan="off",
            ws="none",
            loop="asyncio",
            http="h11",
        )
        server = uvicorn.Server(config)
        task = asyncio.ensure_future(server.serve(sockets=[sock]))
        try:
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("uvicorn did not start")
                await asyncio.sleep(0.005)
            yield
        finally:
            server.should_exit = True
            await task
            sock.close()


@contextlib.contextmanager
def frozen_clock() -> Iterator[None]:
    """``time.time`` and ``time.time_ns`` fixed for the run, then restored."""
    saved = time.time, time.time_ns
    time.time = lambda: float(FROZEN)
    time.time_ns = lambda: FROZEN * 10**9
    try:
        yield
    finally:
        time.time, time.time_ns = saved


def recordings(captures: Path) -> list[Path]:
    return sorted(captures.glob("*.json"))


def _named(path: Path, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(path.stem, p) for p in patterns)


def collect(
    captures: Path,
    transports: Sequence[str] = TRANSPORTS,
    paths: Sequence[Path] | None = None,
    store: str = "off",
) -> dict[str, dict[str, Any]]:
    """The core: run ``paths`` (default every recording) over ``transports``."""
    harness = Harness(captures, transports, store)
    with frozen_clock():
        return asyncio.run(harness.run(recordings(captures) if paths is None else paths))


def differences(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[str]]:
    """Per transport of either side, the cases whose bytes differ (or exist on one
    side only)."""
    out: dict[str, list[str]] = {}
    for transport in sorted(set(before) | set(after)):
        b, a = before.get(transport, {}), after.get(transport, {})
        out[transport] = [k for k in sorted(set(b) | set(a)) if b.get(k) != a.get(k)]
    return out


def report(before: dict[str, Any], after: dict[str, Any], shown: int = 3) -> list[str]:
    """Counts per transport, then the first differing cases with a short diff."""
    lines: list[str] = []
    differ = differences(before, after)
    for transport, keys in differ.items():
        lines.append(f"{transport}: {len(keys)} of {len(after.get(transport, {}))} differ")
    for transport, keys in differ.items():
        for key in keys[:shown]:
            lines.append(f"DIFFERS {transport}: {key}")
            old = before.get(transport, {}).get(key)
            lines.extend("    " + d for d in short_diff(old, after.get(transport, {}).get(key)))
    return lines


def short_diff(old: Any, new: Any, limit: int = 8, width: int = 150) -> list[str]:
    """The changed lines of two cases as indented JSON, each cut to ``width``
    characters around its first difference (bodies are one long line)."""
    a = json.dumps(old, indent=1, sort_keys=True).splitlines()
    b = json.dumps(new, indent=1, sort_keys=True).splitlines()
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for x, y in itertools.zip_longest(a[i1:i2], b[j1:j2]):
            at = _first_difference(x or "", y or "")
            out.extend(
                f"{sign} {_window(line, at, width)}"
                for sign, line in (("-", x), ("+", y))
                if line is not None
            )
    return out[:limit]


def _first_difference(x: str, y: str) -> int:
    return next(
        (i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y))
    )


def _window(line: str, at: int, width: int) -> str:
    if len(line) <= width:
        return line
    start = max(0, min(at - width // 3, len(line) - width))
    return (
        ("..." if start else "")
        + line[start : start + width]
        + ("..." if start + width < len(line) else "")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("output")
    parser.add_argument("--compare", help="an earlier output to compare with")
    parser.add_argument("--root", help="the checkout to import proxai_asgi from")
    parser.add_argument("--captures", type=Path, default=None)
    parser.add_argument("--transports", default=",".join(TRANSPORTS))
    parser.add_argument("--store", choices=("off", "memory"), default="off")
    parser.add_argument("--only", action="append", help="recording names (glob), repeatable")
    args = parser.parse_args(argv)
    transports = [t for t in args.transports.split(",") if t]
    unknown = set(transports) - set(TRANSPORTS)
    if unknown:
        parser.error(f"unknown transports {sorted(unknown)}; choose from {TRANSPORTS}")
    sys.path.insert(0, str(Path(args.root).resolve() if args.root else HERE))
    started = time.monotonic()
    captures = args.captures or default_captures()
    paths = [p for p in recordings(captures) if not args.only or _named(p, args.only)]
    result = collect(captures, transports, paths, store=args.store)
    Path(args.output).write_text(json.dumps(result, indent=1, sort_keys=True))
    counts = ", ".join(f"{t} {len(c)}" for t, c in result.items())
    package = Path(sys.modules["proxai_asgi"].__file__ or "?").parent
    print(f"cases: {counts}; {time.monotonic() - started:.0f} s; proxai_asgi from {package}")
    if not args.compare:
        return 0
    before = json.loads(Path(args.compare).read_text())
    before = {t: c for t, c in before.items() if t in transports}
    print("\n".join(report(before, result)))
    return 1 if any(differences(before, result).values()) else 0


if __name__ == "__main__":
    sys.exit(main())
