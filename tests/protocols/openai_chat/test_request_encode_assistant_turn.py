"""The Chat encoder builds the usual assistant turn (plain texts and function calls)
inline and hands any other to ``_Encoder.assistant``. For any mix of parts the
upstream message (or its absence) and the report are what ``assistant`` makes of the
whole turn."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols.openai_chat import request

from .._parts import SHORT_TEXT, TEXT_PARTS

_PART = st.one_of(
    TEXT_PARTS,
    st.builds(
        lambda i, a: c.ToolCall(id=i, name="f", arguments=a),
        st.sampled_from(["c1", "c2"]),
        st.sampled_from(["", "{}"]),
    ),
    st.builds(lambda i: c.ToolCall(id=i, name="p", arguments="x", kind="custom"), st.just("c3")),
    st.builds(lambda t: c.Refusal(text=t), SHORT_TEXT),
    st.builds(lambda t: c.Reasoning(text=t), SHORT_TEXT),
    st.just(c.Reasoning(text="r", signature="sig")),
    st.just(c.Reasoning(thought_signature="ts")),  # Gemini's bare carrier
    st.just(c.Reasoning(signature="sig", redacted="r")),
    st.just(c.Image(url="https://x/i.png")),
)


def _by_assistant(m: c.Message, options: UpstreamOptions) -> tuple[Any, list[str]]:
    report = TranslationReport(lossy=True)
    enc = request._Encoder(report, options)
    enc.assistant(m)
    body = json.loads(request._ENC.encode(enc.messages))
    return body, report.dropped


@settings(max_examples=400, deadline=None)
@given(st.lists(_PART, max_size=4), st.booleans())
def test_the_inline_assistant_turn_is_what_assistant_makes_of_it(
    parts: list[c.Part], echo: bool
) -> None:
    options = UpstreamOptions(echo_reasoning_content=echo)
    m = c.Message(role="assistant", content=parts)
    report = TranslationReport(lossy=True)
    out = json.loads(request.encode_request(c.Request(model="m", messages=[m]), report, options))
    assert (out["messages"], report.dropped) == _by_assistant(m, options)
