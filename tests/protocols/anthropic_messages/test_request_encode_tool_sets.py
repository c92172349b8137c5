"""The Anthropic encoder writes a resent tool set as a whole, from a look-up
(``request._TOOL_SETS``, a ``tool_schemas.SetLookup``). A shortcut only: any request,
encoded with the look-up empty, then as a set whose key was seen, then as one whose
tools were, then from the entry, gives the same bytes, the same report and the same
error each time, with cache breakpoints placed or not; the look-up is keyed by
content, bounded, and holds bytes of its own."""

from __future__ import annotations

import sys
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols._kit import tool_schemas
from proxai_asgi.protocols.anthropic_messages import cache_breakpoints, request
from tests.helpers.races import race

_SCHEMAS = st.sampled_from(
    [
        {"type": "object", "properties": {"path": {"type": "string"}}},
        {"properties": {"n": {"type": "integer"}}},  # Anthropic's form adds "type"
        {},
        {"type": "string"},  # refused by Anthropic
    ]
)
_CACHE = st.none() | st.just({"type": "ephemeral"})
_TOOL = st.builds(
    c.Tool,
    name=st.sampled_from(["read", "write", "run"]),
    description=st.none() | st.just("Does it.") | st.just('"quoted" \u00e9'),
    parameters=st.builds(tool_schemas.compact, _SCHEMAS) | _SCHEMAS | st.none(),
    strict=st.none() | st.booleans(),
    kind=st.sampled_from(["function", "function", "function", "custom"]),
    cache_control=st.none() | st.none() | _CACHE,
)
_HOSTED = c.HostedTool(
    protocol="anthropic_messages", type="web_search_20250305", raw={"type": "web_search_20250305"}
)
_CHOICE = st.none() | st.builds(
    c.ToolChoice,
    mode=st.sampled_from(["auto", "none", "required", "tool"]),
    name=st.sampled_from(["read", "gone"]),
)
_TURNS = st.sampled_from(
    [
        [c.Message(role="user", content=[c.Text(text="hi")])],
        [c.Message(role="user", content=[c.Text(text="hi", cache_control={"type": "ephemeral"})])],
        [
            c.Message(role="user", content=[c.Text(text="go")]),
            c.Message(
                role="assistant",
                content=[c.Text(text="ok"), c.ToolCall(id="call_1", name="read", arguments="{}")],
            ),
            c.Message(
                role="tool", content=[c.ToolResult(call_id="call_1", content=[c.Text(text="x")])]
            ),
        ],
    ]
)


def _encode(req: c.Request, breakpoints: bool, lossy: bool = False) -> tuple[Any, ...]:
    report = TranslationReport(lossy)
    options = UpstreamOptions(cache_breakpoints=breakpoints)
    try:
        body = request.encode_request(req, report, options)
    except ProxyError as e:
        return ("error", e.status, e.message, e.param)
    return ("body", body, report.dropped)


@settings(max_examples=300, deadline=None)
@given(
    tools=st.lists(_TOOL, min_size=1, max_size=3),
    hosted=st.booleans(),
    choice=_CHOICE,
    parallel=st.none() | st.booleans(),
    system=st.sampled_from([[], [c.Text(text="sys")]]),
    turns=_TURNS,
    implicit=st.booleans(),
    breakpoints=st.booleans(),
    lossy=st.booleans(),
)
def test_a_kept_set_gives_the_bytes_report_and_error_of_the_general_path(
    tools: list[c.Tool],
    hosted: bool,
    choice: c.ToolChoice | None,
    parallel: bool | None,
    system: list[c.Text],
    turns: list[c.Message],
    implicit: bool,
    breakpoints: bool,
    lossy: bool,
) -> None:
    req = c.Request(
        model="m",
        messages=turns,
        system=system,
        tools=tools,
        hosted_tools=[_HOSTED] if hosted else [],
        tool_choice=choice,
        parallel_tool_calls=parallel,
        implicit_caching=implicit,
    )
    tool_schemas.forget()
    general = _encode(req, breakpoints, lossy)  # nothing looked up: the key noted
    assert _encode(req, breakpoints, lossy) == general  # the tools noted
    assert _encode(req, breakpoints, lossy) == general  # seen again: made into an entry
    kept = len(request._TOOL_SETS)
    assert kept == (
        1 if tool_schemas.keepable(tools) and not hosted and general[0] == "body" else 0
    )
    if kept:  # (what the next encode takes: not the general path)
        assert isinstance(request._tools_out(req, TranslationReport(lossy)), request.ToolSet)
    assert _encode(req, breakpoints, lossy) == general  # found
    other = _encode(req, not breakpoints, lossy)  # (the other form of the same entry)
    tool_schemas.forget()
    assert _encode(req, not breakpoints, lossy) == other


