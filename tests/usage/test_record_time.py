"""The ledger's time text: ISO 8601, UTC, to the millisecond, the same as
``datetime.isoformat`` gives, across second boundaries (its second is cached)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from proxai_asgi.usage.record import iso_time


def _reference(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds")


@given(st.lists(st.floats(min_value=0, max_value=4e9, allow_nan=False), max_size=20))
def test_iso_time_is_datetimes_isoformat_in_any_order(times: list[float]) -> None:
    for when in times:
        assert iso_time(when) == _reference(when)


def test_the_cached_second_moves_on_with_time() -> None:
    assert iso_time(1795825241.999) == "2026-11-28T00:20:41.999+00:00"
    assert iso_time(1795825242.0) == "2026-11-28T00:20:42.000+00:00"
    assert iso_time(1795825241.5) == "2026-11-28T00:20:41.500+00:00"
    # microseconds that round up into the next second, as datetime rounds them
    assert iso_time(1795825241.9999997) == _reference(1795825241.9999997)
