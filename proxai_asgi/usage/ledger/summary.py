"""The ledger summed by owner, model and day (or any of ``KEYS``): what
``proxai-asgi usage`` prints.

A group's ``cost_usd`` is the sum of its priced records' costs, and ``None`` only
when none of its records is priced (an unknown model costs ``null``, never 0);
``unpriced`` counts the records without a cost, so a mixed group shows both: its
known cost and how many records it leaves out (``1.2345 +3 unpriced`` in the table).
The model is the one that served, else the one asked for (a request that failed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from ..record import UsageRecord

KEYS = ("owner", "model", "day", "route", "upstream")
DEFAULT_KEYS = ("owner", "model", "day")
TOKENS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "reasoning_tokens",
    "server_tool_requests",
)


class Group(msgspec.Struct, kw_only=True):
    key: dict[str, str | None]
    requests: int = 0
    failed: int = 0  # answered with an error status
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0
    server_tool_requests: int = 0
    cost_usd: float | None = None
    unpriced: int = 0  # records without a cost


def _key(record: UsageRecord, name: str) -> str | None:
    if name == "model":
        return record.served_model or record.requested_model
    if name == "day":
        return record.time[:10]
    value: str | None = getattr(record, name)
    return value


def parse_keys(text: str) -> tuple[str, ...]:
    """``owner,model,day`` as the keys to group by (ValueError naming a bad one)."""
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in keys if k not in KEYS]
    if bad or not keys or len(set(keys)) != len(keys):
        raise ValueError(f"--by: {','.join(bad) or text!r}: a list of {', '.join(KEYS)}")
    return keys


def summarize(records: Iterable[UsageRecord], by: Sequence[str] = DEFAULT_KEYS) -> list[Group]:
    """One group per distinct key, sorted by key (``None`` first)."""
    groups: dict[tuple[str | None, ...], Group] = {}
    for record in records:
        values = tuple(_key(record, name) for name in by)
        group = groups.get(values)
        if group is None:
            group = groups[values] = Group(key=dict(zip(by, values, strict=True)))
        group.requests += 1
        group.failed += record.status >= 400
        for name in TOKENS:
            setattr(group, name, getattr(group, name) + getattr(record, name))
        if record.cost_usd is None:
            group.unpriced += 1
        else:
            group.cost_usd = (group.cost_usd or 0.0) + record.cost_usd
    for group in groups.values():  # (float sums: no 0.30000000000000004 in the output)
        if group.cost_usd is not None:
            group.cost_usd = round(group.cost_usd, 10)
    order = sorted(groups, key=lambda k: tuple((v is not None, v or "") for v in k))
    return [groups[k] for k in order]


def as_json(groups: list[Group]) -> list[dict[str, Any]]:
    """Each group flat: its keys, then its sums."""
    out = []
    for group in groups:
        row: dict[str, Any] = dict(group.key)
        row.update(msgspec.structs.asdict(group))
        del row["key"]
        out.append(row)
    return out


_COLUMNS = (
    ("requests", "requests"),
    ("failed", "failed"),
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache_read", "cache_read_tokens"),
    ("cache_5m", "cache_write_5m_tokens"),
    ("cache_1h", "cache_write_1h_tokens"),
    ("reasoning", "reasoning_tokens"),
    ("tools", "server_tool_requests"),
)


def _cost(group: Group) -> str:
    if group.cost_usd is None:
        return "-"
    text = f"{group.cost_usd:.4f}"
    return f"{text} +{group.unpriced} unpriced" if group.unpriced else text


def table(groups: list[Group], by: Sequence[str] = DEFAULT_KEYS) -> str:
    """An aligned text table: the keys, the counts, and the cost in USD ("-": none of
    the group's records is priced)."""
    header = [*by, *(title for title, _ in _COLUMNS), "cost_usd"]
    rows = [header]
    for group in groups:
        keys = [group.key[name] or "-" for name in by]
        sums = [str(getattr(group, name)) for _, name in _COLUMNS]
        rows.append([*keys, *sums, _cost(group)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    width_of_keys = len(by)
    lines = [
        "  ".join(
            cell.ljust(width) if i < width_of_keys else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    return "\n".join(lines)
