"""``proxai-asgi --workers N`` (and ``[server] workers``): N processes serve one port,
and they start and stop cleanly. The real command in a subprocess on 127.0.0.1 with
any free port; every wait is bounded, nothing is timed."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anthropic
import openai
import pytest

from proxai_asgi.server import config as cfg
from proxai_asgi.server.cli import build_app, build_parser
from proxai_asgi.server.serve_workers import tcp_listener

ROOT = Path(__file__).resolve().parent.parent
STARTUP_LIMIT = 120.0  # seconds; a bound on a shared machine, not a measurement


@dataclass
class Server:
    proc: subprocess.Popen[str]
    lines: queue.Queue[str | None]
    log: list[str] = field(default_factory=list)
    port: int = 0
    workers: list[int] = field(default_factory=list)

    def read_until(self, done: re.Pattern[str]) -> re.Match[str]:
        while True:
            line = self.lines.get(timeout=STARTUP_LIMIT)
            if line is None:
                raise AssertionError("the server exited:\n" + "".join(self.log))
            self.log.append(line)
            m = done.search(line)
            if m:
                return m


@contextmanager
def proxy(*args: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    """``proxai-asgi *args`` on a free port, with ``env`` added to this environment."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxai_asgi", "--port", "0", "--log-level", "info", *args],
        cwd=ROOT,
        env={**os.environ, **env} if env else None,
        stderr=subprocess.STDOUT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, so no worker outlives a failure
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    server = Server(proc, lines)
    try:
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group this test started
        proc.wait(timeout=30)


def start(server: Server, workers: int) -> None:
    """Read the log until the port is known and every worker has started."""
    started = 0
    event = re.compile(
        r"running on http://127\.0\.0\.1:(\d+)|Started server process \[(\d+)\]"
        r"|(Application startup complete)"
    )
    while not server.port or started < workers or len(server.workers) < workers:
        m = server.read_until(event)
        if m[1]:
            server.port = int(m[1])
        elif m[2]:
            server.workers.append(int(m[2]))
        else:
            started += 1


def parent_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    m = re.search(r"^PPid:\s+(\d+)", status, re.M)
    assert m
    return int(m[1])


def exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def ask_all_three(port: int) -> None:
    base = f"http://127.0.0.1:{port}"
    o = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
    for n in range(6):  # fresh connections, so the workers share them
        chat = o.with_options(timeout=60).chat.completions.create(
            model="demo",
            messages=[{"role": "user", "content": f"hello {n}"}],
            extra_headers={"connection": "close"},
        )
        assert chat.choices[0].message.content == f"You said: hello {n}"
    with o.responses.stream(model="demo", input="stream me") as s:
        assert s.get_final_response().output_text == "You said: stream me"
    a = anthropic.Anthropic(base_url=base, api_key="none", max_retries=0)
    message = a.messages.create(
        model="demo", max_tokens=20, messages=[{"role": "user", "content": "hi"}]
    )
    assert message.content[0].type == "text" and message.content[0].text == "You said: hi"


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_two_workers_serve_one_port_and_stop_cleanly(stop: signal.Signals) -> None:
    with proxy("--workers", "2") as server:
        start(server, 2)
        parent = server.proc.pid
        assert len(set(server.workers)) == 2 and parent not in server.workers
        assert all(parent_of(pid) == parent for pid in server.workers)
        ask_all_three(server.port)
        server.proc.send_signal(stop)
        assert server.proc.wait(timeout=60) == 0
        while (line := server.lines.get(timeout=30)) is not None:  # the rest of the log
            server.log.append(line)
        assert not [pid for pid in server.workers if exists(pid)]
        log = "".join(server.log)
        for pid in server.workers:  # each worker shut down, not killed
            assert f"Finished server process [{pid}]" in log
        assert "Traceback" not in log


def test_workers_from_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "proxai.toml"
    path.write_text("[server]\nworkers = 2\n")
    with proxy("--config", str(path)) as server:
        start(server, 2)
        ask_all_three(server.port)
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0


def test_one_worker_is_the_default_and_runs_in_process() -> None:
    _, conf = build_app(build_parser().parse_args([]), {})
    assert conf.workers == 1
    with proxy() as server:
        start(server, 1)
        assert server.workers == [server.proc.pid]
        server.proc.send_signal(signal.SIGTERM)
        # uvicorn shuts down, then re-raises the signal it caught (exit status -15)
        assert server.proc.wait(timeout=60) in (0, -signal.SIGTERM)
        server.read_until(re.compile(r"Finished server process"))