def _tools(*schemas: bytes) -> list[c.Tool]:
    return [
        c.Tool(name=f"t{i}", description="d", parameters=msgspec.Raw(s))
        for i, s in enumerate(schemas)
    ]


def _request(tools: list[c.Tool]) -> c.Request:
    return c.Request(
        model="m", messages=[c.Message(role="user", content=[c.Text(text="hi")])], tools=tools
    )


def test_a_set_is_found_by_its_content_not_its_names() -> None:
    """Two sets of the same names and other schemas each get their own bytes."""
    tool_schemas.forget()
    one = _request(_tools(b'{"type":"object","a":1}', b'{"type":"object"}'))
    other = _request(_tools(b'{"type":"object","a":2}', b'{"type":"object"}'))
    want_one, want_other = _encode(one, True), _encode(other, True)
    assert b'"a":1' in want_one[1] and b'"a":2' in want_other[1]
    for _ in range(3):
        assert _encode(one, True) == want_one
        assert _encode(other, True) == want_other
    one.tools[0].description = "changed"  # a request may change its own tools
    assert b'"description":"changed"' in _encode(one, True)[1]


def test_an_entry_holds_bytes_of_its_own() -> None:
    """A schema that is a view into a body (as a decoded ``Raw`` is) is copied into the
    entry, which would otherwise keep the whole body alive; one that owns its bytes (as
    the decoders' look-ups hold them) is shared."""
    tool_schemas.forget()
    body = b'{"s":{"type":"object"},"padding":"' + b"x" * 1000 + b'"}'
    view = msgspec.json.decode(body, type=dict[str, msgspec.Raw])["s"]
    own = msgspec.Raw(b'{"type":"object"}')
    req = _request([c.Tool(name="a", parameters=view), c.Tool(name="b", parameters=own)])
    before = sys.getrefcount(body)
    for _ in range(3):
        _encode(req, True)
    del view
    req.tools[0].parameters = None
    assert sys.getrefcount(body) == before - 1  # (``view`` was the only one left)
    ((key, (made, _)),) = request._TOOL_SETS._entries.items()
    kept = key.tools
    assert kept[0].parameters == own and kept[1].parameters is own
    assert [bytes(t) for t in made.plain] == [  # (the tools before the last, and the last)
        b'{"name":"a","input_schema":{"type":"object"}}',
        b'{"name":"b","input_schema":{"type":"object"}}',
    ]
    assert made.marked[0] is made.plain[0] and bytes(made.marked[1]) == (
        b'{"name":"b","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}'
    )


