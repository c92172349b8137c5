"""Hypothesis strategies for canonical parts, shared by the encoders' inline-turn tests."""

from __future__ import annotations

from hypothesis import strategies as st

from proxai_asgi import canonical as c

SHORT_TEXT = st.sampled_from(["", "a", "bc"])
# A text part plain, marked for caching, with no citations and with one: only the
# plain one (or the empty list) is a usual part.
TEXT_PARTS = st.one_of(
    st.builds(lambda t: c.Text(text=t), SHORT_TEXT),
    st.builds(lambda t: c.Text(text=t, cache_control={"type": "ephemeral"}), SHORT_TEXT),
    st.builds(lambda t: c.Text(text=t, citations=[]), SHORT_TEXT),
    st.builds(lambda t: c.Text(text=t, citations=[c.Citation(url="https://x")]), SHORT_TEXT),
)