def test_worker_count_from_flag_and_environment_and_its_errors(tmp_path: Path) -> None:
    args = build_parser().parse_args
    assert build_app(args(["--workers", "3"]), {})[1].workers == 3
    assert build_app(args([]), {"PROXAI_WORKERS": "2"})[1].workers == 2
    with pytest.raises(cfg.ConfigError, match="workers"):
        build_app(args(["--workers", "0"]), {})
    path = tmp_path / "bad.toml"
    path.write_text("[server]\nworkers = 0\n")
    with pytest.raises(cfg.ConfigError, match=r"server\.workers"):
        cfg.load(path)
    out = subprocess.run(
        [sys.executable, "-m", "proxai_asgi", "--workers", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "workers" in out.stderr


def test_a_worker_that_dies_is_replaced() -> None:
    with proxy("--workers", "2") as server:
        start(server, 2)
        dead = server.workers[0]
        os.kill(dead, signal.SIGKILL)
        new = int(server.read_until(re.compile(r"Started server process \[(\d+)\]"))[1])
        assert new not in server.workers and parent_of(new) == server.proc.pid
        server.read_until(re.compile(r"Application startup complete"))
        ask_all_three(server.port)
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0
        assert not exists(new)


def holder_of(pids: list[int], local_port: int, remote_port: int) -> tuple[int, int]:
    """(pid, fd) of the process among ``pids`` holding the loopback TCP connection
    local_port <-> remote_port."""
    wanted = f"0100007F:{local_port:04X} 0100007F:{remote_port:04X}"
    inode = next(
        line.split()[9]
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
        if " ".join(line.split()[1:3]) == wanted
    )
    return next(
        (pid, int(fd.name))
        for pid in pids
        for fd in Path(f"/proc/{pid}/fd").iterdir()
        if os.readlink(fd) == f"socket:[{inode}]"
    )


def tcp_option_of(pid: int, fd: int, option: int) -> int:
    """A TCP option of another process's socket, read from a duplicate of its
    descriptor (pidfd_getfd, Linux 5.6+)."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as exc:  # a kernel before 5.3
        pytest.skip(f"pidfd_open: {exc}")
    try:
        dup = libc.syscall(438, pidfd, fd, 0)  # SYS_pidfd_getfd, on every architecture
    finally:
        os.close(pidfd)
    if dup < 0:
        pytest.skip(f"pidfd_getfd: {os.strerror(ctypes.get_errno())}")
    with socket.socket(fileno=dup) as mine:  # closes only this process's duplicate
        return mine.getsockopt(socket.IPPROTO_TCP, option)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc, uses pidfd_getfd")
def test_worker_connections_have_nagle_off() -> None:
    """A stream is many small writes (one per SSE event); with Nagle on, each waits
    for the client's delayed ACK of the one before. uvicorn's shared listening socket
    made asyncio leave it on (serve_workers.py)."""
    with proxy("--workers", "2") as server:
        start(server, 2)
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as client:
            client.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")  # kept alive
            assert client.recv(4096).startswith(b"HTTP/1.1 ")  # any answer: accepted
            pid, fd = holder_of(server.workers, server.port, client.getsockname()[1])
            assert tcp_option_of(pid, fd, socket.TCP_NODELAY)
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0


def test_the_listener_is_tcp_so_accepted_connections_get_nodelay() -> None:
    """uvicorn binds as ``socket.socket(family)`` (proto 0); asyncio then accepts
    connections without TCP_NODELAY. tcp_listener's socket gives them TCP_NODELAY."""
    bound = socket.socket(socket.AF_INET)  # as uvicorn's Config.bind_socket makes it
    bound.bind(("127.0.0.1", 0))
    listener = tcp_listener(bound)
    assert listener.proto == socket.IPPROTO_TCP and bound.fileno() == -1  # same descriptor

    async def accepted_nodelay() -> int:
        got: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                got.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
        async with server:
            port = listener.getsockname()[1]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                return await asyncio.wait_for(got, 60)
            finally:
                writer.close()

    assert asyncio.run(accepted_nodelay())
    with socket.socket(socket.AF_UNIX) as unix:
        assert tcp_listener(unix) is unix
