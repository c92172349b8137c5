"""Load: 1,000 concurrent streams, then a soak, through the proxy in its own process.

Three processes on 127.0.0.1:
- a fake upstream (raw asyncio HTTP/1.1 with keep-alive) that answers each of the three
  protocols with a recorded stream of that protocol (read from ``shared/fixtures/captures``), one
  frame every ``--frame-delay`` seconds, and counts the streams it has open at once;
- the proxy: ``ProxaiMiddleware`` under uvicorn, with three routes so one process
  serves all six translated directions (model ``to-chat`` / ``to-responses`` /
  ``to-anthropic`` picks the upstream protocol); pool and concurrency limits from the
  flags;
- this process: a raw asyncio HTTP/1.1 client on keep-alive connections that reads
  every stream to its end and checks it ended with its protocol's terminator and no
  error event (Chat ``data: [DONE]``, Responses ``response.completed``, Anthropic
  ``message_stop``).

Phase 1 opens ``--concurrent`` connections and starts one stream on each at the same
moment, the six translated directions in turn; phase 2 (the soak) sends ``--soak``
more streams over ``--soak-concurrency`` connections. The proxy's VmRSS is read from
/proc/PID/status before the load, every half second during it (peak, and VmHWM), and
after it; errors (anything but a complete 200 stream) are counted and must be 0.

    .venv/bin/python -m bench.load                       # 1,000 concurrent + 20,000 soak
    .venv/bin/python -m bench.load --concurrent 1000 --soak 0 \\
        --max-concurrency 200 --queue-timeout 0.5        # past the limit: queue, then 429
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import socket
import subprocess
import sys
import time
from typing import Any

from bench._common import ROOT, Conn, Tally, raw_request, rss_kb

PROTOCOLS = ("openai_chat_completions", "openai_responses", "anthropic_messages")
SHORT = {
    "openai_chat_completions": "chat",
    "openai_responses": "responses",
    "anthropic_messages": "anthropic",
}
UPSTREAM_OF_PATH = {
    "/v1/chat/completions": "openai_chat_completions",
    "/v1/responses": "openai_responses",
    "/v1/messages": "anthropic_messages",
}
CAPTURE = {
    "openai_chat_completions": "chat_sse_text_basic_include_usage",
    "openai_responses": "responses_sse_text_basic",
    "anthropic_messages": "anthropic_sse_text_basic",
}
DIRECTIONS = [(c, u) for c in PROTOCOLS for u in PROTOCOLS if c != u]


def raise_fd_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def listen() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    return sock


# ------------------------------------------------------------------ fake upstream


def frames_of(protocol: str) -> list[bytes]:
    from tests.helpers.servers import reply_from_capture

    return reply_from_capture(CAPTURE[protocol]).chunks


async def run_upstream(sock: socket.socket, frame_delay: float) -> None:
    frames = {p: frames_of(p) for p in PROTOCOLS}
    stats = {"open": 0, "max_open": 0, "served": 0}
    delay = {"s": frame_delay}
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    raw = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = raw.decode("latin-1").split("\r\n")
                target = lines[0].split(" ")[1]
                length = 0
                for line in lines[1:]:
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                data = await reader.readexactly(length)
                if target == "/delay":  # the soak runs with its own frame delay
                    delay["s"] = float(data)
                    target = "/stats"
                if target == "/stats":
                    body = json.dumps(stats).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(body), body)
                    )
                    await writer.drain()
                    continue
                stats["open"] += 1
                stats["max_open"] = max(stats["max_open"], stats["open"])
                try:
                    writer.write(head)
                    for f in frames[UPSTREAM_OF_PATH[target]]:
                        if delay["s"]:
                            await asyncio.sleep(delay["s"])
                        writer.write(b"%x\r\n%s\r\n" % (len(f), f))
                        await writer.drain()
                    writer.write(b"0\r\n\r\n")
                    await writer.drain()
                    stats["served"] += 1
                finally:
                    stats["open"] -= 1
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, sock=sock, backlog=4096)
    async with server:
        await server.serve_forever()


# ---------------------------------------------------------------------- proxy


def build_proxy(upstream_url: str, args: argparse.Namespace) -> Any:
    from proxai_asgi import ProxaiMiddleware, Route, Upstream

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    routes = []
    for p in PROTOCOLS:
        base = upstream_url if p == "anthropic_messages" else upstream_url + "/v1"
        routes.append(Route(f"to-{SHORT[p]}", Upstream(p, base, "sk-load-test-key-0000")))  # type: ignore[arg-type]
    return ProxaiMiddleware(
        inner,
        routes=routes,
        max_connections=args.max_connections,
        max_concurrency=args.max_concurrency or None,
        queue_timeout=args.queue_timeout,
        lean_http=not args.httpx,
    )


def run_proxy(sock: socket.socket, args: argparse.Namespace) -> None:
    import uvicorn

    app = build_proxy(args.upstream_url, args)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        backlog=4096,
        timeout_keep_alive=30,
        lifespan="on",
    )
    uvicorn.Server(config).run(sockets=[sock])


# ---------------------------------------------------------------------- client


async def one(conn: Conn, client: str, upstream: str, tally: Tally) -> None:
    tally.in_flight += 1
    tally.max_in_flight = max(tally.max_in_flight, tally.in_flight)
    t0 = time.perf_counter()
    try:
        status, body = await asyncio.wait_for(conn.exchange(raw_request(client, upstream)), 120)
        tally.check(client, status, body)
    except Exception as exc:  # a broken connection, a timeout: an error, counted
        tally.errors[type(exc).__name__] += 1
        await conn.close()
    finally:
        tally.in_flight -= 1
        tally.latencies.append(time.perf_counter() - t0)


async def sample_rss(pid: int, samples: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append(rss_kb(pid))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)


async def upstream_stats(port: int, delay: float | None = None) -> dict[str, int]:
    """The upstream's counters; with ``delay``, its frame delay is set first."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = b"" if delay is None else str(delay).encode()
    target = b"/stats" if delay is None else b"/delay"
    writer.write(
        b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s" % (target, len(body), body)
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    body = await reader.readexactly(length)
    writer.close()
    return dict(json.loads(body))


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else 0.0


async def drive(args: argparse.Namespace, proxy_pid: int, proxy_port: int, up_port: int) -> int:
    report: dict[str, Any] = {}
    # Warm-up: every direction once, so imports and pools are in place before "start".
    warm = Tally()
    conn = Conn(proxy_port)
    for client, upstream in DIRECTIONS:
        await one(conn, client, upstream, warm)
    await conn.close()
    await asyncio.sleep(1)
    rss_start = rss_kb(proxy_pid)
    samples: list[int] = [rss_start]
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_rss(proxy_pid, samples, stop))

    # Phase 1: N streams at once, one per connection.
    burst = Tally()
    conns = [Conn(proxy_port) for _ in range(args.concurrent)]
    for i in range(0, len(conns), 100):  # connect in batches: no SYN-queue overflow
        await asyncio.gather(*(c.connect() for c in conns[i : i + 100]))
    t0 = time.perf_counter()
    await asyncio.gather(
        *(one(c, *DIRECTIONS[i % len(DIRECTIONS)], burst) for i, c in enumerate(conns))
    )
    burst_wall = time.perf_counter() - t0
    await asyncio.gather(*(c.close() for c in conns))
    stats = await upstream_stats(up_port)
    rss_after_burst = rss_kb(proxy_pid)
    report["burst"] = {
        "requests": args.concurrent,
        "ok": burst.ok,
        "errors": dict(burst.errors),
        "statuses": dict(burst.statuses),
        "client_in_flight_max": burst.max_in_flight,
        "upstream_streams_open_max": stats["max_open"],
        "wall_s": round(burst_wall, 2),
        "latency_p50_s": round(pct(burst.latencies, 0.5), 3),
        "latency_p99_s": round(pct(burst.latencies, 0.99), 3),
    }

    # Phase 2: the soak.
    soak = Tally()
    checkpoints: list[tuple[int, int]] = []
    if args.soak:
        await upstream_stats(up_port, args.soak_frame_delay)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(args.soak):
            queue.put_nowait(i)
        done = 0

        async def worker() -> None:
            nonlocal done
            conn = Conn(proxy_port)
            while True:
                try:
                    i = queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
                await one(conn, *DIRECTIONS[i % len(DIRECTIONS)], soak)
                done += 1
                if done % 5000 == 0:
                    checkpoints.append((done, rss_kb(proxy_pid)))
            await conn.close()

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.soak_concurrency)))
        soak_wall = time.perf_counter() - t0
        report["soak"] = {
            "requests": args.soak,
            "concurrency": args.soak_concurrency,
            "ok": soak.ok,
            "errors": dict(soak.errors),
            "statuses": dict(soak.statuses),
            "wall_s": round(soak_wall, 1),
            "streams_per_s": round(args.soak / soak_wall, 1),
            "latency_p50_s": round(pct(soak.latencies, 0.5), 3),
            "latency_p99_s": round(pct(soak.latencies, 0.99), 3),
            "rss_kb_every_5000": checkpoints,
        }
    await asyncio.sleep(2)  # let the proxy settle: pools idle, garbage collected
    stop.set()
    await sampler
    rss_end = rss_kb(proxy_pid)
    report["rss_kb"] = {
        "start": rss_start,
        "after_burst": rss_after_burst,
        "peak_sampled": max(samples),
        "peak_vmhwm": rss_kb(proxy_pid, "VmHWM"),
        "end": rss_end,
    }
    errors = sum(burst.errors.values()) + sum(soak.errors.values())
    report["errors_total"] = errors
    report["settings"] = {
        "concurrent": args.concurrent,
        "soak": args.soak,
        "soak_concurrency": args.soak_concurrency,
        "frame_delay": args.frame_delay,
        "soak_frame_delay": args.soak_frame_delay,
        "max_connections": args.max_connections,
        "upstream_client": "httpx" if args.httpx else "lean",
        "max_concurrency": args.max_concurrency,
        "queue_timeout": args.queue_timeout,
    }
    print(json.dumps(report, indent=2))
    return errors


