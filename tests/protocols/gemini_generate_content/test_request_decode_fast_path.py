"""The camelCase fast path of Gemini's request decoder gives what the general path
(a dict tree with proto names renamed, then converted) gives: the same canonical
request, the same report, the same error."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols._kit import json_objects, tool_schemas
from proxai_asgi.protocols.gemini_generate_content import request, signatures, validate, wire
from tests.helpers.schemas import plain_tools

# Request-shaped keys in both spellings, the user's own data keys, and unknown keys.
_keys = st.sampled_from(
    [
        "contents",
        "role",
        "parts",
        "text",
        "thought",
        "thoughtSignature",
        "thought_signature",
        "functionCall",
        "function_call",
        "functionResponse",
        "function_response",
        "inlineData",
        "inline_data",
        "mimeType",
        "mime_type",
        "data",
        "name",
        "id",
        "args",
        "response",
        "output",
        "file_path",
        "systemInstruction",
        "system_instruction",
        "generationConfig",
        "generation_config",
        "maxOutputTokens",
        "max_output_tokens",
        "temperature",
        "thinkingConfig",
        "thinking_budget",
        "_responseJsonSchema",
        "responseSchema",
        "tools",
        "functionDeclarations",
        "function_declarations",
        "parameters",
        "executableCode",
        "language_code",
        "toolConfig",
        "functionCallingConfig",
        "allowed_function_names",
        "mode",
        "labels",
        "unknownField",
    ]
)
_atoms = (
    st.none() | st.booleans() | st.integers(-1, 5) | st.sampled_from(["user", "model", "x", ""])
)
_shaped: st.SearchStrategy[Any] = st.recursive(
    _atoms,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=5),
    max_leaves=30,
)
_part = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=4),
        "functionCall": st.fixed_dictionaries({"name": st.just("f"), "args": _shaped}),
        "function_response": st.fixed_dictionaries({"name": st.just("f"), "response": _shaped}),
        "thoughtSignature": st.just("c2ln"),
        "executableCode": _shaped,
    },
)
# Function declarations, mostly with camelCase keys (kept as they are on the fast path),
# sometimes with a proto name, an older SDK spelling or a hosted tool beside them.
_declaration = st.dictionaries(
    st.sampled_from(
        [
            "name",
            "description",
            "parameters",
            "parametersJsonSchema",
            "parameters_json_schema",
            "_responseJsonSchema",
            "behavior",
        ]
    ),
    st.just("f") | _shaped,
    max_size=4,
)
_tools = st.lists(
    st.fixed_dictionaries({"functionDeclarations": st.lists(_declaration, max_size=3)})
    | st.dictionaries(st.sampled_from(["functionDeclarations", "googleSearch"]), _shaped),
    max_size=3,
)
_content = st.fixed_dictionaries(
    {"parts": st.lists(_part, min_size=1, max_size=3)},
    optional={"role": st.sampled_from(["user", "model"])},
)
_bodies = st.one_of(
    st.dictionaries(_keys, _shaped, max_size=6),
    st.fixed_dictionaries(
        {"contents": st.lists(_content, min_size=1, max_size=4)},
        optional={
            "tools": _shaped | _tools,
            "generationConfig": _shaped,
            "generation_config": _shaped,
            "toolConfig": _shaped,
            "systemInstruction": _content,
        },
    ),
)


def _outcome(decode: Any, raw: bytes) -> tuple[object, ...]:
    report = TranslationReport()
    try:
        out: c.Request = decode(raw, report)
    except ProxyError as e:
        return "error", e.status, e.message, e.param, e.code
    return "ok", msgspec.json.encode(out), report.dropped


def _general(raw: bytes, report: TranslationReport) -> c.Request:
    req = request.convert_request(request.parse_body(raw, report, check=True))
    validate.check_request(req)
    return request.to_canonical(req, report, "m", False)


def _production(raw: bytes, report: TranslationReport) -> c.Request:
    return request.decode_request(raw, report, "m", False)


@settings(max_examples=200, deadline=None)
@given(_bodies)
def test_fast_path_and_general_path_agree(body: dict[str, Any]) -> None:
    raw = json.dumps(body).encode()
    assert _outcome(_production, raw) == _outcome(_general, raw)


SDK_BODY = {
    "contents": [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"file_path": "a"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"x_y": 1}}}]},
    ],
    "tools": [{"function_declarations": [{"name": "f", "parameters": {"type": "OBJECT"}}]}],
    "generationConfig": {"maxOutputTokens": 10},
}


def test_sdk_body_takes_the_fast_path_with_its_tools_renamed() -> None:
    fast = request._decode_camel(json.dumps(SDK_BODY).encode())
    assert fast is not None
    req, function_tools = fast
    assert function_tools is None  # a proto name: not the usual tools
    assert req.tools == [
        {"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT"}}]}
    ]
    assert req.contents[1].parts[0].function_call is not None
    args = req.contents[1].parts[0].function_call.args  # kept raw (_arguments_in)
    assert msgspec.json.decode(args) == {"file_path": "a"}  # type: ignore[call-overload]


def test_camel_case_function_declarations_are_typed_in_the_one_pass() -> None:
    declaration = {"name": "f", "description": "d", "parametersJsonSchema": {"type": "object"}}
    body = {**SDK_BODY, "tools": [{"functionDeclarations": [declaration]}]}
    tool_schemas.forget()
    fast = request._decode_camel(json.dumps(body).encode())
    assert fast is not None
    req, function_tools = fast
    assert req.tools is None
    assert function_tools is not None
    assert msgspec.to_builtins(function_tools.tools) == [{"functionDeclarations": [declaration]}]
    out = request.decode_request(json.dumps(body).encode(), TranslationReport())
    assert plain_tools(out.tools) == [
        c.Tool(name="f", description="d", parameters={"type": "object"})
    ]


def test_proto_names_and_unknown_fields_decline_the_fast_path() -> None:
    proto = {"contents": [{"parts": [{"text": "hi"}]}], "generation_config": {"temperature": 1}}
    unknown = {"contents": [{"parts": [{"text": "hi", "partMetadata": {}}]}]}
    for body in (proto, unknown):
        assert request._decode_camel(json.dumps(body).encode()) is None
    report = TranslationReport()
    out = request.decode_request(json.dumps(proto).encode(), report)
    assert out.temperature == 1


@settings(max_examples=300, deadline=None)
@given(_tools)
def test_tools_on_the_fast_path_are_those_the_general_path_renames(tools: list[Any]) -> None:
    raw = json.dumps({"contents": [{"parts": [{"text": "hi"}]}], "tools": tools}).encode()
    # (tools with a field Google does not have decline: the general path answers its 400)
    assert request._decode_camel(raw) is not None or _outcome(_general, raw)[0] == "error"
    assert _outcome(_production, raw) == _outcome(_general, raw)


# Declarations shaped as clients write them, valid or not: the usual ones are typed in
# the fast decode's one pass, any other goes through the renamed dicts.
_declared = st.fixed_dictionaries(
    {"name": st.sampled_from(["f", "g", 1])},
    optional={
        "description": st.sampled_from(["d", "", None, 3]),
        "parameters": st.sampled_from(
            [{"type": "OBJECT", "properties": {"a": {"type": "STRING", "nullable": True}}}, None]
        ),
        "parametersJsonSchema": st.sampled_from([{"type": "object"}, None, [], "s"]),
        "parameters_json_schema": st.just({"type": "object"}),
        "response": st.sampled_from([{"type": "OBJECT"}, None, 2]),
        "responseJsonSchema": st.sampled_from([{}, None]),
        "_responseJsonSchema": st.just({}),
        "behavior": st.sampled_from(["BLOCKING", None, 1]),
    },
)
_usual_tools = (
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "functionDeclarations": st.none() | st.lists(_declared, max_size=3),
                "googleSearch": st.just({}),
            },
        ),
        max_size=3,
    )
    | st.none()
)


@settings(max_examples=200, deadline=None)
@given(_usual_tools)
def test_typed_tools_are_those_the_general_path_converts(tools: list[Any] | None) -> None:
    raw = json.dumps({"contents": [{"parts": [{"text": "hi"}]}], "tools": tools}).encode()
    assert _outcome(_production, raw) == _outcome(_general, raw)


# A call's ``args`` are kept raw by the fast decode (``_arguments_in``): every value,
# wherever a call may stand, gives what the general path's typed decode gives.
_ARGS = ["absent", "null", "{}", '{ "a" : [1, 2.50] }', '{"a":1,"a":2}', "[]", '"x"', "1", "true"]
_PLACES = {
    "model": lambda call: [{"role": "model", "parts": [{"text": "t"}, call]}],
    "thought": lambda call: [{"role": "model", "parts": [{**call, "thought": True}]}],
    "signed": lambda call: [{"role": "model", "parts": [{**call, "thoughtSignature": "c2ln"}]}],
    "user alone": lambda call: [{"role": "user", "parts": [call]}],
    "user with text": lambda call: [{"role": "user", "parts": [{**call, "text": "hi"}]}],
    "user turn": lambda call: [{"role": "user", "parts": [{"text": "a"}, {**call, "text": "b"}]}],
    "after a bad role": lambda call: [
        {"role": "x", "parts": [{"text": "a"}]},
        {"role": "model", "parts": [call]},
    ],
    "system": lambda call: [{"role": "user", "parts": [{"text": "a"}]}],
}


@pytest.mark.parametrize("args", _ARGS)
@pytest.mark.parametrize("place", list(_PLACES))
def test_raw_args_give_what_the_general_path_gives(args: str, place: str) -> None:
    call = {"name": "f"} if args == "absent" else {"name": "f", "args": "@ARGS@"}
    part = {"functionCall": call}
    body: dict[str, Any] = {"contents": _PLACES[place](part)}
    if place == "system":
        body["systemInstruction"] = {"parts": [{"text": "s", **part}]}
    raw = json.dumps(body).encode().replace(b'"@ARGS@"', args.encode())
    assert request._decode_camel(raw) is not None  # the fast decode takes any args
    json_objects.forget()
    expected = _outcome(_general, raw)
    # not seen (converted without the table), seen once (put in it), then found there
    for _ in range(3):
        assert _outcome(_production, raw) == expected


_signatures = st.sampled_from([None, "", "c2ln", signatures.SKIP_VALIDATOR, signatures.PACKED_HEAD])
_model_calls = st.none() | st.builds(
    wire.FunctionCall,
    name=st.just("f"),
    args=st.sampled_from([None, {"a": 1}, msgspec.Raw(b'{"a": 1}'), msgspec.Raw(b"null")]),
    id=st.sampled_from([None, "call_1"]),
)
_model_parts = st.builds(
    wire.Part,
    text=st.sampled_from([None, "", "a"]),
    thought=st.sampled_from([None, False, True]),
    thought_signature=_signatures,
    function_call=_model_calls,
)


def _walked(parts: list[wire.Part]) -> tuple[object, ...]:
    report = TranslationReport()
    try:
        messages = request._contents_in([wire.Content(role="model", parts=parts)], report)
    except ProxyError as e:
        return "error", e.status, e.message, e.param
    return "ok", msgspec.json.encode(messages), report.dropped


@settings(max_examples=400, deadline=None)
@given(_model_parts, _model_parts)
def test_a_model_turn_built_whole_is_what_the_loop_makes(said: wire.Part, p: wire.Part) -> None:
    """A model turn of two parts may be built whole; an empty text after them (which
    adds nothing) sends the same turn through the per-part loop."""
    looped = _walked(copy.deepcopy([said, p, wire.Part(text="")]))  # (it may set args)
    assert _walked(copy.deepcopy([said, p])) == looped
