"""``proxai-asgi --ledger URL`` (flag, environment, TOML) and ``proxai-asgi usage``:
the records as one JSON array, the sums as a table or JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from proxai_asgi.server import config as cfg
from proxai_asgi.server.cli import build_app, build_parser, main
from proxai_asgi.usage.ledger.sqlite import SQLiteLedger
from tests.helpers.servers import serve

CONTRACT_FIELDS = [
    "request_id",
    "time",
    "owner",
    "route",
    "upstream",
    "key_id",
    "client_protocol",
    "upstream_protocol",
    "requested_model",
    "served_model",
    "status",
    "attempts",
    "fallback_index",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "reasoning_tokens",
    "server_tool_requests",
    "ttft_ms",
    "duration_ms",
    "cost_usd",
]


def test_the_ledger_comes_from_the_flag_the_environment_or_toml(tmp_path: Path) -> None:
    def ledger_of(argv: list[str], env: dict[str, str]) -> object:
        app, _ = build_app(build_parser().parse_args(argv), env)
        return app.context.accounting.ledger

    flag = ledger_of(["--ledger", f"sqlite:///{tmp_path}/a.db"], {})
    assert isinstance(flag, SQLiteLedger) and flag.backend.name == f"sqlite:///{tmp_path}/a.db"
    env = ledger_of([], {"PROXAI_LEDGER": f"sqlite:///{tmp_path}/b.db"})
    assert isinstance(env, SQLiteLedger) and env.backend.name.endswith("b.db")
    toml = tmp_path / "proxai.toml"
    toml.write_text(f'[server]\nledger = "sqlite:///{tmp_path}/c.db"\n')
    assert ledger_of(["--config", str(toml)], {}).backend.name.endswith("c.db")  # type: ignore[attr-defined]
    assert ledger_of([], {}) is None
    with pytest.raises(cfg.ConfigError, match="--ledger"):
        ledger_of(["--ledger", "mysql://x"], {})


def _traffic(db: Path) -> None:
    """Two exchanges with the demo upstream, through the CLI-built server."""
    app, _ = build_app(build_parser().parse_args(["--ledger", f"sqlite:///{db}"]), {})
    with serve(app, close_app=True) as base:
        for model in ("demo-a", "demo-b"):
            r = httpx.post(
                base + "/v1/chat/completions",
                headers={"authorization": "Bearer sk-someone"},
                json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
            )
            assert r.status_code == 200


def test_usage_json_prints_every_record_as_one_array(tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    _traffic(db)
    out = subprocess.run(
        [sys.executable, "-m", "proxai_asgi", "usage", "--ledger", f"sqlite:///{db}", "--json"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    assert sorted(r["requested_model"] for r in records) == ["demo-a", "demo-b"]
    for record in records:
        assert set(CONTRACT_FIELDS) <= set(record)
        assert record["status"] == 200 and record["owner"].startswith("key:")
        assert record["upstream"] == "demo" and record["cost_usd"] is None  # demo: no price
        assert "sk-someone" not in json.dumps(record)


def test_usage_sums_by_owner_model_and_day_as_a_table_or_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "usage.db"
    _traffic(db)
    url = f"sqlite:///{db}"
    assert main(["usage", "--ledger", url]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[:5] == ["owner", "model", "day", "requests", "failed"]
    assert len(rows) == 2 and rows[0].split()[1] == "demo-a" and rows[0].split()[3] == "1"
    assert rows[0].split()[-1] == "-"  # no price: no cost, never 0
    assert main(["usage", "--ledger", url, "--by", "owner", "--json", "--since", "2000-01-01"]) == 0
    (group,) = json.loads(capsys.readouterr().out)
    assert group["requests"] == 2 and group["cost_usd"] is None and group["unpriced"] == 2
    assert main(["usage", "--ledger", url, "--by", "day", "--since", "2999-01-01", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--ledger", "sqlite:///nowhere/usage.db"], "no ledger file"),
        (["--ledger", "sqlite:///{db}", "--by", "owner,colour"], "colour"),
        (["--ledger", "sqlite:///{db}", "--since", "yesterday"], "ISO 8601"),
        ([], "--ledger"),
    ],
)
def test_usage_errors_say_what_is_wrong(
    argv: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "usage.db"
    db.touch()
    assert main(["usage", *(a.format(db=db) for a in argv)]) == 2
    assert needle in capsys.readouterr().err


def test_the_server_cli_still_parses_without_a_subcommand() -> None:
    args = build_parser().parse_args(["--port", "0"])
    assert args.ledger is None and args.port == 0
