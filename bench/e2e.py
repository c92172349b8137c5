"""End to end through uvicorn on loopback, each server in its own process.

Measures, in one run:
- events/s of a long stream read directly from the upstream, through the proxy as
  pass-through, and through the proxy translated (Chat upstream -> Anthropic and
  Responses clients), with the proxy process's CPU time per event;
- added time to first byte of a small non-streamed request (p50, p99) over a direct
  call, pass-through and translated;

each through two proxies: the standalone server's default (plain-http upstreams through
the lean HTTP/1.1 pool) and ``--httpx``.

    .venv/bin/python bench/e2e.py
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

UPSTREAM_APP = r"""
import asyncio
import sys
sys.path.insert(0, {root!r})
from bench.sansio import synthetic
STREAM = synthetic("openai_chat_completions", {n})
SMALL = (b'{{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",'
         b'"choices":[{{"index":0,"message":{{"role":"assistant","content":"hi"}},'
         b'"finish_reason":"stop"}}],"usage":{{"prompt_tokens":1,"completion_tokens":1,'
         b'"total_tokens":2}}}}')
CHUNKS = [p + b"\n\n" for p in STREAM.split(b"\n\n") if p]

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            break
    if b'"stream":true' in body.replace(b" ", b""):
        await send({{"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]}})
        paced = b'"model":"paced"' in body.replace(b" ", b"")
        for ch in CHUNKS:
            await send({{"type": "http.response.body", "body": ch, "more_body": True}})
            if paced:  # one frame per read downstream, as a model's tokens arrive
                await asyncio.sleep(0.0002)
        await send({{"type": "http.response.body", "body": b""}})
    else:
        await send({{"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]}})
        await send({{"type": "http.response.body", "body": SMALL}})
"""


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def wait_port(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} never opened")


def start(args: list[str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc


def cpu_seconds(pid: int) -> float:
    """CPU time a process has used, in ns resolution where the kernel keeps scheduler
    statistics (``/proc/PID/task/*/schedstat``, summed over its threads); otherwise
    user + system time from ``/proc/PID/stat``, in clock ticks (10 ms: too coarse for
    a stream of a few tens of ms)."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):  # a thread that just ended
                total += int((task / "schedstat").read_text().split()[0])
        return total / 1e9
    except (FileNotFoundError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stream_rate(
    url: str, body: dict[str, object], runs: int = 9, proxy_pid: int | None = None
) -> tuple[float, float]:
    """Median events/s read by the client, and the proxy's CPU µs per event read
    (0 without ``proxy_pid``): on two cores shared by client, proxy and upstream the
    rate depends on scheduling; the proxy's CPU per event does not."""
    rates = []
    events_total = 0
    cpu0 = cpu_seconds(proxy_pid) if proxy_pid else 0.0
    with httpx.Client(timeout=60) as client:
        for _ in range(runs):
            t = time.perf_counter()
            events = 0
            with client.stream("POST", url, json=body) as r:
                # Count frames in the raw bytes: parsing lines in Python here would make
                # the client the bottleneck, and a slower proxy (bigger batches per
                # read) would then look faster. "data:" is 5 bytes, so a 4-byte tail
                # catches a split one without counting any twice.
                tail = b""
                for chunk in r.iter_raw():
                    events += (tail + chunk).count(b"data:")
                    tail = chunk[-4:]
            rates.append(events / (time.perf_counter() - t))
            events_total += events
    cpu = (cpu_seconds(proxy_pid) - cpu0) / events_total * 1e6 if proxy_pid else 0.0
    return statistics.median(rates), cpu


def report(
    label: str,
    p: tuple[float, float],
    a: tuple[float, float],
    r: tuple[float, float],
    direct: float | None,
) -> None:
    """Pass-through and the two translated paths of one proxy: events/s, and the
    proxy's CPU per event (the figure that does not depend on scheduling)."""
    vs = f"  ({p[0] / direct:.2f}x direct)" if direct else ""
    print(f"  [{label:5s}] pass-through       {p[0]:10.0f}{vs}   proxy {p[1]:5.1f} µs/ev")
    for name, (rate, cpu) in (("chat -> anthropic", a), ("chat -> responses", r)):
        print(
            f"  [{label:5s}] {name}  {rate:10.0f}  ({rate / p[0]:.2f}x pass-through)   "
            f"proxy {cpu:5.1f} µs/ev ({p[1] / cpu:.2f}x pass-through's events per CPU-second)"
        )


def ttfb(url: str, body: dict[str, object], n: int = 300) -> tuple[float, float]:
    samples = []
    with httpx.Client(timeout=30) as client:
        for i in range(n + 20):
            t = time.perf_counter()
            client.post(url, json=body).raise_for_status()
            if i >= 20:  # warm-up
                samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def main() -> None:
    n = int(os.environ.get("BENCH_DELTAS", "4000"))
    up_port, px_port = free_port(), free_port()
    app_file = ROOT / "bench" / "_upstream_app.py"
    app_file.write_text(UPSTREAM_APP.format(root=str(ROOT), n=n))
    procs = []
    try:
        procs.append(
            start(
                [
                    PY,
                    "-m",
                    "uvicorn",
                    "bench._upstream_app:app",
                    "--port",
                    str(up_port),
                    "--log-level",
                    "warning",
                    "--no-access-log",
                ],
                up_port,
            )
        )

        def proxy_cmd(port: int, *extra: str) -> list[str]:
            return [
                PY,
                "-m",
                "proxai_asgi",
                "--port",
                str(port),
                "--upstream-protocol",
                "openai_chat_completions",
                "--upstream-url",
                f"http://127.0.0.1:{up_port}/v1",
                "--log-level",
                "warning",
                *extra,
            ]

        hx_port = free_port()
        proxy_proc = start(proxy_cmd(px_port), px_port)  # the lean HTTP/1.1 pool (default)
        procs.append(proxy_proc)
        httpx_proc = start(proxy_cmd(hx_port, "--httpx"), hx_port)
        procs.append(httpx_proc)
        direct = f"http://127.0.0.1:{up_port}/v1/chat/completions"
        chat = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
        anth = {
            "model": "m",
            "stream": True,
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "x"}],
        }
        resp = {"model": "m", "stream": True, "input": "x"}
        print(
            f"stream of {n} text deltas + tool calls: events/s read by the client (median "
            "of 9), and the proxy's CPU per event:"
        )
        d, _ = stream_rate(direct, chat)
        print(f"  direct                     {d:10.0f}")
        for label, port, pid in (
            ("lean", px_port, proxy_proc.pid),
            ("httpx", hx_port, httpx_proc.pid),
        ):
            proxy = f"http://127.0.0.1:{port}"
            p, p_cpu = stream_rate(proxy + "/v1/chat/completions", chat, proxy_pid=pid)
            a, a_cpu = stream_rate(proxy + "/v1/messages", anth, proxy_pid=pid)
            r, r_cpu = stream_rate(proxy + "/v1/responses", resp, proxy_pid=pid)
            report(label, (p, p_cpu), (a, a_cpu), (r, r_cpu), d)
        print(
            "the same stream paced (0.2 ms between upstream frames, so each read holds one "
            "frame, as with a model's tokens): proxy CPU per event (median of 3)"
        )
        for label, port, pid in (
            ("lean", px_port, proxy_proc.pid),
            ("httpx", hx_port, httpx_proc.pid),
        ):
            proxy = f"http://127.0.0.1:{port}"
            pc = {**chat, "model": "paced"}
            pa = {**anth, "model": "paced"}
            pr = {**resp, "model": "paced"}
            report(
                label,
                stream_rate(proxy + "/v1/chat/completions", pc, runs=3, proxy_pid=pid),
                stream_rate(proxy + "/v1/messages", pa, runs=3, proxy_pid=pid),
                stream_rate(proxy + "/v1/responses", pr, runs=3, proxy_pid=pid),
                None,
            )
        small: dict[str, object] = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        small_a: dict[str, object] = {
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x"}],
        }
        print("non-streamed request latency, ms (p50 / p99 over 300):")
        d50, d99 = ttfb(direct, small)
        print(f"  direct                     {d50:6.2f} / {d99:6.2f}")
        for label, port in (("lean", px_port), ("httpx", hx_port)):
            proxy = f"http://127.0.0.1:{port}"
            p50, p99 = ttfb(proxy + "/v1/chat/completions", small)
            t50, t99 = ttfb(proxy + "/v1/messages", small_a)
            print(
                f"  [{label:5s}] pass-through       {p50:6.2f} / {p99:6.2f}  "
                f"(+{p50 - d50:.2f} ms p50)"
            )
            print(
                f"  [{label:5s}] chat -> anthropic  {t50:6.2f} / {t99:6.2f}  "
                f"(+{t50 - d50:.2f} ms p50)"
            )
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)
        app_file.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
