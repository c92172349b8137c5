"""Tool schemas kept encoded (``proxai_asgi.protocols._kit.tool_schemas``): the
look-ups are bounded and keyed by content, give the bytes ``encode(decode(schema))``
gives, hold nothing of a request body; a translated request's tools are the bytes the
dict path writes, for any schema, in every direction; errors for bad schemas are what
they were."""

from __future__ import annotations

import json
import sys
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxai_asgi import bounded_cache
from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName, UpstreamOptions
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols import get_codec
from proxai_asgi.protocols._kit import tokens, tool_schemas
from tests.helpers.races import race
from tests.helpers.schemas import plain_request

A: ProtocolName = "anthropic_messages"
C: ProtocolName = "openai_chat_completions"
R: ProtocolName = "openai_responses"
G: ProtocolName = "gemini_generate_content"
ALL = (A, C, R, G)

_JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
_JSON = st.recursive(
    _JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)
# Objects, with or without a "type" (object or another), as clients write them.
SCHEMAS = st.dictionaries(st.text(max_size=5), _JSON, max_size=4) | st.fixed_dictionaries(
    {"type": st.sampled_from(["object", "string", 3])},
    optional={"properties": st.dictionaries(st.text(max_size=4), _JSON, max_size=3)},
)
# How a client may have written them: spacing and escapes that the compact form drops.
LAYOUTS = st.sampled_from(
    [
        {},
        {"indent": 2},
        {"ensure_ascii": False},
        {"separators": (",", ":")},
        {"indent": "\t", "ensure_ascii": False},
    ]
)


def _tool(protocol: ProtocolName, schema: Any, name: str = "f") -> dict[str, Any]:
    about = "Does f."
    if protocol == A:
        return {"name": name, "description": about, "input_schema": schema}
    if protocol == C:
        return {
            "type": "function",
            "function": {"name": name, "description": about, "parameters": schema},
        }
    if protocol == R:
        return {"type": "function", "name": name, "description": about, "parameters": schema}
    return {
        "functionDeclarations": [
            {"name": name, "description": about, "parametersJsonSchema": schema}
        ]
    }


