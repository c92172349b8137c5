"""Typed input items decode in the body's one parse; the result, the report and any
error are those of the item-by-item path."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi.codec import OnePassDecoder
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.openai_responses import request
from proxai_asgi.protocols.openai_responses import wire as w

_text = st.text(max_size=6)
_content = st.one_of(
    _text,
    st.lists(
        st.fixed_dictionaries(
            {"type": st.sampled_from(["input_text", "output_text", "refusal"]), "text": _text}
        ),
        max_size=2,
    ),
)
_items = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "developer", "system"]),
            "content": _content,
        },
        optional={"type": st.just("message"), "id": st.just("m1")},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("function_call"),
            "call_id": st.sampled_from(["c1", "c2"]),
            "name": st.just("f"),
            "arguments": st.just("{}"),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("function_call_output"), "call_id": st.sampled_from(["c1", "c2"])},
        optional={"output": _content},
    ),
    st.fixed_dictionaries({"type": st.just("reasoning"), "summary": st.just([])}),
    st.fixed_dictionaries({"type": st.just("item_reference"), "id": st.just("r1")}),
    st.fixed_dictionaries({"type": st.sampled_from(["web_search_call", "bogus"])}),
)
_bodies = st.fixed_dictionaries(
    {"model": st.just("m"), "input": st.lists(_items, max_size=5)},
    optional={"include": st.just([]), "store": st.booleans(), "unknown": st.just(1)},
)


class _Declines(OnePassDecoder[w.TypedClientCreateRequest]):
    def decode(self, body: bytes, report: TranslationReport) -> w.TypedClientCreateRequest | None:
        return None


def _outcome(raw: bytes, lossy: bool) -> tuple[object, ...]:
    report = TranslationReport(lossy)
    try:
        out = request.decode_request(raw, report)
    except ProxyError as e:
        return "error", e.status, e.message, e.param
    return "ok", msgspec.json.encode(out), report.dropped


@settings(max_examples=300, deadline=None)
@given(_bodies, st.booleans())
def test_typed_pass_and_item_by_item_path_agree(body: dict[str, Any], lossy: bool) -> None:
    raw = json.dumps(body).encode()
    fast = _outcome(raw, lossy)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(request, "_typed_pass", _Declines(w.TypedClientCreateRequest, ()))
        general = _outcome(raw, lossy)
    assert fast == general


def test_a_codex_body_takes_the_typed_pass_and_an_easy_message_does_not() -> None:
    typed = {
        "model": "m",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "ok"},
        ],
        "include": [],
    }
    report = TranslationReport()
    req = request._typed_pass.decode(json.dumps(typed).encode(), report)
    assert req is not None
    assert isinstance(req.input, list)
    assert [type(i) for i in req.input] == [
        w.MessageItem,
        w.FunctionCallItem,
        w.FunctionCallOutputItem,
    ]
    assert report.dropped == ["include"]
    easy = {"model": "m", "input": [{"role": "user", "content": "hi"}]}
    assert request._typed_pass.decode(json.dumps(easy).encode(), TranslationReport()) is None
