"""``proxai-asgi --workers 2 --metrics``: one scrape, answered by either worker, shows
the traffic both served (prometheus_client's multiprocess mode over the directory the
CLI made), and the directory is gone once the server stopped. The real command on
127.0.0.1 with the demo upstream; every wait is bounded."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx

from tests.test_workers import proxy, start

from .helpers import Scrape

MAX_REQUESTS = 80  # a bound: the kernel spreads new connections over both workers


def multiproc_dir(pid: int) -> Path:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    found = [e.split(b"=", 1)[1] for e in environ if e.startswith(b"PROMETHEUS_MULTIPROC_DIR=")]
    assert found, "the worker was started without a metrics directory"
    return Path(os.fsdecode(found[0]))


def served(folder: Path, pid: int) -> bool:
    """The worker recorded a request: its counter file exists (files are made on a
    process's first labelled value, and every instrument is labelled)."""
    return (folder / f"counter_{pid}.db").exists()


def test_one_scrape_sees_every_workers_requests_and_tokens() -> None:
    # The demo upstream speaks another protocol than the client: a translated answer,
    # whose usage the proxy decodes.
    with proxy("--workers", "2", "--metrics", "--demo-protocol", "anthropic_messages") as server:
        start(server, 2)
        folder = multiproc_dir(server.workers[0])
        assert multiproc_dir(server.workers[1]) == folder
        base = f"http://127.0.0.1:{server.port}"
        body = {"model": "demo", "messages": [{"role": "user", "content": "count me"}]}
        sent, prompt, output = 0, 0, 0
        while sent < MAX_REQUESTS and not all(served(folder, p) for p in server.workers):
            # A new connection each time, so both workers take some.
            with httpx.Client(base_url=base, timeout=30) as http:
                r = http.post("/v1/chat/completions", json=body)
            assert r.status_code == 200
            usage = r.json()["usage"]
            sent += 1
            prompt += usage["prompt_tokens"]
            output += usage["completion_tokens"]
        assert all(served(folder, p) for p in server.workers), "one worker served everything"
        with httpx.Client(base_url=base, timeout=30) as http:
            scrape = http.get("/metrics")
        assert scrape.status_code == 200
        m = Scrape.parse(scrape.text)
        assert m.total("proxai_requests_total", status_class="2xx") == sent
        assert m.total("gen_ai_server_request_duration_seconds_count") == sent
        assert m.total("gen_ai_client_token_usage_sum", gen_ai_token_type="input") == prompt
        assert m.total("proxai_tokens_total", gen_ai_token_type="output") == output
        assert m.total("proxai_requests_in_flight") == 0
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0
    assert not folder.exists()
