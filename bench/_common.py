"""What the benches share: processes and ports, CPU clocks, the inputs (request bodies,
synthetic and recorded streams) and a raw HTTP/1.1 load client. Every bench imports
only this module of ``bench``; the servers they start are in ``bench/servers/``.

Run the benches from the repository root (``python -m bench.NAME``)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxai_asgi import canonical as c
from proxai_asgi import pipeline
from proxai_asgi.codec import ProtocolName
from proxai_asgi.protocols import get_codec
from proxai_asgi.sse import SSEDecoder

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
FULL: dict[str, ProtocolName] = {
    "chat": "openai_chat_completions",
    "responses": "openai_responses",
    "anthropic": "anthropic_messages",
    "gemini": "gemini_generate_content",
}
SHORT: dict[ProtocolName, str] = {v: k for k, v in FULL.items()}

# ---------------------------------------------------------------- processes, ports, CPU


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


@contextmanager
def process(
    args: list[str],
    port: int,
    env: dict[str, str] | None = None,
    cwd: Path = ROOT,
    cpus: set[int] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A server process on ``port``; with ``cpus``, it and its threads run on those only."""
    pin = None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=pin,
    )  # fmt: skip
    try:
        wait_port(port)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def uvicorn(app: str, port: int, *extra: str, fast: bool = False) -> list[str]:
    """uvicorn on asyncio with h11, named so that installing uvloop changes nothing;
    ``fast``: on uvloop with httptools, what uvicorn picks when they are installed."""
    server = ["--loop", "uvloop", "--http", "httptools"] if fast else ["--loop", "asyncio",
              "--http", "h11"]  # fmt: skip
    return [PY, "-m", "uvicorn", app, "--port", str(port), "--log-level", "warning",
            "--no-access-log", *server, *extra]  # fmt: skip


def split_cpus() -> tuple[set[int], set[int]]:
    """The first CPU for the proxies, the rest for the upstream and the client."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("pinning needs at least two CPUs")
    return {cpus[0]}, set(cpus[1:])


def make_certs(directory: Path) -> list[str]:
    """A test CA (``ca.pem``, for ``SSL_CERT_FILE``) and a certificate for 127.0.0.1
    written to ``directory``; returns uvicorn's TLS arguments."""
    import trustme

    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    leaf.cert_chain_pems[0].write_to_path(str(directory / "cert.pem"))
    leaf.private_key_pem.write_to_path(str(directory / "key.pem"))
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    return ["--ssl-certfile", str(directory / "cert.pem"), "--ssl-keyfile",
            str(directory / "key.pem")]  # fmt: skip


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
        user, kernel = user_kernel_ticks(pid)
        return (user + kernel) / os.sysconf("SC_CLK_TCK")


def user_kernel_ticks(pid: int) -> tuple[int, int]:
    """The process's user and kernel CPU time in clock ticks (10 ms: summed over every
    saturated stream of a proxy, enough to tell the two apart)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def rss_kb(pid: int, name: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{name} not in /proc/{pid}/status")


# ---------------------------------------------------------------------------- inputs


def request_for(
    client: str, upstream: str, *, stream: bool, paced: bool = False, short: bool = False
) -> tuple[str, dict[str, object]]:
    """Path and body of a ``client``-protocol request that ``servers/default_proxy.py``
    routes to ``upstream`` (and ``servers/stream_upstream.py`` answers as the model says)."""
    model = f"{upstream}-{'paced' if paced else 'short' if short else 'm'}"
    text = [{"role": "user", "content": "x"}]
    if client == "chat":
        return "/v1/chat/completions", {"model": model, "stream": stream, "messages": text}
    if client == "responses":
        return "/v1/responses", {"model": model, "stream": stream, "input": "x"}
    if client == "anthropic":
        body = {"model": model, "stream": stream, "max_tokens": 10, "messages": text}
        return "/v1/messages", body
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    contents = [{"role": "user", "parts": [{"text": "x"}]}]
    return f"/v1beta/models/{model}:{method}", {"contents": contents}


async def read_body(receive: Any) -> bytes:
    """The request body an ASGI app is sent, read whole (the fake upstreams)."""
    body = b""
    while True:
        message: dict[str, Any] = await receive()
        chunk: bytes = message.get("body", b"")
        body += chunk
        if not message.get("more_body"):
            return body


def captures_dir() -> Path:
    """Where the recorded traffic lives, found as the suite finds it
    (``tests/helpers/captures.py``, which needs pytest; the LiteLLM bench's virtualenv
    has none): ``PROXAI_CAPTURES``, else ``shared/fixtures/captures`` beside the checkout."""
    override = os.environ.get("PROXAI_CAPTURES")
    if override:
        return Path(override).expanduser().resolve()
    return ROOT.parent / "shared" / "fixtures" / "captures"


def capture_body(name: str) -> bytes:
    """A recorded answer's body."""
    record = json.loads((captures_dir() / f"{name}.json").read_text())
    return str(record["response"]["body"]).encode()


