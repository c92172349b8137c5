"""The Responses encoder builds the usual turns inline (an assistant's plain texts and
function calls, a tool turn of results of one text) and hands any other turn, undone,
to ``_message_items``. For any turns the items and the report are what
``_message_items`` makes of each turn."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols.openai_responses import request

from .._parts import SHORT_TEXT, TEXT_PARTS

_ITEM_ID = st.sampled_from([None, "fc_1", "ctc_2", "rs_3"])
_RESULT_CONTENT = st.sampled_from(
    [[c.Text(text="out")], [c.Text(text="a"), c.Text(text="b")], [], [c.Image(url="https://x")]]
)
_RESULT = st.builds(
    lambda content, kind, error, mark: c.ToolResult(
        call_id="c1",
        content=content,
        kind=kind,
        is_error=error,
        cache_control={"type": "ephemeral"} if mark else None,
    ),
    _RESULT_CONTENT,
    st.sampled_from(["function", "custom"]),
    st.booleans(),
    st.booleans(),
)
_PART = st.one_of(
    TEXT_PARTS,
    st.builds(
        lambda a, i: c.ToolCall(id="c1", name="f", arguments=a, item_id=i),
        st.sampled_from(["", "{}"]),
        _ITEM_ID,
    ),
    st.builds(
        lambda i: c.ToolCall(id="c2", name="p", arguments="x", kind="custom", item_id=i), _ITEM_ID
    ),
    _RESULT,
    st.builds(lambda t: c.Refusal(text=t), SHORT_TEXT),
    st.just(c.Reasoning(text="r", summary=True, encrypted_content="enc", item_id="rs_1")),
    st.just(c.Reasoning(text="r")),
    st.just(c.Reasoning(thought_signature="ts")),  # Gemini's bare carrier
    st.just(c.Reasoning(encrypted_content=reasoning_carry.PREFIX + "x")),  # packed: dropped
    st.just(c.Image(url="https://x/i.png")),
)
_MESSAGE = st.one_of(
    st.builds(
        lambda role, parts: c.Message(role=role, content=parts),
        st.sampled_from(["assistant", "tool", "user"]),
        st.lists(_PART, max_size=4),
    ),
    st.builds(lambda parts: c.Message(role="tool", content=parts), st.lists(_RESULT, max_size=3)),
)


def _general(messages: list[c.Message]) -> tuple[bytes, list[str]]:
    report = TranslationReport(lossy=True)
    items: list[Any] = []
    for m in messages:
        request._message_items(m, items, report)
    return msgspec.json.encode(items), report.dropped


@settings(max_examples=500, deadline=None)
@given(st.lists(_MESSAGE, max_size=4))
@example(  # a failed run's result, otherwise usual
    [
        c.Message(
            role="tool",
            content=[c.ToolResult(call_id="c", content=[c.Text(text="no")], is_error=True)],
        )
    ]
)
def test_the_usual_turns_inline_are_what_message_items_makes_of_them(
    messages: list[c.Message],
) -> None:
    report = TranslationReport(lossy=True)
    items = request._input_items(messages, report)
    assert (msgspec.json.encode(items), report.dropped) == _general(messages)
