"""Hypothesis strategies shared by the Anthropic codec's property tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
"""Any JSON value (no NaN or infinity: JSON has none)."""
