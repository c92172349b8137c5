"""What routing learns shows in the scrape: a session's requests served where it was
bound (hit), a new binding, a binding moved after its key was refused, and the
refused key's cooldown. Over both transports, streamed and not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Route, Upstream
from proxai_asgi.server import config as cfg
from proxai_asgi.server.cli import build_app, build_parser
from tests.helpers.servers import Seen, serve

from .helpers import ANTHROPIC, Board, Scrape, error, request

KEYS = ["sk-pool-key-one-0123456789", "sk-pool-key-two-0123456789"]


@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_session_affinity_hits_moves_and_key_cooldowns_are_counted(
    transport: str, stream: bool
) -> None:
    refused: set[str] = set()
    keys_seen: list[str] = []

    def pool(seen: Seen) -> Any:
        key = seen.headers.get("x-api-key", "")
        keys_seen.append(key)
        if key in refused:
            return error(401, "authentication_error")
        return None

    board = Board(pool)
    with serve(board) as base:
        if transport == "inner":
            up = Upstream.inner_app(ANTHROPIC, api_key=KEYS, name="pool")
        else:
            up = Upstream(ANTHROPIC, base, KEYS, name="pool")
        app = ProxaiMiddleware(board, routes=[Route("claude-*", up)], metrics=True)
        with serve(app) as url, httpx.Client(base_url=url, timeout=30) as http:

            def ask() -> None:
                path, body = request(ANTHROPIC, "claude-x", stream=stream)
                r = http.post(path, json=body, headers={"x-session-affinity": "conversation-1"})
                assert r.status_code == 200, r.text

            ask()  # bound
            ask()  # served where bound
            refused.add(keys_seen[-1])
            ask()  # the bound key is refused: the other key serves, the binding moves
            ask()  # served where it moved
            m = Scrape.parse(http.get("/metrics").text)
    assert m.total("proxai_affinity_total", route="claude-*", outcome="new") == 1
    assert m.total("proxai_affinity_total", route="claude-*", outcome="hit") == 2
    assert m.total("proxai_affinity_total", route="claude-*", outcome="moved") == 1
    assert m.total("proxai_cooldowns_total") == 1
    assert m.total("proxai_cooldowns_total", upstream="pool", cooldown_scope="key") == 1
    assert m.total("proxai_attempts_total", upstream="pool", failure_class="key") == 1
    assert m.total("proxai_attempts_total", upstream="pool", outcome="success") == 4
    assert m.total("proxai_target_healthy", upstream="pool") == 1  # it answered since


def test_metrics_flag_and_config_key_turn_the_endpoint_on(tmp_path: Path) -> None:
    args = build_parser().parse_args
    assert build_app(args([]), {})[0].metrics is None
    app, server = build_app(args(["--metrics"]), {})
    assert app.metrics is not None and server.metrics
    path = tmp_path / "proxai.toml"
    path.write_text("[server]\nmetrics = true\n")
    assert build_app(args(["--config", str(path)]), {})[0].metrics is not None
    path.write_text("[server]\nmetrics = 1\n")
    with pytest.raises(cfg.ConfigError):
        cfg.load(path)
