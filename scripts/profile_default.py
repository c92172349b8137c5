"""cProfile of the default-path proxy (``bench/default_proxy.py``) while it serves
saturated streams from an https upstream with a test certificate; prints the top
functions by own time.

    .venv/bin/python -m bench.profile_default default chat:chat   # or httpx, any client:upstream
    .venv/bin/python -m bench.profile_default default chat:gemini 2000 json   # small answers
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
import trustme

from bench.default_path import request_for, uvicorn
from bench.e2e import free_port, wait_port

PY = sys.executable


def main() -> None:
    transport, pair = sys.argv[1], sys.argv[2]
    streams = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    client_protocol, upstream_protocol = pair.split(":")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    certs = Path(tempfile.mkdtemp())
    leaf.cert_chain_pems[0].write_to_path(str(certs / "cert.pem"))
    leaf.private_key_pem.write_to_path(str(certs / "key.pem"))
    ca.cert_pem.write_to_path(str(certs / "ca.pem"))
    up_port, proxy_port = free_port(), free_port()
    env = {**os.environ, "BENCH_DELTAS": "4000"}
    tls = ["--ssl-certfile", str(certs / "cert.pem"), "--ssl-keyfile", str(certs / "key.pem")]
    upstream = subprocess.Popen(uvicorn("bench.stream_upstream:app", up_port, *tls), env=env)
    out = certs / "proxy.prof"
    proxy_env = {**env, "BENCH_UPSTREAM": f"https://127.0.0.1:{up_port}"}
    proxy_env |= {"BENCH_TRANSPORT": transport, "SSL_CERT_FILE": str(certs / "ca.pem")}
    proxy_cmd = uvicorn("bench.default_proxy:app", proxy_port)
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