def _body(protocol: ProtocolName, tools: Any, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        A: {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
        C: {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        R: {"model": "m", "input": "hi"},
        G: {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    }[protocol]
    return {**base, "tools": tools, **extra}


def _outcome(run: Any) -> tuple[Any, ...]:
    try:
        return ("ok", run())
    except ProxyError as e:
        return ("error", e.status, e.message, e.param)


# ------------------------------------------------------------------ the look-ups


@settings(max_examples=200, deadline=None)
@given(schema=st.dictionaries(st.text(max_size=5), _JSON, max_size=4), layout=LAYOUTS)
def test_a_schema_looked_up_is_encode_of_decode_of_what_the_client_wrote(
    schema: dict[str, Any], layout: dict[str, Any]
) -> None:
    written = json.dumps(schema, **layout).encode()
    lookup = tool_schemas.SchemaLookup()
    got = lookup.get(msgspec.Raw(written))
    again = lookup.get(msgspec.Raw(bytes(written)))  # the same content, another object
    want = msgspec.json.encode(msgspec.json.decode(written))
    assert got is not None and again is got
    assert bytes(got) == want
    assert len(lookup) == 1


def test_schema_lookup_takes_null_and_refuses_other_values() -> None:
    lookup = tool_schemas.SchemaLookup()
    assert lookup.get(msgspec.Raw(b"null")) is None
    for value in (b"5", b'"s"', b"[1]", b"true"):
        with pytest.raises(tool_schemas.NotAnObject):
            lookup.get(msgspec.Raw(value))


def test_tool_lookup_is_keyed_by_content_and_gives_copies() -> None:
    lookup = tool_schemas.ToolLookup()
    key = b'{"name": "f", "input_schema": {"type": "object"}}'
    made = c.Tool(name="f", parameters={"type": "object"})
    lookup.put(bytes(key), [made])
    assert lookup.get(b'{"name":"f","input_schema":{"type":"object"}}') is None  # other bytes
    first = lookup.get(bytearray(key).decode().encode())
    assert first is not None
    (tool,) = first
    assert bytes(tool.parameters) == b'{"type":"object"}'  # type: ignore[arg-type]
    assert made.parameters == {"type": "object"}  # the request's own tool is left as it was
    tool.name = "changed by its request"
    again = lookup.get(key)
    assert again is not None and again[0].name == "f"


def test_chat_function_tools_are_decoded_once_and_shared_unchanged() -> None:
    """A Chat client's function tools are found by their bytes; each request still gets
    its own canonical tools, and what one request does to them leaves the next alone."""
    tool_schemas.forget()
    body = json.dumps(_body(C, [_tool(C, {"type": "object"})])).encode()
    first = get_codec(C).decode_request(body, TranslationReport())
    first.tools[0].name = "changed by its request"
    second = get_codec(C).decode_request(body, TranslationReport())
    assert second.tools[0].name == "f" and second.tools[0] is not first.tools[0]
    assert bytes(second.tools[0].parameters) == b'{"type":"object"}'  # type: ignore[arg-type]


def test_a_lookup_kept_from_the_second_sighting_notes_the_first() -> None:
    lookup = tool_schemas.ToolLookup(on_second_sighting=True)
    key = b'{"name":"f","parameters":{"type":"object"}}'
    lookup.put(key, [c.Tool(name="f", parameters={"type": "object"})])
    assert lookup.get(key) is None and len(lookup) == 0  # noted only
    lookup.put(bytes(bytearray(key)), [c.Tool(name="f", parameters={"type": "object"})])
    (tool,) = lookup.get(key) or []
    assert tool.name == "f" and bytes(tool.parameters) == b'{"type":"object"}'  # type: ignore[arg-type]
    lookup.put(b"[]", [])
    tool_schemas.forget()  # empties what is noted too
    lookup.put(b"[]", [])
    assert lookup.get(b"[]") is None


def test_a_set_seen_again_by_two_threads_at_once_raises_nothing() -> None:
    """The note of a first sighting is taken back in one step. It was a membership test
    and then a ``del``: another thread seeing the same tools again in between took the
    note first, and the ``del`` raised (a 500 for a Gemini client). Now the note is a
    ``BoundedCache``'s, taken under its lock: threads switching every few bytecodes
    see the same sets again at once, and nothing raises."""
    lookup = tool_schemas.ToolLookup(on_second_sighting=True)
    keys = [b'{"name":"f%d","parameters":{"type":"object"}}' % k for k in range(4)]
    failures: list[str] = []

    def work() -> None:
        for i in range(300):
            key = keys[i % len(keys)]
            try:
                lookup.put(key, [c.Tool(name="f", parameters={"type": "object"})])
                if i % 7 == 0:
                    lookup.clear()
            except Exception as exc:  # the failure this test is about
                failures.append(repr(exc))

    race(lambda n: work(), 4)
    assert not failures, failures[:3]
    lookup.put(keys[0], [c.Tool(name="f")])
    lookup.put(keys[0], [c.Tool(name="f")])
    assert lookup.get(keys[0]) is not None


def test_lookups_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every look-up stays within its count and bytes (keys and values counted); an
    entry over ``MAX_ITEM_BYTES`` is used, not kept."""
    monkeypatch.setattr(tool_schemas, "MAX_ENTRIES", 4)
    monkeypatch.setattr(tool_schemas, "MAX_BYTES", 2000)
    monkeypatch.setattr(tool_schemas, "MAX_ITEM_BYTES", 400)
    schemas = tool_schemas.SchemaLookup()
    tools = tool_schemas.ToolLookup()
    values: tool_schemas.Lookup[int] = tool_schemas.Lookup(lambda key, value: len(key))
    twice = tool_schemas.ToolLookup(on_second_sighting=True)
    sizes = []
    for i in range(30):
        schemas.get(msgspec.Raw(f'{{"k": {i}}}'.encode()))
        key = f'{{"name": "t{i}", "pad": "{"x" * (i % 20) * 20}"}}'.encode()
        tools.put(key, [c.Tool(name="t")])
        values.put(key, i)
        twice.put(key, [c.Tool(name="t")])
        if i % 2:
            twice.put(key, [c.Tool(name="t")])
        # (longer: not kept)
        assert values.get(key) == (i if len(key) + bounded_cache.ENTRY_OVERHEAD <= 400 else None)
        seen = twice._seen
        assert seen is not None
        lookups = (schemas, tools, values, twice)
        sizes.append((*(len(x) for x in lookups), len(seen), *(x.nbytes for x in lookups)))
        sizes[-1] += (seen.nbytes,)
    assert max(s[0] for s in sizes) == 4 and max(max(s[1:5]) for s in sizes) <= 4
    assert max(max(s[5:]) for s in sizes) <= 2000
    big = msgspec.Raw(b'{"k": "' + b"y" * 300 + b'"}')  # over MAX_ITEM_BYTES: used, not kept
    kept = len(schemas)
    assert bytes(schemas.get(big)) == msgspec.json.encode({"k": "y" * 300})  # type: ignore[arg-type]
    assert len(schemas) == kept
    tool_schemas.forget()
    assert len(schemas) == len(tools) == len(values) == 0


@pytest.mark.parametrize("protocol", ALL)
def test_a_decoded_request_holds_nothing_of_its_body(protocol: ProtocolName) -> None:
    """A schema kept encoded is its own bytes, never a view into the body (which a
    ``msgspec.Raw`` slice of it would keep alive); so is every look-up's key."""
    tool_schemas.forget()
    body = json.dumps(_body(protocol, [_tool(protocol, {"type": "object", "x": [1]})])).encode()
    before = sys.getrefcount(body)
    held = [get_codec(protocol).decode_request(body, TranslationReport()) for _ in range(3)]
    assert sys.getrefcount(body) == before
    for request in held:
        (tool,) = request.tools
        p = tool.parameters
        assert p == {"type": "object", "x": [1]} or bytes(p) == b'{"type":"object","x":[1]}'  # type: ignore[arg-type]
    assert type(held[-1].tools[0].parameters) is msgspec.Raw  # the resent ones are looked up


@pytest.mark.parametrize(
    ("schema", "anthropic", "empty"),
    [
        ({"type": "object", "a": 1}, {"type": "object", "a": 1}, False),
        ({"a": 1}, {"type": "object", "a": 1}, False),
        ({}, {"type": "object"}, True),
        ({"type": "string"}, None, False),
        ({"type": None}, None, False),
        ({"type": "objects"}, None, False),
        ({"type": "object"}, {"type": "object"}, False),
        ({"type": ["object"]}, None, False),
    ],
)
def test_schema_facts_are_what_the_encoders_read_of_the_dict(
    schema: dict[str, Any], anthropic: dict[str, Any] | None, empty: bool
) -> None:
    facts = tool_schemas.facts(tool_schemas.compact(schema))
    want = None if anthropic is None else msgspec.json.encode(anthropic)
    assert (None if facts.anthropic is None else bytes(facts.anthropic)) == want
    form = tool_schemas.anthropic_form(tool_schemas.compact(schema))
    assert (None if form is None else bytes(form)) == want
    assert facts.empty is empty
    assert facts.text_length == len(str(schema or ""))


# ------------------------------------------- translation: the same bytes, any schema

_GRAMMAR = {"syntax": "lark", "definition": 'start: "*** Begin Patch" /(.|\\n)*/'}
_PATCH_TOOL = {
    C: {
        "type": "custom",
        "custom": {
            "name": "apply_patch",
            "description": "Patch files.",
            "format": {"type": "grammar", "grammar": _GRAMMAR},
        },
    },
    R: {
        "type": "custom",
        "name": "apply_patch",
        "description": "Patch files.",
        "format": {"type": "grammar", **_GRAMMAR},
    },
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schemas=st.lists(SCHEMAS, min_size=1, max_size=3),
    layout=LAYOUTS,
    client=st.sampled_from(ALL),
    custom=st.booleans(),
)
def test_translated_tools_are_the_bytes_of_the_dict_path_for_any_schema(
    schemas: list[dict[str, Any]], layout: dict[str, Any], client: ProtocolName, custom: bool
) -> None:
    """Decoded with empty look-ups and again from them, a client's request gives every
    upstream the body (or the error) and the token estimate that the same canonical
    request with its schemas as dicts gives (with a custom tool, as Codex sends, or a
    cache mark on Anthropic's last tool)."""
    tools = [_tool(client, s, f"t{i}") for i, s in enumerate(schemas)]
    if client == G:
        tools = [{"functionDeclarations": [t["functionDeclarations"][0] for t in tools]}]
    elif custom and client in (C, R):
        tools.append(_PATCH_TOOL[client])
    elif custom:  # an Anthropic SDK user's mark on the last tool, to cache them all
        tools[-1]["cache_control"] = {"type": "ephemeral"}
    body = json.dumps(_body(client, tools), **layout).encode()
    tool_schemas.forget()
    # (a look-up kept from the second sighting, as Gemini's, is filled by the second)
    cold, again, warm = (get_codec(client).decode_request(body, TranslationReport()) for _ in "123")
    assert any(type(t.parameters) is msgspec.Raw for t in warm.tools)
    plain = plain_request(warm)
    for upstream in ALL:
        if upstream == client:
            continue
        codec = get_codec(upstream)

        def encode(r: c.Request, codec: Any = codec) -> Any:
            return lambda: codec.encode_request(r, TranslationReport(), UpstreamOptions())

        want = _outcome(encode(plain))
        assert _outcome(encode(warm)) == want
        assert _outcome(encode(again)) == want
        assert _outcome(encode(cold)) == want
    assert tokens.estimate_input_tokens(warm) == tokens.estimate_input_tokens(plain)


# ------------------------------------------------------ errors: what they were

# (protocol, body, (message, param)): the 400s the proxy gave before schemas were kept
# encoded, on the first request and on a resent one alike.


def _at(want: str, got: str, path: str, prefix: str = "") -> tuple[str, str]:
    """A decode error's message (msgspec's words) and param."""
    return f"{prefix}Expected `{want}`, got `{got}` - at `$.{path}`", path


_CHAT = "Invalid request body: "
_OBJ = "object | null"
ERRORS = [
    (A, _body(A, [_tool(A, 5)]), _at(_OBJ, "int", "tools[0].input_schema")),
    (
        A,
        _body(A, [_tool(A, None)]),
        ("tools[0].input_schema: field required", "tools[0].input_schema"),
    ),
    (A, _body(A, [5]), _at("object", "int", "tools[0]")),
    (A, _body(A, "x"), _at("array | null", "str", "tools")),
    (A, _body(A, [_tool(A, 5)], temperature="hot"), _at("float | null", "str", "temperature")),
    (A, _body(A, [_tool(A, {}), 7], max_tokens="x"), _at("int", "str", "max_tokens")),
    (C, _body(C, [_tool(C, 5)]), _at(_OBJ, "int", "tools[0].function.parameters", _CHAT)),
    (C, _body(C, [_tool(C, [1])]), _at(_OBJ, "array", "tools[0].function.parameters", _CHAT)),
    (C, _body(C, [5]), _at("object", "int", "tools[0]", _CHAT)),
    (
        C,
        _body(C, [_tool(C, 5)], temperature="hot"),
        _at(_OBJ, "int", "tools[0].function.parameters", _CHAT),
    ),
    (C, _body(C, [_tool(C, {}), 7], max_tokens="x"), _at("object", "int", "tools[1]", _CHAT)),
    (R, _body(R, [_tool(R, 5)]), _at(_OBJ, "int", "tools[0].parameters")),
    (R, _body(R, [_tool(R, True)]), _at(_OBJ, "bool", "tools[0].parameters")),
    (R, _body(R, [5]), _at("object", "int", "tools[0]")),
    (R, _body(R, [_tool(R, 5)], temperature="hot"), _at("float | null", "str", "temperature")),
    (G, _body(G, [5]), _at("object", "int", "tools[0]")),
    (
        G,
        _body(G, [_tool(G, {}), 7], generationConfig={"maxOutputTokens": "x"}),
        _at("object", "int", "tools[1]"),
    ),
]


@pytest.mark.parametrize(("protocol", "body", "error"), ERRORS)
def test_bad_tools_get_the_400_they_always_got(
    protocol: ProtocolName, body: dict[str, Any], error: tuple[str, str]
) -> None:
    message, param = error
    raw = json.dumps(body).encode()
    tool_schemas.forget()
    for _ in range(2):  # nothing looked up, then whatever the first left
        got = _outcome(lambda: get_codec(protocol).decode_request(raw, TranslationReport()))
        assert got == ("error", 400, message, param)


@pytest.mark.parametrize("client", [C, R, G])
def test_a_schema_anthropic_refuses_is_refused_however_it_is_held(client: ProtocolName) -> None:
    body = json.dumps(_body(client, [_tool(client, {"type": "string"})])).encode()
    tool_schemas.forget()
    for _ in range(2):
        request = get_codec(client).decode_request(body, TranslationReport())
        got = _outcome(
            lambda r=request: get_codec(A).encode_request(r, TranslationReport(), UpstreamOptions())
        )
        message = "tools[0].parameters: Anthropic tool schemas must be of type object"
        assert got == ("error", 400, message, "tools[0].parameters")
