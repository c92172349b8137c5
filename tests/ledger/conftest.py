"""The ledgers under test: memory, a SQLite file, and a real PostgreSQL server (one
per session: starting one costs about a second)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proxai_asgi.usage.ledger import Ledger, open_ledger
from proxai_asgi.usage.record import UsageRecord
from tests.helpers.postgres_server import PostgresServer, postgres_server

ENGINES = ["memory", "sqlite", "postgres"]
SQL_ENGINES = ["sqlite", "postgres"]


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def ledger_url(engine: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh ledger's URL: a new file, a new PostgreSQL schema."""
    if engine == "memory":
        return "memory"
    if engine == "sqlite":
        return f"sqlite:///{tmp_path / 'usage.db'}"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.schema_url(f"t_{secrets.token_hex(6)}")


def quick(url: str, **options: Any) -> Ledger:
    """A SQL ledger with test-sized waits (``flush`` never waits for them anyway)."""
    if url == "memory":
        ledger = open_ledger(url)
    else:
        options = {"interval": 0.01, "retry_initial": 0.01, "retry_max": 0.05, **options}
        ledger = open_ledger(url, **options)
    assert ledger is not None
    return ledger


def make(n: int, **fields: Any) -> UsageRecord:
    """A record whose every field is set (``fields`` override)."""
    values: dict[str, Any] = {
        "request_id": f"req_{n:06d}",
        "time": f"2026-11-{10 + n % 10:02d}T0{n % 10}:04:10.{n % 1000:03d}+00:00",
        "owner": f"key:{'ab' * 20}",
        "route": "claude-*",
        "upstream": "claude",
        "key_id": "k3f9a",
        "client_protocol": "client-é",
        "upstream_protocol": "upstream-☃",
        "requested_model": "claude-x",
        "served_model": "claude-sonnet-4-5-20250929",
        "status": 200,
        "stream": True,
        "attempts": 3,
        "fallback_index": 1,
        "input_tokens": 11 + n,
        "output_tokens": 2**40 + n,  # past 32 bits: a BIGINT
        "cache_read_tokens": 13,
        "cache_write_5m_tokens": 14,
        "cache_write_1h_tokens": 15,
        "reasoning_tokens": 16,
        "server_tool_requests": 2,
        "ttft_ms": 123.456,
        "duration_ms": 789.25,
        "cost_usd": 0.0123456789,
        "price_version": "2026-11-01",
    }
    values.update(fields)
    return UsageRecord(**values)