def synthetic(protocol: ProtocolName, n: int = 2000) -> bytes:
    """A long stream in ``protocol``'s wire format: n text deltas, then two tool
    calls whose argument fragments interleave. Written by our own encoder from
    canonical events, so it is valid by construction."""
    events: list[c.StreamEvent] = [c.MessageStart(id="msg_bench", model="bench", created=1)]
    events.append(c.BlockStart(index=0, kind="text"))
    events += [c.BlockDelta(index=0, text=f"tok{i} ") for i in range(n)]
    events.append(c.BlockStop(index=0))
    events.append(c.BlockStart(index=1, kind="tool_call", call_id="call_a", name="f"))
    events.append(c.BlockStart(index=2, kind="tool_call", call_id="call_b", name="g"))
    for i in range(20):
        events.append(c.BlockDelta(index=1, text='{"a":' if i == 0 else "1" if i < 19 else "}"))
        events.append(c.BlockDelta(index=2, text='{"b":' if i == 0 else "2" if i < 19 else "}"))
    events += [c.BlockStop(index=1), c.BlockStop(index=2)]
    events.append(c.Finish(stop_reason="tool_use", usage=c.Usage(input_tokens=10, output_tokens=n)))
    enc = get_codec(protocol).stream_encoder(
        c.Request(model="bench", messages=[], stream=True, include_usage=True)
    )
    return b"".join(enc.encode(e) for e in events)


def frames(body: bytes) -> list[bytes]:
    """Cut the body where a network read would: after each SSE frame (Gemini ends its
    frames with CRLF CRLF)."""
    sep = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    parts = body.split(sep)
    return [p + sep for p in parts if p]


def reads(body: bytes, size: int = 8192) -> list[bytes]:
    """Cut the body every ``size`` bytes, wherever that falls (a saturated stream)."""
    return [body[i : i + size] for i in range(0, len(body), size)]


def translated(
    chunks: list[bytes], up: ProtocolName, client: ProtocolName, *, sent: bool = False
) -> Callable[[], int]:
    """The production pipeline's ``StreamTranslator`` (what the middleware runs);
    ``sent``: noting what the client was sent, as when an answer may be continued."""
    request = c.Request(model="bench", messages=[], stream=True, include_usage=True)
    translation = pipeline.answering(get_codec(client), get_codec(up), request)
    framing = SSEDecoder()
    events = sum(len(framing.decode(ch)) for ch in chunks)  # counted once, outside the timing

    def run() -> int:
        stream = pipeline.StreamTranslator(translation, [] if sent else None)
        for ch in chunks:
            stream.feed(ch)
        stream.close()
        return events

    return run


# ------------------------------------------------------------- the client (httpx)


def one_stream(client: httpx.Client, url: str, body: dict[str, object]) -> tuple[int, float]:
    """Events read and seconds taken. Frames are counted in the raw bytes: parsing
    lines in Python would make the client the bottleneck."""
    t = time.perf_counter()
    events, tail = 0, b""
    with client.stream("POST", url, json=body) as r:
        r.raise_for_status()
        for chunk in r.iter_raw():
            events += (tail + chunk).count(b"data:")  # "data:" split across reads
            tail = chunk[-4:]
    return events, time.perf_counter() - t


