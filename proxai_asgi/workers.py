"""Serving one port from N processes (``proxai-asgi --workers N``).

Each worker is a spawned process that builds the app from the same command line and
listens on its own socket bound to the same address with ``SO_REUSEPORT``, so the
kernel spreads new connections over the workers' accept queues. (uvicorn's own
``--workers`` shares one listening socket between the processes; on the 2-core bench
machine that did not serve more than one process did, while separate sockets did:
``bench/README.md``, "Workers".) The parent holds the port (bound, never listening,
so it takes no connections), starts the workers, and on SIGTERM or SIGINT stops them
gracefully; if a worker dies the others are stopped too and the exit status is 1.
"""

from __future__ import annotations

import multiprocessing
import signal
import socket
import sys
import time
from typing import Any

_STOP_TIMEOUT = 30.0  # seconds a worker gets to finish its exchanges


def _socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def _worker(argv: list[str], host: str, port: int, options: dict[str, Any]) -> None:
    import uvicorn

    from .cli import worker_app

    sock = _socket(host, port)
    sock.listen(2048)
    config = uvicorn.Config(worker_app(argv), host=host, port=port, **options)
    uvicorn.Server(config).run(sockets=[sock])


def serve(argv: list[str], host: str, port: int, workers: int, options: dict[str, Any]) -> int:
    """Run ``workers`` processes on ``host:port`` until a signal; the exit status."""
    if not hasattr(socket, "SO_REUSEPORT"):
        print("proxai-asgi: --workers needs SO_REUSEPORT (Linux, BSD, macOS)", file=sys.stderr)
        return 2
    holder = _socket(host, port)  # reserves the port (port 0: picks one for all)
    port = holder.getsockname()[1]
    stop: list[int] = []
    previous = {
        s: signal.signal(s, lambda n, _f: stop.append(n)) for s in (signal.SIGINT, signal.SIGTERM)
    }
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(argv, host, port, options)) for _ in range(workers)]
    try:
        for p in procs:
            p.start()
        print(f"proxai-asgi: {workers} workers on {host}:{port}", file=sys.stderr, flush=True)
        while not stop and all(p.is_alive() for p in procs):
            time.sleep(0.2)
        failed = not stop
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()  # SIGTERM: uvicorn finishes its exchanges and exits
        deadline = time.monotonic() + _STOP_TIMEOUT
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
        holder.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 1 if failed else 0