# ------------------------------------------------------------------------ main


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--concurrent", type=int, default=1000, help="streams at once in phase 1")
    p.add_argument("--soak", type=int, default=20000, help="streams in the soak (0: none)")
    p.add_argument("--soak-concurrency", type=int, default=200, help="connections in the soak")
    p.add_argument(
        "--frame-delay", type=float, default=0.02, help="upstream pause between frames, phase 1"
    )
    p.add_argument("--soak-frame-delay", type=float, default=0.0, help="the same, in the soak")
    p.add_argument("--max-connections", type=int, default=1000, help="proxy: upstream pool size")
    p.add_argument(
        "--httpx",
        action="store_true",
        help="proxy: upstream requests through httpx instead of the lean HTTP/1.1 pool",
    )
    p.add_argument(
        "--max-concurrency", type=int, default=0, help="proxy: exchanges in flight (0: no limit)"
    )
    p.add_argument("--queue-timeout", type=float, default=10.0, help="proxy: wait for a slot")
    p.add_argument(
        "--role", choices=["main", "upstream", "proxy"], default="main", help=argparse.SUPPRESS
    )
    p.add_argument("--upstream-url", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def child(role: str, argv: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.load", "--role", role, *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        raise RuntimeError(f"{role} did not start: {line!r}")
    proc.port = int(line.split()[1])  # type: ignore[attr-defined]
    return proc


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    raise_fd_limit()
    if args.role == "upstream":
        sock = listen()
        print(f"PORT {sock.getsockname()[1]}", flush=True)
        asyncio.run(run_upstream(sock, args.frame_delay))
        return 0
    if args.role == "proxy":
        sock = listen()
        print(f"PORT {sock.getsockname()[1]}", flush=True)
        run_proxy(sock, args)
        return 0

    passthrough = [
        "--max-connections", str(args.max_connections),
        "--max-concurrency", str(args.max_concurrency),
        "--queue-timeout", str(args.queue_timeout),
        *(["--httpx"] if args.httpx else []),
    ]  # fmt: skip
    up = child("upstream", ["--frame-delay", str(args.frame_delay)])
    try:
        proxy = child("proxy", [*passthrough, "--upstream-url", f"http://127.0.0.1:{up.port}"])  # type: ignore[attr-defined]
        try:
            time.sleep(0.5)
            errors = asyncio.run(drive(args, proxy.pid, proxy.port, up.port))  # type: ignore[attr-defined]
        finally:
            proxy.terminate()
            proxy.wait(10)
    finally:
        up.terminate()
        up.wait(10)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
