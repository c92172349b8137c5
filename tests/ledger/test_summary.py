"""The sums ``proxai-asgi usage`` prints: every count added, a cost only where a
record is priced, and the table's columns."""

from __future__ import annotations

import pytest

from proxai_asgi.usage.ledger.summary import as_json, parse_keys, summarize, table

from .conftest import make


def test_every_count_is_summed_per_group() -> None:
    records = [make(1), make(2, status=429, cost_usd=0.1), make(3, served_model=None)]
    by = ("model",)
    groups = {g.key["model"]: g for g in summarize(records, by)}
    served = groups["claude-sonnet-4-5-20250929"]
    assert (served.requests, served.failed) == (2, 1)
    assert served.input_tokens == 12 + 13
    assert served.output_tokens == 2 * 2**40 + 3
    assert (served.cache_read_tokens, served.cache_write_5m_tokens) == (26, 28)
    assert (served.cache_write_1h_tokens, served.reasoning_tokens) == (30, 32)
    assert served.server_tool_requests == 4
    assert served.cost_usd == pytest.approx(0.0123456789 + 0.1)
    assert groups["claude-x"].requests == 1  # the asked-for model when none served


def test_cost_is_none_only_when_no_record_of_the_group_is_priced() -> None:
    priced, unpriced = make(1, cost_usd=0.25, owner="a"), make(2, cost_usd=None, owner="a")
    (mixed,) = summarize([priced, unpriced], ("owner",))
    assert (mixed.cost_usd, mixed.unpriced) == (0.25, 1)
    (none,) = summarize([unpriced], ("owner",))
    assert (none.cost_usd, none.unpriced) == (None, 1)
    (free,) = summarize([make(3, cost_usd=0.0)], ("owner",))
    assert (free.cost_usd, free.unpriced) == (0.0, 0)  # a real zero stays a zero
    assert as_json([mixed]) == [
        {
            "owner": "a",
            "requests": 2,
            "failed": 0,
            "input_tokens": 25,
            "output_tokens": 2 * 2**40 + 3,
            "cache_read_tokens": 26,
            "cache_write_5m_tokens": 28,
            "cache_write_1h_tokens": 30,
            "reasoning_tokens": 32,
            "server_tool_requests": 4,
            "cost_usd": 0.25,
            "unpriced": 1,
        }
    ]
    assert as_json([none])[0]["cost_usd"] is None


def test_the_table_shows_keys_counts_and_a_cost_or_a_dash() -> None:
    rows = summarize(
        [
            make(1, owner="a", cost_usd=0.5),
            make(2, owner="a", cost_usd=None),
            make(3, owner="b", cost_usd=None),
        ],
        ("owner",),
    )
    header, a, b = table(rows, ("owner",)).splitlines()
    assert header.split() == [
        "owner",
        "requests",
        "failed",
        "input",
        "output",
        "cache_read",
        "cache_5m",
        "cache_1h",
        "reasoning",
        "tools",
        "cost_usd",
    ]
    assert a.startswith("a ") and a.endswith("0.5000 +1 unpriced")
    assert b.startswith("b ") and b.endswith(" -")


@pytest.mark.parametrize("text", ["", "owner,owner", "owner,colour", ","])
def test_bad_grouping_keys_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--by"):
        parse_keys(text)


def test_grouping_keys_are_read_in_order() -> None:
    assert parse_keys(" day, owner ") == ("day", "owner")
