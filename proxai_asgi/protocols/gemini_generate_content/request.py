"""Gemini ``generateContent`` requests, in two halves: the client side (a client's body
decoded into a ``canonical.Request``), then the upstream side (a canonical request
encoded as a Gemini upstream's body).

The model and the stream flag are not in a Gemini body but in the URL
(``/v1beta/models/{model}:streamGenerateContent``): ``decode_request`` takes them as
arguments, and the upstream URL carries them on the way out (``paths.py``).

Client side (``decode_request``):
- roles ``user`` (or none) and ``model``; a ``function`` role (older clients) is a user
  turn. A user turn's ``functionResponse`` parts become a ``tool`` message placed
  before the rest of the turn.
- ``functionCall`` parts without an ``id`` get one derived from their place in the
  history (``gcall_h<turn>_<part>``); a ``functionResponse`` without an ``id`` takes the
  id of the earliest unanswered call of the same name, so it answers the same call.
- a ``functionResponse.response`` of ``{"output": <text>}`` / ``{"error": <text>}`` (the
  keys Google documents) becomes that text (an error result for ``error``); any other
  object becomes its JSON text.
- ``parameters`` (Google's OpenAPI-subset Schema: upper-case types, ``nullable``) are
  converted to JSON Schema; ``parametersJsonSchema`` is taken as it is.
- ``candidateCount`` above 1 is rejected (the hub carries one candidate), as ``n`` is
  toward Gemini; ``cachedContent`` (a Google-stored prompt prefix) and non-text
  ``responseModalities`` are rejected; ``safetySettings``, ``seed``, penalties,
  ``labels`` and speech/media settings are dropped and reported.

Upstream side (``encode_request``): tool schemas and response schemas are sent as JSON
Schema (``parametersJsonSchema``, ``responseJsonSchema``); tool results go as
``functionResponse`` ``{"output": ...}`` (``{"error": ...}`` for error results; a JSON
object result as that object), named after the call they answer. Thought signatures
are put back on their parts (``signatures.py``); a model turn whose first function call
has no Gemini signature gets ``SKIP_VALIDATOR``. Thinking: a budget is sent as
``thinkingBudget``, an effort as ``thinkingLevel``, off as ``thinkingBudget: 0``; a
summary request asks for ``includeThoughts``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from types import UnionType
from typing import Any, NamedTuple, Union, get_args, get_origin

import msgspec

from ... import canonical as c
from ...checks import settle, settles
from ...codec import RARE_REQUEST_FIELDS, UpstreamOptions, absent
from ...errors import ProxyError, TranslationReport
from .._kit import exact_json, hosted_code, hosted_search, json_objects, policy, tool_schemas
from .._kit.fast_paths import FAST
from .._kit.hosted_search import SEARCH
from .._kit.media import is_data_url, parse_data_url
from . import code_run, search, signatures, validate, wire
from .response import parts_in
from .validate import camel as _camel

# ============================================== client side: the client's body -> canonical

_json = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()
_PATH = re.compile(r"`\$\.?([^`]*)`")

# Keys whose values are the user's own data (schemas, arguments, results): their
# inner keys are never renamed.
_FREE_FORM = frozenset(
    {
        "args",
        "response",
        "parameters",
        "parametersJsonSchema",
        "responseSchema",
        "responseJsonSchema",
        "labels",
        "structValue",
    }
)
_KNOWN_FIELDS = frozenset(
    {
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "generationConfig",
        "safetySettings",
        "cachedContent",
        "labels",
        "model",
    }
)
DERIVED_CALL_PREFIX = "gcall_"
EMPTY_TURN = "(no content)"  # the text of a user turn that holds none

_MODE_IN = {"AUTO": "auto", "ANY": "required", "NONE": "none", "VALIDATED": "auto"}
_LEVEL_IN = {
    "MINIMAL": "minimal",
    "LOW": "low",
    "MEDIUM": "medium",
    "HIGH": "high",
    "XHIGH": "xhigh",
}


def _camel_keys(value: Any) -> Any:
    """Google accepts proto (snake_case) field names as well: rename them, except inside
    the user's own data."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            name = _camel(k) if isinstance(k, str) else k
            out[name] = v if name in _FREE_FORM else _camel_keys(v)
        return out
    if isinstance(value, list):
        return [_camel_keys(v) for v in value]
    return value


def _invalid(error: Exception) -> ProxyError:
    message = str(error)
    m = _PATH.search(message)
    return ProxyError.invalid(message, param=m.group(1) if m else None)