def test_the_look_up_is_bounded_and_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries and notes within their bounds; a set too large to keep is made once,
    noted as such, and not made again."""
    monkeypatch.setattr(tool_schemas, "MAX_ENTRIES", 6)
    monkeypatch.setattr(tool_schemas, "MAX_BYTES", 3000)
    monkeypatch.setattr(tool_schemas, "MAX_ITEM_BYTES", 900)
    made = _count_made(monkeypatch)
    lookup: tool_schemas.SetLookup[Any] = tool_schemas.SetLookup()  # (within those bounds)
    monkeypatch.setattr(request, "_TOOL_SETS", lookup)
    for i in range(20):
        pad = "x" * (300 if i % 5 == 4 else i)  # every fifth set too large to keep
        req = _request(_tools(f'{{"type":"object","p{i}":"{pad}"}}'.encode()))
        want = _encode(req, True)
        before = len(made)
        for _ in range(3):
            assert _encode(req, True) == want
        assert len(made) == before + 1  # (made on the third sight, then found or refused)
        assert (lookup.get(req.tools) is None) == (i % 5 == 4)
        for cache in (lookup._entries, lookup._names, lookup._noted):
            assert len(cache) <= 6 and cache.nbytes <= 3000
    tool_schemas.forget()
    assert len(lookup) == len(lookup._names) == len(lookup._noted) == 0


def _count_made(monkeypatch: pytest.MonkeyPatch) -> list[None]:
    """A list that grows by one each time an entry is made (put)."""
    made: list[None] = []
    put = tool_schemas.SetLookup.put

    def counted(self: Any, tools: list[c.Tool], value: Any, size: int) -> None:
        made.append(None)
        put(self, tools, value, size)

    monkeypatch.setattr(tool_schemas.SetLookup, "put", counted)
    return made


def test_a_set_that_changes_with_every_request_is_never_made_into_an_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tools alike in key whose content differs each time (a date in a description)
    are noted, never made into an entry, and each request gets its own bytes."""
    tool_schemas.forget()
    made = _count_made(monkeypatch)
    for day in range(6):
        tools = _tools(b'{"type":"object"}')
        tools[0].description = f"Today is day {day}."
        body = _encode(_request(tools), True)[1]
        assert f"Today is day {day}.".encode() in body
    assert made == [] and len(request._TOOL_SETS) == 0


def test_place_marks_a_set_held_encoded_with_its_marked_form() -> None:
    tool_schemas.forget()
    req = _request(_tools(b'{"type":"object"}', b'{"type":"object","a":1}'))
    for _ in range(3):
        _encode(req, True)
    tools = request._tools_out(req, TranslationReport())
    assert isinstance(tools, request.ToolSet)
    body = request.wire.UpstreamRequest(model="m", messages=[], max_tokens=1, tools=tools.plain)
    assert not cache_breakpoints.has_breakpoint(body)
    assert cache_breakpoints.place(body, marked_tools=tools.marked) == 1
    assert body.tools is tools.marked


def test_sets_alike_in_size_and_end_names_are_kept_side_by_side() -> None:
    """Sets that share a key (size, first and last name) each keep their entry."""
    tool_schemas.forget()
    sets = [
        _request([c.Tool(name=name, parameters=msgspec.Raw(b"{}")) for name in ("a", middle, "z")])
        for middle in ("b", "c", "d")
    ]
    for req in sets * 3:
        _encode(req, True)
    assert len(request._TOOL_SETS) == 3
    for req in sets:
        found = request._TOOL_SETS.get(req.tools)
        assert found is not None and f'"name":"{req.tools[1].name}"'.encode() in bytes(
            found.plain[0]
        )


def test_threads_translating_alike_sets_at_once_each_send_their_own_tools() -> None:
    """Noting and making entries is guarded: without it, two threads popping notes of
    sets alike in size and end names (a path in one tool's description) stored one
    set's tools under another's entry, or raised (a 500)."""
    families = [
        [
            c.Tool(name="read", description="reads", parameters=msgspec.Raw(b"{}")),
            c.Tool(name="exec", description=f"runs in /home/{k}", parameters=msgspec.Raw(b"{}")),
            c.Tool(name="write", description="writes", parameters=msgspec.Raw(b"{}")),
        ]
        for k in range(6)
    ]
    failures: list[str] = []

    def work(start: int) -> None:
        for i in range(150):
            k = (start + i) % len(families)
            try:
                outcome = _encode(_request(families[k]), True)
            except Exception as exc:  # the failure this test is about
                failures.append(repr(exc))
                continue
            if outcome[0] != "body" or f"/home/{k}".encode() not in outcome[1]:
                failures.append(f"set {k}: {outcome[:2]!r}")

    for _ in range(3):  # bounded: three rounds from an empty look-up
        tool_schemas.forget()
        race(work, 6)
    assert not failures, failures[:5]
