"""A Chat client's set of function tools is decoded once and found by its bytes
(``request._TOOL_SETS``), with the canonical tools made of it: a resent set skips the
tool checks and ``_tools`` and is copied. Here any tool set, in any envelope, decodes
to what the general path makes of the same declarations (``_tools`` and
``check_tool_types`` run on them): the same canonical request, report and error, from
an empty look-up, the set found last, and a set found after another one."""

from __future__ import annotations

import json
import sys
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols._kit import tool_schemas
from proxai_asgi.protocols.openai_chat import request

_FUNCTION = st.fixed_dictionaries(
    {"name": st.sampled_from(["f", "g"])},
    optional={
        "description": st.sampled_from(["does f", None]),
        "parameters": st.sampled_from(
            [{"type": "object", "properties": {}}, {"b": 1, "a": [2]}, {}, None, [1], "s"]
        ),
        "strict": st.booleans(),
    },
)
_TOOL = st.one_of(
    st.fixed_dictionaries({"type": st.just("function"), "function": _FUNCTION}),
    st.fixed_dictionaries({"function": _FUNCTION}),  # (no type: a function)
    st.just({"type": "function"}),  # no function: a 400
    st.just({"type": "custom", "custom": {"name": "patch"}}),
    st.just({"type": "web_search"}),  # a 400
    st.just({"type": "function", "function": {"description": "no name"}}),
)
_ENVELOPE = st.fixed_dictionaries(
    {},
    optional={
        "tool_choice": st.sampled_from(["auto", {"type": "function", "function": {"name": "f"}}]),
        "functions": st.just([{"name": "legacy"}]),
        "temperature": st.sampled_from([0.5, 3.0]),
        "user": st.just("u"),
        "stream": st.booleans(),
    },
)
_MESSAGES = st.sampled_from(
    [
        [{"role": "user", "content": "hi"}],
        [{"role": "user", "content": ""}],  # a 400 of the messages
        [{"role": "function", "name": "f", "content": "x"}],  # a 400 of the walk
    ]
)


def _body(tools: Any, envelope: dict[str, Any], messages: list[Any]) -> bytes:
    return json.dumps({"model": "m", "messages": messages, "tools": tools, **envelope}).encode()


def _outcome(body: bytes) -> tuple[Any, ...]:
    report = TranslationReport()
    try:
        out = request.decode_request(body, report)
    except ProxyError as e:
        return ("error", e.status, e.message, e.param, report.dropped)
    kinds = [type(t.parameters).__name__ for t in out.tools]
    return ("ok", msgspec.json.encode(out), kinds, report.dropped)


def _general(body: bytes) -> tuple[Any, ...]:
    """The decode with no set's canonical tools used: ``_tools`` and the tool checks
    run on the declarations as ever."""
    found = request._tool_defs_in

    def declarations_only(req: Any) -> None:
        found(req)
        return None

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(request, "_tool_defs_in", declarations_only)
        return _outcome(body)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tools=st.one_of(st.lists(_TOOL, max_size=3), st.none(), st.just("x")),
    envelope=_ENVELOPE,
    messages=_MESSAGES,
)
@example(tools=[{"type": "function", "function": {"name": "f"}}], envelope={}, messages=[])
def test_a_tool_set_decodes_as_the_general_path_makes_it(
    tools: Any, envelope: dict[str, Any], messages: list[Any]
) -> None:
    body = _body(tools, envelope, messages)
    other = _body([{"type": "function", "function": {"name": "other"}}], {}, messages)
    tool_schemas.forget()
    expected = _general(body)
    tool_schemas.forget()
    assert _outcome(body) == expected  # an empty look-up
    assert _outcome(body) == expected  # the set found last
    _outcome(other)
    assert _outcome(body) == expected  # found by its bytes, after another set
    assert _outcome(bytes(bytearray(body))) == expected  # other bytes, same content
    assert _general(body) == expected


def _function_set(name: str) -> bytes:
    return _body(
        [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}],
        {},
        [{"role": "user", "content": "hi"}],
    )


def test_a_resent_set_is_found_by_content_and_each_request_gets_its_own_tools() -> None:
    tool_schemas.forget()
    first = request.decode_request(_function_set("f"), TranslationReport())
    second = request.decode_request(_function_set("f"), TranslationReport())
    g = request.decode_request(_function_set("g"), TranslationReport())  # same length
    assert [t.name for t in second.tools] == ["f"] and [t.name for t in g.tools] == ["g"]
    assert first.tools[0] is not second.tools[0]
    first.tools[0].name = "changed by its request"
    again = request.decode_request(_function_set("f"), TranslationReport())
    assert again.tools[0].name == "f"


def test_the_set_found_last_is_forgotten_with_the_others() -> None:
    tool_schemas.forget()
    request.decode_request(_function_set("f"), TranslationReport())
    assert request._TOOL_SETS._last[1] is not None and len(request._TOOL_SETS) == 1
    tool_schemas.forget()
    assert request._TOOL_SETS._last[1] is None and len(request._TOOL_SETS) == 0
    assert bytes(request._TOOL_SETS._last[0]) == b""


def test_a_set_over_the_bounds_is_not_kept_even_as_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tool_schemas.forget()
    monkeypatch.setattr(request._TOOL_SETS._cache, "max_item_bytes", 20)
    out = request.decode_request(_function_set("f"), TranslationReport())
    assert [t.name for t in out.tools] == ["f"]
    assert request._TOOL_SETS._last[1] is None and len(request._TOOL_SETS) == 0


def test_the_key_compared_first_is_bytes_of_its_own() -> None:
    """Not a view into a request body, which it would keep alive."""
    tool_schemas.forget()
    body = _function_set("f")
    before = sys.getrefcount(body)
    for _ in range(3):  # a miss, then the set found last
        request.decode_request(body, TranslationReport())
    assert sys.getrefcount(body) == before
    assert bytes(request._TOOL_SETS._last[0]) in body