def parse_body(
    body: bytes, report: TranslationReport | None, check: bool = False
) -> dict[str, Any]:
    """The body as a camelCase dict; top-level fields we do not carry reported;
    ``check``: any field Google does not have rejected as Google does."""
    try:
        data = _json.decode(body)
    except (msgspec.DecodeError, ValueError) as e:
        raise ProxyError.invalid(f"request body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ProxyError.invalid("request body must be a JSON object")
    if check:
        validate.check_fields(data)
    renamed: dict[str, Any] = _camel_keys(data)
    if report is not None:
        for name in renamed:
            if name not in _KNOWN_FIELDS:
                report.drop(name)
    return renamed


def convert_request(data: dict[str, Any]) -> wire.GenerateContentRequest:
    try:
        return msgspec.convert(data, wire.GenerateContentRequest)
    except msgspec.ValidationError as e:
        raise _invalid(e) from None


def count_tokens_request(body: bytes) -> c.Request:
    """A ``countTokens`` body (``contents``, or a whole ``generateContentRequest``) as
    the canonical request it counts; lenient, as only an estimate comes of it."""
    data = parse_body(body, None)
    inner = data.get("generateContentRequest")
    if isinstance(inner, dict):
        data = inner
    data.pop("generateContentRequest", None)
    return to_canonical(convert_request(data), TranslationReport(lossy=True), "", False)


def decode_request(
    body: bytes, report: TranslationReport, model: str = "", stream: bool = False
) -> c.Request:
    camel = _decode_camel(body) if FAST.on else None  # fast path of the general one below
    if camel is not None:
        try:
            validate.check_request(camel[0])
            return to_canonical(camel[0], report, model, stream, camel[1])
        except (_Decline, ProxyError):
            pass  # the general path's error: its typed decode checks every call's args
    req = convert_request(parse_body(body, report, check=True))
    validate.check_request(req)
    return to_canonical(req, report, model, stream)


class _Decline(Exception):
    """A call's raw ``args`` (the fast decode) that are not an object: the general
    path's typed decode says what is wrong."""


# The fast path: a body written in camelCase only (what every SDK sends) decodes
# straight into the wire Structs, without a dict tree renamed key by key. Strict
# variants of the Structs refuse any unknown key, so a proto (snake_case) name, an
# unknown top-level field or anything else the general path treats specially makes
# the fast path decline; the general path then gives the same result, or the error.
def _strict(cls: type[Any], made: dict[type[Any], type[Any]]) -> type[Any]:
    if cls in made:
        return made[cls]

    def retype(t: Any) -> Any:
        if isinstance(t, type) and issubclass(t, msgspec.Struct):
            return _strict(t, made)
        args = get_args(t)
        if not args:
            return t
        origin = get_origin(t)
        if origin is list:
            return list[retype(args[0])]  # type: ignore[misc]
        if origin in (Union, UnionType):
            return Union[tuple(retype(a) for a in args)]  # noqa: UP007
        return t

    fields = [
        (f.name, retype(f.type), msgspec.field(default_factory=f.default_factory))
        if f.default_factory is not msgspec.NODEFAULT
        else (f.name, retype(f.type))
        if f.required
        else (f.name, retype(f.type), f.default)
        for f in msgspec.structs.fields(cls)
        if any(isinstance(a, type) and issubclass(a, msgspec.Struct) for a in _leaves(f.type))
    ]
    made[cls] = msgspec.defstruct(
        f"Strict{cls.__name__}", fields, bases=(cls,), forbid_unknown_fields=True
    )
    return made[cls]


def _leaves(t: Any) -> list[Any]:
    args = get_args(t)
    return [leaf for a in args for leaf in _leaves(a)] if args else [t]


@functools.cache
def _strict_decoder() -> msgspec.json.Decoder[wire.GenerateContentRequest]:
    """Built by the first Gemini client body (the strict classes and their decoder
    cost ~2 ms at import, which a Gemini upstream alone never needs). Its ``tools`` are
    left as raw JSON, for ``_tools_decoders``."""
    # A call's ``args`` are kept raw (``_arguments_in``), not decoded to a dict only to
    # be encoded again as canonical arguments.
    raw_args = msgspec.defstruct(
        "StrictRawArgsCall",
        [("args", msgspec.Raw, msgspec.Raw())],
        bases=(wire.FunctionCall,),
        forbid_unknown_fields=True,
    )
    strict = _strict(wire.GenerateContentRequest, {wire.FunctionCall: raw_args})
    raw_tools = msgspec.defstruct(
        "StrictRawToolsRequest",
        [("tools", msgspec.Raw, msgspec.Raw())],
        bases=(strict,),
        forbid_unknown_fields=True,
    )
    return msgspec.json.Decoder(raw_tools)


@functools.cache
def _tools_decoders() -> tuple[
    msgspec.json.Decoder[list[wire.FunctionTool] | None],
    msgspec.json.Decoder[list[dict[str, Any]] | None],
]:
    """The tools typed when they are the usual ones (function declarations only,
    camelCase), and as dicts otherwise; built with ``_strict_decoder``."""
    tool: Any = _strict(wire.FunctionTool, {})
    return msgspec.json.Decoder(list[tool] | None), msgspec.json.Decoder(
        list[dict[str, Any]] | None
    )


class _FunctionTools(NamedTuple):
    """The usual ``tools`` of a fast decode: their bytes and, typed, the declarations
    (or the canonical tools the same bytes made before)."""

    key: bytes
    tools: list[wire.FunctionTool] | list[c.Tool]


# The usual ``tools`` by their bytes: an agent loop resends the same ones with every
# request (``tool_schemas``); kept from their second sighting, so that a first request
# costs what it did before the look-up.
_TOOLS_IN = tool_schemas.ToolLookup(on_second_sighting=True)


def _decode_camel(
    body: bytes,
) -> tuple[wire.GenerateContentRequest, _FunctionTools | None] | None:
    """The body decoded by the strict classes, and its tools when they are the usual
    ones (``req.tools`` is then None); None when the general path must decode it."""
    try:
        req: wire.GenerateContentRequest = _strict_decoder().decode(body)
    except (msgspec.DecodeError, ValueError):
        return None  # not JSON, not camelCase, or invalid: the general path says which
    raw: msgspec.Raw = req.tools  # type: ignore[assignment]
    req.tools = None
    if not raw:  # no ``tools`` key
        return req, None
    key = bytes(raw)
    known = _TOOLS_IN.get(key)
    if known is not None:
        return req, _FunctionTools(key, known)
    typed, untyped = _tools_decoders()
    try:
        decoded = typed.decode(raw)
    except (msgspec.DecodeError, ValueError):
        pass
    else:
        return req, None if decoded is None else _FunctionTools(key, decoded)
    try:
        tools = untyped.decode(raw)
    except (msgspec.DecodeError, ValueError):
        return None
    # Of the untyped objects below a Struct, only the tools are read beyond whether they
    # are there (the others are reported as dropped): only they need the general path's
    # renaming, and the usual function declarations are camelCase already.
    if tools is not None:
        try:
            validate.check_tools(tools)
        except ProxyError:
            return None  # a field Google does not have: the general path's 400
        req.tools = _camel_tools(tools)
    return req, None


_DECLARATION_KEYS = frozenset(
    f.encode_name for f in msgspec.structs.fields(wire.FunctionDeclaration)
)


def _camel_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``tools`` as the general path renames them; as they are when every tool is
    function declarations with camelCase keys (nothing in them would be renamed: a
    declaration's other values are the user's schemas, or strings)."""
    for raw in tools:
        decls = raw.get("functionDeclarations")
        if len(raw) != 1 or type(decls) is not list:
            return _camel_keys(tools)  # type: ignore[no-any-return]
        for d in decls:
            if type(d) is not dict or not d.keys() <= _DECLARATION_KEYS:
                return _camel_keys(tools)  # type: ignore[no-any-return]
    return tools


def to_canonical(
    req: wire.GenerateContentRequest,
    report: TranslationReport,
    model: str,
    stream: bool,
    function_tools: _FunctionTools | None = None,
) -> c.Request:
    """The canonical request; ``function_tools`` are the usual tools, typed by the fast
    decode (the request's own ``tools`` are then None)."""
    if not req.contents:
        raise ProxyError.invalid("contents: at least one content is required", "contents")
    system = _system_in(req.system_instruction)
    messages = _contents_in(req.contents, report)
    if function_tools is None:
        tools, hosted = _tools_in(req.tools or [], report)
    else:
        tools, hosted = _function_tools_in(function_tools, report), []
    out = c.Request(
        model=model,
        messages=messages,
        system=system,
        tools=tools,
        hosted_tools=hosted,
        web_search=search.search_in(req.tools or [], report) if hosted else None,
        code_execution=hosted_code.code_in(hosted, report) if hosted else None,
        stream=stream,
        include_usage=stream,
    )
    _tool_config_in(req.tool_config, out, report)
    _generation_config_in(req.generation_config, out, report)
    if req.safety_settings is not None:
        report.drop("safetySettings")
    if req.cached_content is not None:
        report.reject(
            "cachedContent", "cached content is stored by Google and cannot be translated"
        )
    if req.labels is not None:
        report.drop("labels")
    return out


def _system_in(content: wire.Content | None) -> list[c.Text]:
    if content is None:
        return []
    out: list[c.Text] = []
    for j, p in enumerate(content.parts):
        _args_in(p)
        if p.text is None:
            path = f"systemInstruction.parts[{j}]"
            raise ProxyError.invalid(f"{path}: a system instruction holds only text", path)
        if p.text:
            out.append(c.Text(text=p.text))
    return out


def call_id_for_history(i: int, j: int) -> str:
    return f"{DERIVED_CALL_PREFIX}h{i}_{j}"


def _contents_in(contents: list[wire.Content], report: TranslationReport) -> list[c.Message]:
    """The conversation in one walk. The usual turns (a model turn of text and calls, a
    tool answer of one function response with an id and a text ``output``) are made
    inline; any other turn or part goes through the general code.

    An id-less function response answers the earliest unanswered call of its name in
    the last model turn: that list is only made (``_unanswered``) when a turn needs it,
    from the turn's parts and the ids answered since, as if kept all along.

    ``report.settled`` tells ``checks.check_request`` it may skip its walk: the usual
    turns hold no media and their answer names the latest call made (else one of the
    last model turn's); what the other paths build is looked at (``settles``)."""
    messages: list[c.Message] = []
    add = messages.append
    arguments_in: Callable[[Any], str] | None = None  # (_arguments_way)
    turn: list[c.Part] = []  # the last model turn's parts
    answered: list[str] | None = []  # the ids answered since; None once made into:
    unanswered: list[tuple[str, str]] = []  # (name, id) of its calls not yet answered
    settled = True
    made: str | None = None  # the id of the latest call made (the one the usual answer names)
    fast = FAST.on
    for i, content in enumerate(contents):
        role, parts = content.role, content.parts
        if role == "model":
            # Fast path of the loop below: an agent loop's model turn, whole: a text,
            # then a call (signed by Gemini or not); the same parts as the loop makes.
            if fast and len(parts) == 2:
                said, p = parts
                fc, signature = p.function_call, p.thought_signature
                if (
                    fc is not None
                    and said.text
                    and said.function_call is None
                    and said.thought_signature is None
                    and not said.thought
                    and not p.thought
                    and not (signature and _PACKED_LOW <= signature < _PACKED_HIGH)
                ):
                    call = _ToolCall(
                        id=(made := fc.id or call_id_for_history(i, 0)),
                        name=fc.name,
                        arguments=(arguments_in or _known_arguments)(args := fc.args)
                        or (arguments_in := _arguments_way(args))(args),
                    )
                    turn = (
                        [_Text(text=said.text), call]
                        if not signature
                        else [
                            _Text(text=said.text),
                            _Reasoning(
                                text="",
                                summary=True,
                                thought_signature=_SKIP_VALIDATOR
                                if signature == _SKIP_VALIDATOR
                                else signature,
                            ),
                            call,
                        ]
                    )
                    add(_Message(role="assistant", content=turn))
                    answered = []
                    continue
            out: list[c.Part] = []
            calls = 0
            other = False  # a part through the general code (media among them)
            for p in parts:
                signature, fc = p.thought_signature, p.function_call
                if p.thought or (signature and _PACKED_LOW <= signature < _PACKED_HIGH):
                    calls += _other_part_in(p, out, i, calls, report)
                    other = True
                elif fc is not None:
                    if signature:  # Gemini's own: a bare reasoning part before the call
                        if signature == _SKIP_VALIDATOR:  # (held once, not per call)
                            signature = _SKIP_VALIDATOR
                        out.append(_Reasoning(text="", summary=True, thought_signature=signature))
                    out.append(
                        _ToolCall(
                            id=(made := fc.id or call_id_for_history(i, calls)),
                            name=fc.name,
                            arguments=(arguments_in or _known_arguments)(args := fc.args)
                            or (arguments_in := _arguments_way(args))(args),
                        )
                    )
                    calls += 1
                elif (text := p.text) is None:
                    calls += _other_part_in(p, out, i, calls, report)
                    other = True
                else:
                    if signature:
                        out.append(_Reasoning(text="", summary=True, thought_signature=signature))
                    if text:
                        if out and type(out[-1]) is _Text:
                            out[-1].text += text
                        else:
                            out.append(_Text(text=text))
            add(_Message(role="assistant", content=out))
            turn, answered = out, []
            if other and settled:
                settled = settles(out)
        elif not role or role == "user" or role == "function":
            if fast and len(parts) == 1 and (p := parts[0]).function_call is None:
                # fast path of ``_user_turn``: the usual user turns, as it makes them
                fr = p.function_response
                if fr is None:
                    if p.text and not p.thought:  # a text
                        add(_Message(role="user", content=[_Text(text=p.text)]))
                        continue
                elif (
                    (call_id := fr.id) is not None
                    and not fr.parts
                    and (response := fr.response) is not None
                    and len(response) == 1
                    and type(output := response.get("output")) is str
                ):  # an answer with an id and a text output
                    if answered is not None:
                        answered.append(call_id)
                    else:
                        _answer(unanswered, call_id)
                    if call_id != made and settled:
                        settled = call_id in _calls_of(turn)
                    result = _ToolResult(
                        call_id=call_id, content=[_Text(text=output)] if output else []
                    )
                    add(_Message(role="tool", content=[result]))
                    continue
            if answered is not None:
                unanswered, answered = _unanswered(turn, answered), None
            start = len(messages)
            _user_turn(parts, i, unanswered, report, messages)
            if settled:
                settled = settle(messages[start:], _calls_of(turn))
        else:
            path = f"contents[{i}].role"
            raise ProxyError.invalid(f"{path}: expected 'user' or 'model', got {role!r}", path)
    report.settled = settled
    return messages


def _calls_of(turn: list[c.Part]) -> set[str]:
    return {p.id for p in turn if type(p) is c.ToolCall}


def _unanswered(turn: list[c.Part], answered: list[str]) -> list[tuple[str, str]]:
    """The (name, id) of a model turn's calls that ``answered`` leaves unanswered."""
    unanswered = [(p.name, p.id) for p in turn if type(p) is c.ToolCall]
    for call_id in answered:
        _answer(unanswered, call_id)
    return unanswered


def _answer(unanswered: list[tuple[str, str]], call_id: str) -> None:
    for k, call in enumerate(unanswered):
        if call[1] == call_id:
            del unanswered[k]
            return


# Bound once: the decode's inner loops look these up for every part.
_Text, _ToolCall, _Reasoning = c.Text, c.ToolCall, c.Reasoning
_Message, _ToolResult = c.Message, c.ToolResult


def _prefix_range(prefix: str) -> tuple[str, str]:
    """(low, high) such that a string starts with ``prefix`` exactly when
    ``low <= s < high``: two string comparisons, half the time of ``startswith``."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


_PACKED_LOW, _PACKED_HIGH = _prefix_range(signatures.PACKED_HEAD)
_encode = _encoder.encode
_EMPTY_ARGS = b"{}"
_Raw, _ARGUMENTS = msgspec.Raw, json_objects.ARGUMENTS


def _known_arguments(args: Any) -> str | None:
    """A call's ``args`` as canonical arguments: raw from the fast decode, found in the
    table (None when not: ``_arguments_way``); a dict (or None) from the general path."""
    if type(args) is _Raw:
        return _ARGUMENTS.recent(bytes(args))
    return (_EMPTY_ARGS if args is None else _encode(args)).decode()


def _call_arguments_in(args: Any) -> str:
    """``_known_arguments``, raw ``args`` the table lacks converted and put in it."""
    if type(args) is _Raw:
        key = bytes(args)
        return _ARGUMENTS.recent(key) or _arguments_in(key)
    return (_EMPTY_ARGS if args is None else _encode(args)).decode()


def _unkept_arguments_in(args: Any) -> str:
    """``_call_arguments_in`` without the table (a call not seen before)."""
    if type(args) is not _Raw:
        return _call_arguments_in(args)
    value = _json.decode(args) if args else None
    if type(value) is dict:
        return _encode(value).decode()
    if value is not None:
        raise _Decline
    return "{}"


def _arguments_way(args: Any) -> Callable[[Any], str]:
    """How a request converts its calls' ``args`` once one has missed the table (these):
    through the table, unless that call is one not seen before (``json_objects.kept``:
    a conversation's first request, or its newest call); then without it. A request
    whose calls are all in the table never asks."""
    if json_objects.kept(bytes(args), _ARGUMENTS, json_objects.ARGUMENT_MAX_BYTES):
        return _call_arguments_in
    return _unkept_arguments_in


def _arguments_in(raw: bytes) -> str:
    """A call's raw ``args`` as canonical arguments (``{}`` when absent or null)."""
    if raw[:1] == b"{":
        return json_objects.arguments(raw)
    if not raw or raw == b"null":
        return "{}"
    raise _Decline


def _args_in(p: wire.Part) -> None:
    """A part's call with the fast decode's raw ``args`` given the general path's
    (a dict, or None), for the code that reads them as such; the fast path declines
    args that are not an object wherever a call is (the general path's typed decode
    rejects them even where nothing reads them)."""
    fc = p.function_call
    args: Any = fc.args if fc is not None else None
    if type(args) is _Raw:
        raw = bytes(args)
        _arguments_in(raw)  # declines what is not an object
        fc.args = _json.decode(raw) if raw[:1] == b"{" else None  # type: ignore[union-attr]


def _media_in(p: wire.Part) -> c.Part | None:
    if p.inline_data is not None:
        mime = p.inline_data.mime_type or ""
        if mime.startswith("image/"):
            return c.Image(data=p.inline_data.data, media_type=mime)
        return c.File(data=p.inline_data.data, media_type=mime or None)
    if p.file_data is not None:
        mime = p.file_data.mime_type or ""
        if mime.startswith("image/"):
            return c.Image(url=p.file_data.file_uri, media_type=mime)
        return c.File(url=p.file_data.file_uri, media_type=mime or None)
    return None


def _other_part_in(
    p: wire.Part, out: list[c.Part], i: int, calls: int, report: TranslationReport
) -> int:
    """A model turn's part that is not text or a plain function call (a thought, a
    carrier we packed, media), through ``parts_in``; returns its call count."""
    _args_in(p)

    def other(p: wire.Part) -> c.Part | None:
        media = _media_in(p)
        if media is None and p.function_response is not None:
            path = f"contents[{i}].parts"
            raise ProxyError.invalid(
                f"{path}: a functionResponse belongs in a user turn", f"{path}.functionResponse"
            )
        if media is None:
            _drop_part(p, report)
        return media

    return parts_in([p], out, lambda fc, n: fc.id or call_id_for_history(i, calls + n), other)


def _drop_part(p: wire.Part, report: TranslationReport) -> None:
    for name in ("executable_code", "code_execution_result", "video_metadata"):
        if getattr(p, name) is not None:
            report.drop(f"parts.{_camel(name)}")


def result_content_in(response: dict[str, Any] | None) -> tuple[list[c.Part], bool]:
    """A ``functionResponse.response`` as tool-result content, and whether it is an error."""
    response = response or {}
    if len(response) == 1:
        ((key, value),) = response.items()
        if key in ("output", "error") and isinstance(value, str):
            return ([c.Text(text=value)] if value else []), key == "error"
    return [c.Text(text=_encoder.encode(response).decode())], False


def _user_turn(
    parts: list[wire.Part],
    i: int,
    unanswered: list[tuple[str, str]],
    report: TranslationReport,
    messages: list[c.Message],
) -> None:
    """A user turn appended to ``messages``: its function responses as one tool
    message, then the rest of it (a user message, also when the turn holds nothing)."""
    results: list[c.Part] = []
    rest: list[c.Part] = []
    for j, p in enumerate(parts):
        if p.function_call is not None:
            _args_in(p)
        fr = p.function_response
        if fr is not None:
            call_id = fr.id
            for k, (name, cid) in enumerate(unanswered):
                if (call_id is not None and cid == call_id) or (
                    call_id is None and name == fr.name
                ):
                    call_id = cid
                    del unanswered[k]
                    break
            if call_id is None:
                call_id = call_id_for_history(i, j)  # answers nothing: checks.py says so
            if fr.parts:
                report.drop("functionResponse.parts")
            response = fr.response
            if response is not None and len(response) == 1 and "output" in response:
                output = response["output"]  # the usual result: {"output": <text>}
                if type(output) is str:
                    content: list[c.Part] = [c.Text(text=output)] if output else []
                    results.append(c.ToolResult(call_id=call_id, content=content))
                    continue
            content, is_error = result_content_in(response)
            results.append(c.ToolResult(call_id=call_id, content=content, is_error=is_error))
        elif p.text is not None:
            if p.text and not p.thought:
                rest.append(c.Text(text=p.text))
        elif (media := _media_in(p)) is not None:
            rest.append(media)
        elif p.function_call is not None:
            path = f"contents[{i}].parts[{j}]"
            raise ProxyError.invalid(
                f"{path}: a functionCall belongs in a model turn", f"{path}.functionCall"
            )
        else:
            _drop_part(p, report)
    if results:
        messages.append(c.Message(role="tool", content=results))
    if rest or not results:
        # A turn of empty text only (Gemini takes it; real clients send one after a
        # system instruction): the other APIs refuse an empty user turn, and dropping it
        # leaves none, or a history that starts with the model's calls.
        messages.append(c.Message(role="user", content=rest or [c.Text(text=EMPTY_TURN)]))


# ------------------------------------------------------------------- schemas

_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def schema_to_json(schema: Any) -> Any:
    """Google's Schema (OpenAPI subset: ``"STRING"``, ``nullable``, ``propertyOrdering``)
    as JSON Schema."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k == "type" and isinstance(v, str):
            out["type"] = v.lower()
        elif k == "properties" and isinstance(v, dict):
            out[k] = {name: schema_to_json(s) for name, s in v.items()}
        elif k == "items":
            out[k] = schema_to_json(v)
        elif k in _SCHEMA_LISTS and isinstance(v, list):
            out[k] = [schema_to_json(s) for s in v]
        elif k in ("nullable", "propertyOrdering"):
            continue
        else:
            out[k] = v
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


# --------------------------------------------------------------------- tools


def _tools_in(
    raw_tools: list[dict[str, Any]], report: TranslationReport
) -> tuple[list[c.Tool], list[c.HostedTool]]:
    tools: list[c.Tool] = []
    hosted: list[c.HostedTool] = []
    for i, raw in enumerate(raw_tools):
        for key, value in raw.items():
            if key != "functionDeclarations":
                hosted.append(
                    c.HostedTool(protocol="gemini_generate_content", type=key, raw={key: value})
                )
                continue
            try:
                decls = msgspec.convert(value or [], list[wire.FunctionDeclaration])
            except msgspec.ValidationError as e:
                where = f"`$.tools[{i}].functionDeclarations"
                message = str(e)
                if "`$" in message:
                    message = message.replace("`$", where, 1)
                else:  # an error at the root of the converted value names no path
                    message += f" - at {where}`"
                raise _invalid(ValueError(message)) from None
            _declarations_in(decls, tools, report)
    return tools, hosted


def _function_tools_in(function_tools: _FunctionTools, report: TranslationReport) -> list[c.Tool]:
    key, typed = function_tools
    if not typed or type(typed[0]) is c.Tool:  # made before (``_decode_camel``)
        return typed  # type: ignore[return-value]
    tools: list[c.Tool] = []
    plain = True  # nothing reported: the same tools for the same bytes
    for t in typed:
        decls: list[wire.FunctionDeclaration] = t.function_declarations or []  # type: ignore[union-attr]
        _declarations_in(decls, tools, report)
        for d in decls:  # (as ``_declarations_in`` reports them)
            answer = d.response is not None or d.response_json_schema is not None
            if answer or d.behavior is not None:
                plain = False
    if plain:
        _TOOLS_IN.put(key, tools)
    return tools


def _declarations_in(
    decls: list[wire.FunctionDeclaration], tools: list[c.Tool], report: TranslationReport
) -> None:
    for d in decls:
        params = d.parameters_json_schema
        if params is None and d.parameters is not None:
            params = schema_to_json(d.parameters)
        if d.response is not None or d.response_json_schema is not None:
            report.drop("functionDeclarations.response")
        if d.behavior is not None:
            report.drop("functionDeclarations.behavior")
        tools.append(
            c.Tool(
                name=d.name,
                description=d.description or None,
                parameters=params if isinstance(params, dict) else None,
            )
        )


def _tool_config_in(
    config: wire.ToolConfig | None, out: c.Request, report: TranslationReport
) -> None:
    if config is None:
        return
    if config.retrieval_config is not None:
        report.drop("toolConfig.retrievalConfig")
    fcc = config.function_calling_config
    if fcc is None or fcc.mode is None:
        return
    mode = _MODE_IN.get(fcc.mode.upper())
    if mode is None:
        path = "toolConfig.functionCallingConfig.mode"
        raise ProxyError.invalid(f"{path}: unknown mode {fcc.mode!r}", path)
    if fcc.mode.upper() == "VALIDATED":
        report.drop("toolConfig.functionCallingConfig.mode")  # no such mode elsewhere
    allowed = fcc.allowed_function_names
    if allowed and mode == "required":
        # Only these may be called this turn: the others are not offered.
        out.tools = [t for t in out.tools if t.name in allowed]
        if len(allowed) == 1:
            out.tool_choice = c.ToolChoice(mode="tool", name=allowed[0])
            return
    elif allowed:
        report.drop("toolConfig.functionCallingConfig.allowedFunctionNames")
    out.tool_choice = c.ToolChoice(mode=mode)  # type: ignore[arg-type]


def _generation_config_in(
    g: wire.GenerationConfig | None, out: c.Request, report: TranslationReport
) -> None:
    if g is None:
        return
    out.max_tokens = g.max_output_tokens
    out.temperature = g.temperature
    out.top_p = g.top_p
    out.top_k = g.top_k
    out.stop = list(g.stop_sequences or ())
    if not (FAST.on and RARE_FIELDS(g)):  # (fast path: none of them there)
        _rare_generation_config_in(g, out, report)
    out.reasoning = _thinking_in(g.thinking_config)


# The generationConfig fields a usual request leaves out, handled only when one is there.
# Those with no canonical meaning, dropped and reported:
_DROPPED = (
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "media_resolution",
    "speech_config",
    "image_config",
    "enable_enhanced_civic_answers",
)
RARE_FIELDS = absent(
    "candidate_count",
    "response_logprobs",
    "logprobs",
    "response_mime_type",
    "response_modalities",
    *_DROPPED,
)


def _rare_generation_config_in(
    g: wire.GenerationConfig, out: c.Request, report: TranslationReport
) -> None:
    if g.candidate_count is not None and g.candidate_count > 1:
        # The hub carries one candidate: asking several of any upstream would lose all
        # but the first.
        report.reject("generationConfig.candidateCount", "only one candidate can be translated")
    if g.response_logprobs:
        out.logprobs = True
    if g.logprobs is not None:
        out.top_logprobs = g.logprobs
    mime = g.response_mime_type
    if mime == "application/json":
        schema = g.response_json_schema
        if schema is None and g.response_schema is not None:
            schema = schema_to_json(g.response_schema)
        if isinstance(schema, dict):
            out.response_format = c.ResponseFormat(
                type="json_schema", name="response", schema=schema
            )
        else:
            out.response_format = c.ResponseFormat(type="json_object")
    elif mime not in (None, "text/plain"):  # XML, YAML, an enum: no other API has them
        report.reject("generationConfig.responseMimeType", f"{mime} answers cannot be translated")
    modalities = g.response_modalities
    if modalities and any(m.upper() != "TEXT" for m in modalities):
        report.reject("generationConfig.responseModalities", "only text answers can be translated")
    for name in _DROPPED:
        if getattr(g, name) is not None:
            report.drop(f"generationConfig.{_camel(name)}")


def _thinking_in(t: wire.ThinkingConfig | None) -> c.ReasoningConfig | None:
    if t is None:
        return None
    rc = c.ReasoningConfig()
    if t.include_thoughts:
        rc.summary = "auto"
    budget = t.thinking_budget
    if budget == 0:
        rc.enabled, rc.effort = False, "none"
    elif budget is not None and budget > 0:
        rc.enabled, rc.budget_tokens = True, budget
    elif budget is not None:  # -1: dynamic thinking
        rc.enabled = True
    if t.thinking_level is not None:
        rc.effort = _LEVEL_IN.get(t.thinking_level.upper(), rc.effort)
        rc.enabled = True
    if rc == c.ReasoningConfig():
        return None
    return rc


# ============================================ upstream side: canonical -> this upstream's body

_MODE_OUT = {"auto": "AUTO", "required": "ANY", "none": "NONE", "tool": "ANY"}
_LEVEL_OUT = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
}


def encode_request(
    request: c.Request, report: TranslationReport, options: UpstreamOptions
) -> bytes:
    return exact_json.encode_made(_encoder, to_wire, request, report)


def to_wire(request: c.Request, report: TranslationReport) -> wire.UpstreamRequest:
    if request.system_turns:  # Gemini has no system turn in a conversation
        request = policy.hoist_system_turns(request, report)
    if not (FAST.on and RARE_REQUEST_FIELDS(request)):  # (fast path: none there)
        _check_fields(request, report)
    if request.parallel_tool_calls is False:
        report.drop("parallel_tool_calls")
    tools = _tools_out(request, report)
    return wire.UpstreamRequest(
        contents=_contents_out(request.messages, report),
        system_instruction=_system_out(request.system),
        tools=tools or None,
        tool_config=_tool_config_out(request, bool(request.tools), report),
        generation_config=_generation_config_out(request, report),
    )


def _check_fields(request: c.Request, report: TranslationReport) -> None:
    if request.n is not None and request.n > 1:
        report.reject("n", "several candidates cannot be translated; ask for one")
    if request.logprobs:
        report.reject("logprobs", "log probabilities cannot be translated from Gemini")
    if request.top_logprobs:
        report.reject("top_logprobs", "log probabilities cannot be translated from Gemini")
    if request.previous_response_id is not None:
        report.reject("previous_response_id", "Gemini is stateless; send the whole history")
    if request.background:
        report.reject("background", "Gemini has no background responses")
    for name in ("user", "metadata", "prompt_cache_key", "verbosity", "service_tier"):
        if getattr(request, name):
            report.drop(name)


def _system_out(system: list[c.Text]) -> wire.Content | None:
    parts = [wire.Part(text=t.text) for t in system if t.text]
    return wire.Content(parts=parts) if parts else None


# Bound once: the encode's inner loops look these up for every part.
_CallOut = wire.CallOut
_ResponseOut, _Output = wire.ResponseOut, wire.Output
_TextPart, _CallPart, _ResponsePart = wire.TextPart, wire.CallPart, wire.ResponsePart
_Content = wire.UpstreamContent
_ModelTurn, _AnswerTurn, _SkippedCallPart = wire.ModelTurn, wire.AnswerTurn, wire.SkippedCallPart
_RAW_OBJECTS = json_objects.RAW_OBJECTS
_DERIVED_LOW, _DERIVED_HIGH = _prefix_range(DERIVED_CALL_PREFIX)
_OBJECT_LOW, _OBJECT_HIGH = _prefix_range("{")  # a result's text that may be a JSON object
_SKIP_VALIDATOR = signatures.SKIP_VALIDATOR


def _contents_out(messages: list[c.Message], report: TranslationReport) -> list[wire.UpstreamTurn]:
    """The conversation as Gemini turns, in one walk. The usual parts (a model turn's
    text and calls, a tool result's text, a user text) are made inline; a model turn
    with any other part goes through ``_model_out``, any other user part through
    ``_user_part_out``."""
    turns: list[wire.UpstreamTurn] = []
    last: wire.UpstreamTurn | None = None
    last_role = ""
    names: dict[str, str] = {}  # call id -> name, of every call (the last of an id wins)
    answers: list[wire.UpstreamResponse] = []  # named once every call is known
    args_of: Callable[[str, str], msgspec.Raw | dict[str, Any]] | None = None  # (_args_way)
    mixed: list[wire.UpstreamTurn] = []  # user turns of several parts, to order
    fast = FAST.on
    for m in messages:
        # Fast path of the loop below: an agent loop's two turns, whole (no per-part
        # loop, flags or merge): a tool turn of one result of one text, and an assistant
        # turn of a text then one call, each after a turn of the other role. The same
        # parts as the loop makes.
        content = m.content
        n = len(content) if fast else 0
        if n == 1:
            if (
                type(p := content[0]) is _ToolResult
                and last_role == "model"
                and m.role != "assistant"
                and len(result := p.content) == 1
                and type(said := result[0]) is _Text
                and not (_OBJECT_LOW <= said.text < _OBJECT_HIGH)
                and not p.is_error
            ):
                call_id = p.call_id
                response = _ResponseOut(
                    call_id,
                    _Output(said.text),
                    None if _DERIVED_LOW <= call_id < _DERIVED_HIGH else call_id,
                )
                answers.append(response)
                last, last_role = _AnswerTurn([_ResponsePart(response)]), "user"
                turns.append(last)
                continue
        elif (
            n == 2
            and type(said := content[0]) is _Text
            and type(p := content[1]) is _ToolCall
            and last_role != "model"
            and said.text
            and m.role == "assistant"
        ):
            call_id, arguments = p.id, p.arguments
            names[call_id] = name = p.name
            last = _ModelTurn(
                [
                    _TextPart(said.text),
                    _SkippedCallPart(
                        _CallOut(
                            name,
                            (p.kind == "function" and _RAW_OBJECTS.recent(arguments))
                            or (args_of or (args_of := _args_way(arguments)))(arguments, p.kind),
                            None if _DERIVED_LOW <= call_id < _DERIVED_HIGH else call_id,
                        )
                    ),
                ]
            )
            last_role = "model"
            turns.append(last)
            continue
        parts: list[wire.UpstreamPart] = []
        if m.role == "assistant":
            role = "model"
            if not fast:
                parts = _model_out(m.content, names, report)
            else:  # fast path of ``_model_out``: texts and calls
                first = True  # the first call gets the skip-validator signature (no Gemini's)
                for p in m.content:
                    if type(p) is _ToolCall:
                        call_id, arguments = p.id, p.arguments
                        names[call_id] = name = p.name
                        part: wire.UpstreamPart = _CallPart(
                            _SKIP_VALIDATOR if first else None,
                            _CallOut(
                                name,
                                (p.kind == "function" and _RAW_OBJECTS.recent(arguments))
                                or (args_of or (args_of := _args_way(arguments)))(
                                    arguments, p.kind
                                ),
                                None if _DERIVED_LOW <= call_id < _DERIVED_HIGH else call_id,
                            ),
                        )
                        first = False
                    elif type(p) is _Text:
                        if not p.text:
                            continue
                        part = _TextPart(p.text)
                    else:  # a signature, a thought, media: the general walk, from the start
                        parts = _model_out(m.content, names, report)
                        break
                    parts.append(part)
        else:
            role = "user"
            for p in m.content:
                if not fast:
                    pass
                elif type(p) is _ToolResult:  # fast path of ``_user_part_out``
                    call_id, result = p.call_id, p.content
                    text = result[0] if len(result) == 1 else None
                    if (
                        type(text) is _Text
                        and not (_OBJECT_LOW <= text.text < _OBJECT_HIGH)  # no "{" first
                        and not p.is_error
                    ):
                        response = _ResponseOut(
                            call_id,  # the name, once every call's name is known
                            _Output(text.text),  # as result_response_out
                            None if _DERIVED_LOW <= call_id < _DERIVED_HIGH else call_id,
                        )
                        answers.append(response)
                        parts.append(_ResponsePart(response))
                        continue
                elif type(p) is _Text:
                    if p.text:
                        parts.append(_TextPart(p.text))
                    continue
                _user_part_out(p, parts, names, answers, report)
        if not parts:
            continue
        if last_role == role:
            last.parts.extend(parts)  # type: ignore[union-attr]
            if role == "user" and (not mixed or mixed[-1] is not last):
                mixed.append(last)  # type: ignore[arg-type]
        else:
            last, last_role = _Content(role, parts), role
            turns.append(last)
            if len(parts) > 1 and role == "user":
                mixed.append(last)
    for fr in answers:  # its name holds the call's id until here
        fr.name = names.get(fr.name, fr.name)
    for t in mixed:  # function responses come first in a user turn
        t.parts.sort(key=_not_a_response)
    return turns


def _args_way(arguments: str) -> Callable[[str, str], msgspec.Raw | dict[str, Any]]:
    """How the calls of a request whose first call missing the table has ``arguments``
    are sent: through the table (``_call_args``), unless that call is one not seen before
    (``json_objects.kept``: a conversation's first request, or its newest call); then as
    ``_args_out``'s object, the same bytes. (A request whose calls are all in the table
    never asks.)"""
    if json_objects.kept(arguments, _RAW_OBJECTS, json_objects.RAW_OBJECT_MAX_CHARS):
        return _call_args
    return _args_out


def _not_a_response(p: wire.UpstreamPart) -> bool:
    return type(p) is not wire.ResponsePart


def _call_args(arguments: str, kind: str) -> msgspec.Raw | dict[str, Any]:
    """A call's ``args``: a function's JSON object kept encoded (``json_objects``);
    what ``_args_out`` makes of anything else (a custom tool's input, an error)."""
    if kind == "function":
        return _RAW_OBJECTS.get(arguments) or json_objects.remember(
            arguments, _args_out(arguments, kind)
        )
    return _args_out(arguments, kind)


def _args_out(arguments: str, kind: str) -> dict[str, Any]:
    if kind == "custom":
        return {"input": arguments}
    if not arguments:
        return {}
    try:
        value = _json.decode(arguments)
    except (msgspec.DecodeError, ValueError):
        raise ProxyError.invalid("tool call arguments are not valid JSON") from None
    if not isinstance(value, dict):
        raise ProxyError.invalid("tool call arguments must be a JSON object")
    return value


def _model_out(
    content: list[c.Part], names: dict[str, str], report: TranslationReport
) -> list[wire.UpstreamPart]:
    out: list[wire.UpstreamPart] = []
    pending: str | None = None  # a bare signature for the next part
    calls = 0
    for p in content:
        part: wire.Part | wire.CallPart
        if type(p) is _ToolCall:
            call_id = p.id
            names[call_id] = p.name
            part = _CallPart(
                None,
                _CallOut(
                    p.name,
                    _call_args(p.arguments, p.kind),
                    None if call_id.startswith(DERIVED_CALL_PREFIX) else call_id,
                ),
            )
            if calls == 0 and pending is None:
                pending = _SKIP_VALIDATOR  # a call Gemini did not make
            calls += 1
        elif type(p) is _Text or type(p) is c.Refusal:
            if not p.text:
                continue
            part = wire.Part(text=p.text)
        elif type(p) is c.Reasoning:
            sig = p.thought_signature
            if sig is None:
                report.drop("reasoning")  # not Gemini's: Gemini would not accept it
            elif p.text:
                out.append(wire.Part(text=p.text, thought=True, thought_signature=sig))
            else:
                pending = sig
            continue
        elif type(p) is c.Image or type(p) is c.File:
            part = _media_out(p)
        elif type(p) is c.ServerToolUse and p.name == SEARCH:
            # Gemini's history has no search: what it found, as the model's text.
            part = wire.Part(text=hosted_search.as_text(p))
        elif type(p) is c.ServerToolUse and p.name == hosted_code.CODE:
            out.extend(code_run.replay_out(p))  # its own parts, or text
            continue
        else:
            report.drop(f"messages.content.{type(p).__struct_config__.tag}")
            continue
        if pending is not None:
            part.thought_signature, pending = pending, None
        out.append(part)
    if pending is not None:
        out.append(wire.Part(text="", thought_signature=pending))
    return out


def result_response_out(p: c.ToolResult, report: TranslationReport) -> dict[str, Any]:
    texts: list[str] = []
    for x in p.content:
        if type(x) is c.Text or type(x) is c.Refusal:
            texts.append(x.text)
        else:
            report.drop(f"tool_result.content.{type(x).__struct_config__.tag}")
    text = "".join(texts)
    key = "error" if p.is_error else "output"
    if text[:1] == "{" and not p.is_error:
        try:
            value = _json.decode(text)
        except (msgspec.DecodeError, ValueError):
            value = None
        if isinstance(value, dict):
            return value
    return {key: text}


def _user_part_out(
    p: c.Part,
    out: list[wire.UpstreamPart],
    names: dict[str, str],
    answers: list[wire.UpstreamResponse],
    report: TranslationReport,
) -> None:
    """A part of a user (or tool) message appended to ``out``; a function response's
    name holds the call's id until every call's name is known."""
    if type(p) is c.ToolResult:
        call_id = p.call_id
        response = wire.FunctionResponse(
            name=call_id,
            response=result_response_out(p, report),
            id=None if call_id.startswith(DERIVED_CALL_PREFIX) else call_id,
        )
        answers.append(response)
        out.append(_ResponsePart(response))
    elif type(p) is c.Text or type(p) is c.Refusal:
        if p.text:
            out.append(_TextPart(p.text))
    elif type(p) is c.Image or type(p) is c.File:
        out.append(_media_out(p))
    else:
        if type(p) is c.ToolCall:
            names[p.id] = p.name
        report.drop(f"messages.content.{type(p).__struct_config__.tag}")


def _media_out(p: c.Image | c.File) -> wire.Part:
    if type(p) is c.File and p.text is not None:
        return wire.Part(text=p.text)
    data, mime, url = p.data, p.media_type, p.url
    if data is None and url is not None and is_data_url(url):
        parsed = parse_data_url(url)
        if parsed is None:
            raise ProxyError.invalid("only base64 data URLs can be translated to Gemini")
        mime, data = parsed
    if data is not None:
        if not mime:
            raise ProxyError.invalid("inline data needs a media type for Gemini")
        return wire.Part(inline_data=wire.Blob(mime_type=mime, data=data))
    if url is not None:
        return wire.Part(file_data=wire.FileData(mime_type=mime, file_uri=url))
    raise ProxyError.invalid("a file_id reference cannot be carried to Gemini; send the data")


def _tools_out(
    request: c.Request, report: TranslationReport
) -> list[wire.DeclarationsOut | dict[str, Any]]:
    decls: list[wire.DeclarationOut] = []
    for i, t in enumerate(request.tools):
        if t.kind == "custom":
            report.reject(f"tools[{i}]", "custom (freeform) tools cannot be Gemini functions")
            continue
        # (an empty description is left out, as a None one)
        decls.append(wire.DeclarationOut(t.name, t.description or None, t.parameters))
        if t.strict:
            report.drop("tools.strict")
    out: list[wire.DeclarationsOut | dict[str, Any]] = (
        [wire.DeclarationsOut(decls)] if decls else []
    )
    own_search = own_code = False
    for h in request.hosted_tools:
        if h.protocol == "gemini_generate_content":
            out.append(h.raw)
            own_search = own_search or hosted_search.is_search_tool(h)
            own_code = own_code or hosted_code.is_code_tool(h)
        elif not hosted_search.is_search_tool(h) and not (
            request.code_execution and hosted_code.is_code_tool(h)
        ):
            report.drop(f"tools.{h.type}")  # (a search, a sandbox: written from canonical)
    if request.web_search is not None and not own_search:
        out.append(search.tool_out(request.web_search, report))
    if request.code_execution is not None and not own_code:
        out.append(dict(hosted_code.GEMINI_TOOL))
    return out


def _tool_config_out(
    request: c.Request, has_tools: bool, report: TranslationReport
) -> wire.ToolConfig | None:
    tc = request.tool_choice
    if tc is None:
        return None
    if not has_tools:
        report.drop("tool_choice")
        return None
    if tc.mode == "tool":
        if tc.kind == "custom" or not any(t.name == tc.name for t in request.tools):
            report.drop("tool_choice")
            return None
        fcc = wire.FunctionCallingConfig(mode="ANY", allowed_function_names=[tc.name or ""])
    else:
        fcc = wire.FunctionCallingConfig(mode=_MODE_OUT[tc.mode])
    return wire.ToolConfig(function_calling_config=fcc)


_NO_GENERATION_CONFIG = wire.GenerationConfig()  # compared with, never changed


def _generation_config_out(
    request: c.Request, report: TranslationReport
) -> wire.GenerationConfig | None:
    limit = request.max_tokens
    if limit is not None and limit < 1:  # (Anthropic's 0, writing the cache: no such request)
        limit = policy.token_limit(limit, 1, report, "Gemini")
    g = wire.GenerationConfig(
        max_output_tokens=limit,
        temperature=request.temperature,
        top_p=request.top_p,
        top_k=request.top_k,
        stop_sequences=request.stop or None,
        thinking_config=_thinking_out(request.reasoning),
    )
    rf = request.response_format
    if rf is not None and rf.type != "text":
        g.response_mime_type = "application/json"
        if rf.type == "json_schema" and rf.schema is not None:
            g.response_json_schema = rf.schema
    return g if g != _NO_GENERATION_CONFIG else None


def _thinking_out(rc: c.ReasoningConfig | None) -> wire.ThinkingConfig | None:
    if rc is None:
        return None
    summary = bool(rc.summary and rc.summary != "none")
    if rc.enabled is False or rc.effort == "none":
        return wire.ThinkingConfig(thinking_budget=0)
    t = wire.ThinkingConfig()
    if rc.budget_tokens is not None:
        t.thinking_budget = rc.budget_tokens
    elif rc.effort in _LEVEL_OUT:
        t.thinking_level = _LEVEL_OUT[rc.effort]
    if summary:
        t.include_thoughts = True
    return t if t != wire.ThinkingConfig() else None