@dataclass
class Row:
    """One client <- upstream pair through one proxy. Rates and CPU are per upstream
    event: a client protocol that merges events (Gemini's whole function calls) would
    otherwise look slower for sending fewer."""

    upstream_events: int
    paced_upstream_events: int
    rates: list[float] = field(default_factory=list)
    events: int = 0
    cpu: float = 0.0  # proxy CPU seconds over those events
    paced_rates: list[float] = field(default_factory=list)
    paced_events: int = 0
    paced_cpu: float = 0.0
    latencies: list[float] = field(default_factory=list)
    first_events: list[float] = field(default_factory=list)
    ticks: list[int] = field(default_factory=lambda: [0, 0])  # user, kernel (saturated)

    def stream(self, client: httpx.Client, url: str, body: dict[str, object], pid: int) -> None:
        cpu0, ticks0 = cpu_seconds(pid), user_kernel_ticks(pid)
        _, seconds = one_stream(client, url, body)
        self.cpu += cpu_seconds(pid) - cpu0
        for i, (a, b) in enumerate(zip(ticks0, user_kernel_ticks(pid), strict=True)):
            self.ticks[i] += b - a
        self.events += self.upstream_events
        self.rates.append(self.upstream_events / seconds)

    def paced(self, client: httpx.Client, url: str, body: dict[str, object], pid: int) -> None:
        cpu0 = cpu_seconds(pid)
        _, seconds = one_stream(client, url, body)
        self.paced_cpu += cpu_seconds(pid) - cpu0
        self.paced_events += self.paced_upstream_events
        self.paced_rates.append(self.paced_upstream_events / seconds)


# ------------------------------------------------ the load client (raw HTTP/1.1)

CLIENT_PATH = {
    "openai_chat_completions": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
    "anthropic_messages": "/v1/messages",
}
TERMINATOR = {
    "openai_chat_completions": b"data: [DONE]\n\n",
    "openai_responses": b"event: response.completed\n",
    "anthropic_messages": b"event: message_stop\n",
}
ERROR_MARK = {
    "openai_chat_completions": b'data: {"error"',
    "openai_responses": b"event: error\n",
    "anthropic_messages": b"event: error\n",
}


def raw_request(client: str, upstream: str) -> bytes:
    """A streamed request in ``client``'s protocol, model ``to-<upstream>``, as bytes."""
    model = f"to-{SHORT[upstream]}"  # type: ignore[index]
    if client == "openai_chat_completions":
        body: dict[str, Any] = {
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "What is 4200 + 42?"}],
        }
    elif client == "openai_responses":
        body = {"model": model, "stream": True, "input": "What is 4200 + 42?"}
    else:
        body = {
            "model": model,
            "stream": True,
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "What is 4200 + 42?"}],
        }
    data = json.dumps(body).encode()
    head = (
        f"POST {CLIENT_PATH[client]} HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        f"content-type: application/json\r\nauthorization: Bearer client\r\n"
        f"content-length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


class Conn:
    """One keep-alive HTTP/1.1 connection to the proxy."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
            self.writer = None

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            await self.connect()
        assert self.reader is not None and self.writer is not None
        self.writer.write(request)
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {
            k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
        }
        if headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                parts.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            body = b"".join(parts)
        else:
            body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, body


class Tally:
    """Streams counted: complete 200 streams ending with their protocol's terminator,
    and every other outcome by kind."""

    def __init__(self) -> None:
        self.ok = 0
        self.errors: collections.Counter[str] = collections.Counter()
        self.statuses: collections.Counter[int] = collections.Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.latencies: list[float] = []

    def check(self, client: str, status: int, body: bytes) -> None:
        self.statuses[status] += 1
        if status != 200:
            self.errors[f"status {status}"] += 1
        elif ERROR_MARK[client] in body:
            self.errors["error event in stream"] += 1
        elif TERMINATOR[client] not in body[-4096:]:
            self.errors["stream without its terminator"] += 1
        else:
            self.ok += 1
