"""The ledger's one table, as both SQL engines write it: a column per ``UsageRecord``
field, ``request_id`` the primary key (a record written twice is kept once).

``time`` is the record's ISO 8601 text in UTC (``2026-11-28T00:04:10.123+00:00``), so
text order is time order and ``since`` compares strings; the day of a record is its
first ten characters.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from ..record import UsageRecord

TABLE = "proxai_usage"
META = "proxai_usage_meta"  # values the ledger keeps about itself (the owner-hash key)

# name -> (SQLite type, PostgreSQL type); the order is UsageRecord's.
_TYPES: dict[str, tuple[str, str]] = {
    "request_id": ("TEXT PRIMARY KEY", "TEXT PRIMARY KEY"),
    "time": ("TEXT NOT NULL", "TEXT NOT NULL"),
    "owner": ("TEXT NOT NULL", "TEXT NOT NULL"),
    "route": ("TEXT", "TEXT"),
    "upstream": ("TEXT", "TEXT"),
    "key_id": ("TEXT", "TEXT"),
    "client_protocol": ("TEXT NOT NULL", "TEXT NOT NULL"),
    "upstream_protocol": ("TEXT", "TEXT"),
    "requested_model": ("TEXT", "TEXT"),
    "served_model": ("TEXT", "TEXT"),
    "status": ("INTEGER NOT NULL", "INTEGER NOT NULL"),
    "stream": ("INTEGER NOT NULL", "BOOLEAN NOT NULL"),
    "attempts": ("INTEGER NOT NULL", "INTEGER NOT NULL"),
    "fallback_index": ("INTEGER", "INTEGER"),
    "input_tokens": ("INTEGER NOT NULL", "BIGINT NOT NULL"),
    "output_tokens": ("INTEGER NOT NULL", "BIGINT NOT NULL"),
    "cache_read_tokens": ("INTEGER NOT NULL", "BIGINT NOT NULL"),
    "cache_write_5m_tokens": ("INTEGER NOT NULL", "BIGINT NOT NULL"),
    "cache_write_1h_tokens": ("INTEGER NOT NULL", "BIGINT NOT NULL"),
    "reasoning_tokens": ("INTEGER NOT NULL", "BIGINT NOT NULL"),
    "server_tool_requests": ("INTEGER NOT NULL", "INTEGER NOT NULL"),
    "ttft_ms": ("REAL", "DOUBLE PRECISION"),
    "duration_ms": ("REAL NOT NULL", "DOUBLE PRECISION NOT NULL"),
    "cost_usd": ("REAL", "DOUBLE PRECISION"),
    "price_version": ("TEXT", "TEXT"),
}
COLUMNS: tuple[str, ...] = UsageRecord.__struct_fields__
assert tuple(_TYPES) == COLUMNS, "the ledger's columns are UsageRecord's fields, in order"


def create_table(dialect: int) -> str:
    """``dialect``: 0 SQLite, 1 PostgreSQL."""
    columns = ",\n    ".join(f"{name} {types[dialect]}" for name, types in _TYPES.items())
    return f"CREATE TABLE IF NOT EXISTS {TABLE} (\n    {columns}\n)"


INDEXES = (
    f"CREATE INDEX IF NOT EXISTS {TABLE}_time ON {TABLE} (time)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_owner ON {TABLE} (owner, time)",
)
CREATE_META = f"CREATE TABLE IF NOT EXISTS {META} (name TEXT PRIMARY KEY, value TEXT NOT NULL)"
READ_SECRET = f"SELECT value FROM {META} WHERE name = 'owner_secret'"


def keep_secret(mark: str) -> str:
    """The owner-hash key stored, unless one already is (the first instance wins)."""
    return (
        f"INSERT INTO {META} (name, value) VALUES ('owner_secret', {mark})"
        " ON CONFLICT (name) DO NOTHING"
    )


def tables(dialect: int) -> tuple[str, ...]:
    """Every statement that makes the ledger's tables, each a no-op once they exist."""
    return (create_table(dialect), CREATE_META, *INDEXES)


def insert(mark: str) -> str:
    """The idempotent insert, with ``mark`` the driver's placeholder (``?``, ``%s``)."""
    marks = ", ".join([mark] * len(COLUMNS))
    names = ", ".join(COLUMNS)
    return f"INSERT INTO {TABLE} ({names}) VALUES ({marks}) ON CONFLICT (request_id) DO NOTHING"


def select(mark: str, since: str | None, owner: str | None) -> tuple[str, list[str]]:
    """The records since a time, of one owner, oldest first, and the query's values."""
    where: list[str] = []
    values: list[str] = []
    if since is not None:
        where.append(f"time >= {mark}")
        values.append(since)
    if owner is not None:
        where.append(f"owner = {mark}")
        values.append(owner)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {', '.join(COLUMNS)} FROM {TABLE}{clause} ORDER BY time, request_id", values


_MAX_INT = 2**63 - 1


def _storable(value: Any) -> Any:
    """What every engine takes: a batch that can never be written would hold back
    every record behind it, so text without NUL (PostgreSQL refuses it) nor lone
    surrogates, and integers within 64 bits."""
    if type(value) is str:
        if "\x00" in value or not value.isascii():
            value = value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode()
    elif type(value) is int:
        value = max(-_MAX_INT, min(value, _MAX_INT))
    return value


def row(record: UsageRecord) -> tuple[Any, ...]:
    return tuple(_storable(getattr(record, name)) for name in COLUMNS)


def record(values: tuple[Any, ...]) -> UsageRecord:
    fields = dict(zip(COLUMNS, values, strict=True))
    fields["stream"] = bool(fields["stream"])
    return UsageRecord(**fields)


def since_text(since: str | date | datetime | None) -> str | None:
    """``since`` as the ledger's time text: a date is its day's start, a naive time
    is UTC, a string is read as ISO 8601 (``2026-11-28``, ``...T10:00:00Z``)."""
    if since is None:
        return None
    if isinstance(since, str):
        try:
            since = datetime.fromisoformat(since)
        except ValueError:
            raise ValueError(f"since: {since!r} is not an ISO 8601 date or time") from None
    if not isinstance(since, datetime):
        since = datetime(since.year, since.month, since.day, tzinfo=UTC)
    if since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return since.astimezone(UTC).isoformat(timespec="milliseconds")
