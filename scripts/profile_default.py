"""cProfile of the default-path proxy (``bench/servers/default_proxy.py``) while it serves
saturated streams from an https upstream with a test certificate; prints the top
functions by own time.

    .venv/bin/python scripts/profile_default.py default chat:chat   # or httpx, any client:upstream
    .venv/bin/python scripts/profile_default.py default chat:gemini 2000 json   # small answers
"""

from __future__ import annotations

import os
import pstats
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import free_port, make_certs, request_for, uvicorn, wait_port

PY = sys.executable


def main() -> None:
    transport, pair = sys.argv[1], sys.argv[2]
    streams = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    client_protocol, upstream_protocol = pair.split(":")
    certs = Path(tempfile.mkdtemp())
    tls = make_certs(certs)
    up_port, proxy_port = free_port(), free_port()
    env = {**os.environ, "BENCH_DELTAS": "4000"}
    up_app = "bench.servers.stream_upstream:app"
    upstream = subprocess.Popen(uvicorn(up_app, up_port, *tls), env=env)
    out = certs / "proxy.prof"
    proxy_env = {**env, "BENCH_UPSTREAM": f"https://127.0.0.1:{up_port}"}
    proxy_env |= {"BENCH_TRANSPORT": transport, "SSL_CERT_FILE": str(certs / "ca.pem")}
    proxy_cmd = uvicorn("bench.servers.default_proxy:app", proxy_port)
    proxy = subprocess.Popen([PY, "-m", "cProfile", "-o", str(out), *proxy_cmd[1:]], env=proxy_env)
    try:
        wait_port(up_port)
        wait_port(proxy_port)
        stream = sys.argv[4:] != ["json"]
        path, body = request_for(client_protocol, upstream_protocol, stream=stream)
        with httpx.Client(timeout=60) as client:
            for _ in range(streams):
                with client.stream("POST", f"http://127.0.0.1:{proxy_port}{path}", json=body) as r:
                    for _ in r.iter_raw():
                        pass
    finally:
        proxy.send_signal(signal.SIGINT)  # uvicorn exits cleanly; cProfile writes its file
        proxy.wait(timeout=20)
        upstream.terminate()
        upstream.wait(timeout=10)
    pstats.Stats(str(out)).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
