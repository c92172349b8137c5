"""Chat Completions requests, in two halves: the client side (``decode_request``: a
client's body decoded into a ``canonical.Request``, checked as OpenAI checks it), then
the upstream side (``encode_request``: a canonical request encoded as a Chat upstream's
body, with what Chat cannot carry reported)."""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Sequence
from typing import Any

import msgspec

from ... import canonical as c
from ... import ids, reasoning_carry
from ...checks import settles
from ...codec import OnePassDecoder, UpstreamOptions, absent
from ...errors import ProxyError, TranslationReport
from ...lazy_decoder import LazyDecoder
from .._kit import exact_json, hosted_code, hosted_search, openai_checks, policy, tool_schemas
from .._kit.fast_paths import FAST
from .._kit.hosted_search import SEARCH
from .._kit.media import data_url, parse_data_url
from . import search, validate
from . import wire as w

_REQUEST_DEC: LazyDecoder[w.ChatRequest] = LazyDecoder(w.ChatRequest)
_KEYS_DEC: LazyDecoder[dict[str, msgspec.Raw]] = LazyDecoder(dict[str, msgspec.Raw])
_UNSET = msgspec.UNSET
_copy = msgspec.structs.replace  # (a request's own copy of a canonical tool)

_PATH = re.compile(r"at `\$\.?([^`]*)`")
_MISSING = re.compile(r"missing required field `([^`]+)`")

_ONE_PASS = OnePassDecoder(w.ClientChatRequest, w.REQUEST_FIELDS)
# The fields an agent loop's request leaves out, handled only when one is there.
RARE_FIELDS = absent(
    "functions",
    "function_call",
    "stop",
    "n",
    "logprobs",
    "top_logprobs",
    "response_format",
    "reasoning_effort",
    "user",
    "safety_identifier",
    "metadata",
    "service_tier",
    "prompt_cache_key",
    "verbosity",
    "modalities",
    "audio",
    "web_search_options",
)


# ============================================== client side: the client's body -> canonical


def _invalid(message: str, param: str | None = None) -> ProxyError:
    return ProxyError.invalid(message, param=param)


def _validation_error(e: Exception) -> ProxyError:
    """A msgspec validation error as a 400 whose ``param`` is the offending path."""
    text = str(e)
    m = _PATH.search(text)
    path = m.group(1) if m else ""
    missing = _MISSING.search(text)
    if missing is not None:  # name the missing field itself
        path = f"{path}.{missing.group(1)}" if path else missing.group(1)
    return _invalid(f"Invalid request body: {text}", path or None)


def _image(part: w.ImagePart) -> c.Image:
    url = part.image_url.url
    parsed = parse_data_url(url)
    if parsed is not None:
        return c.Image(
            data=parsed.data,
            media_type=parsed.media_type,
            detail=part.image_url.detail,
            cache_control=part.cache_control,
        )
    return c.Image(url=url, detail=part.image_url.detail, cache_control=part.cache_control)


def _file(part: w.FilePart, ms: list[w.Message], m: w.Message, j: int) -> c.File:
    f = part.file
    if f.file_data:
        parsed = parse_data_url(f.file_data)
        if parsed is not None:
            media_type, data = parsed
        else:  # raw base64: guess from the name, PDF being what Chat accepts
            guessed = mimetypes.guess_type(f.filename)[0] if f.filename else None
            media_type, data = guessed or "application/pdf", f.file_data
        return c.File(
            data=data, media_type=media_type, filename=f.filename, cache_control=part.cache_control
        )
    if f.file_id:
        return c.File(file_id=f.file_id, filename=f.filename, cache_control=part.cache_control)
    path = f"messages[{_place(ms, m)}].content[{j}].file"
    raise _invalid(f"{path}: one of file_data or file_id is required", path)


def _text_parts(content: str | list[w.TextPart]) -> list[c.Text]:
    if isinstance(content, str):
        return [c.Text(text=content)] if content else []
    return [c.Text(text=p.text, cache_control=p.cache_control) for p in content if p.text]


# Parts and messages are told apart by ``type(x) is``, not ``isinstance``: a failed
# ``isinstance`` against a msgspec Struct class costs ~70 ns (the Struct metaclass sends
# CPython down its slow path), a type identity test ~15 ns, and decoded values are
# always exactly one of their union's classes. Error paths (``messages[i]...``) are
# formatted only when an error needs them, and the walk keeps no count of the messages
# (``enumerate`` costs ~13 ns a message): an error's path looks its message up.


def _place(ms: list[w.Message], m: w.Message) -> int:
    """Where ``m`` stands in ``ms`` (for an error's path)."""
    return next(i for i, x in enumerate(ms) if x is m)


def _user_content(
    content: str | list[w.UserPart], ms: list[w.Message], m: w.Message
) -> list[c.Part]:
    if isinstance(content, str):
        return [c.Text(text=content)]
    if not content:
        path = f"messages[{_place(ms, m)}].content"
        raise _invalid(f"{path}: content must not be an empty list", path)
    out: list[c.Part] = []
    for j, p in enumerate(content):
        if type(p) is w.TextPart:
            out.append(c.Text(text=p.text, cache_control=p.cache_control))
        elif type(p) is w.ImagePart:
            url = p.image_url.url
            if openai_checks.unsupported_image(url) is not None:
                openai_checks.check_image_url(url, f"messages[{_place(ms, m)}].content[{j}]")
            out.append(_image(p))
        elif type(p) is w.FilePart:
            out.append(_file(p, ms, m, j))
        else:
            path = f"messages[{_place(ms, m)}].content[{j}]"
            raise _invalid(f"{path}: unsupported user content part 'input_audio'", f"{path}.type")
    return out


def _tool_content(
    content: str | list[w.ToolPart], ms: list[w.Message], m: w.Message
) -> list[c.Part]:
    if isinstance(content, str):
        return [c.Text(text=content)] if content else []
    out: list[c.Part] = []
    for j, p in enumerate(content):
        if type(p) is w.TextPart:
            out.append(c.Text(text=p.text, cache_control=p.cache_control))
        elif type(p) is w.ImagePart:
            out.append(_image(p))
        else:
            assert type(p) is w.FilePart
            out.append(_file(p, ms, m, j))
    return out


def _assistant(
    m: w.AssistantMessage, ms: list[w.Message], customs: set[str], report: TranslationReport
) -> c.Message:
    if m.function_call is not None:
        path = f"messages[{_place(ms, m)}]"
        raise _invalid(
            f"{path}.function_call: legacy function_call messages are not supported; "
            "use tool_calls",
            f"{path}.function_call",
        )
    if m.audio is not None:
        report.drop("messages.audio")
    parts: list[c.Part] = []
    reasoning = m.reasoning_content
    if reasoning is None and isinstance(m.reasoning, str):
        reasoning = m.reasoning
    if reasoning:
        parts.append(c.Reasoning(text=reasoning))
    content = m.content
    if isinstance(content, str):
        if content:
            parts.append(c.Text(text=content))
    elif isinstance(content, list):
        for p in content:
            if type(p) is w.TextPart:
                if p.text:
                    parts.append(c.Text(text=p.text, cache_control=p.cache_control))
            else:
                assert type(p) is w.RefusalPart
                parts.append(c.Refusal(text=p.refusal))
    if m.refusal:
        parts.append(c.Refusal(text=m.refusal))
    for j, tc in enumerate(m.tool_calls or ()):
        f = tc.function
        if f is not None and (tc.type is _UNSET or tc.type == "function"):  # the usual call
            parts.append(c.ToolCall(id=tc.id, name=f.name, arguments=f.arguments))
            customs.discard(tc.id)
            continue
        kind = "function" if tc.type is _UNSET else tc.type
        if kind == "function":
            if tc.function is None:
                tpath = f"messages[{_place(ms, m)}].tool_calls[{j}]"
                raise _invalid(f"{tpath}.function is required", f"{tpath}.function")
            parts.append(
                c.ToolCall(id=tc.id, name=tc.function.name, arguments=tc.function.arguments)
            )
            customs.discard(tc.id)
        elif kind == "custom":
            if tc.custom is None:
                tpath = f"messages[{_place(ms, m)}].tool_calls[{j}]"
                raise _invalid(f"{tpath}.custom is required", f"{tpath}.custom")
            parts.append(
                c.ToolCall(id=tc.id, name=tc.custom.name, arguments=tc.custom.input, kind="custom")
            )
            customs.add(tc.id)
        else:
            tpath = f"messages[{_place(ms, m)}].tool_calls[{j}]"
            raise _invalid(f"{tpath}.type: unsupported tool call type {kind!r}", f"{tpath}.type")
    return c.Message(role="assistant", content=parts)


def format_in(fmt: dict[str, Any] | None) -> dict[str, Any] | None:
    """A Chat custom-tool ``format`` in the canonical (Responses) shape: Chat nests the
    grammar, ``{type: grammar, grammar: {syntax, definition}}``; canonical is flat,
    ``{type: grammar, syntax, definition}``. ``{type: text}`` is the same in both."""
    if fmt is None or fmt.get("type") != "grammar" or not isinstance(fmt.get("grammar"), dict):
        return fmt
    return {"type": "grammar", **fmt["grammar"]}


# A set of function tools as a client sent it, decoded once (never changed): the
# declarations as ``w.ChatRequest`` holds them (their schemas as kept), and the canonical
# tools made of them (copied for each request). (A plain pair: a NamedTuple's ``__new__``
# costs 0.2 µs more on a miss.)
_ToolSet = tuple[list[w.ToolDef], tuple[c.Tool, ...]]


def _tool_set_size(key: bytes, value: _ToolSet) -> int:
    """The declarations (about as large as their bytes) and the canonical tools."""
    return 2 * len(key) + tool_schemas.tools_size(value[1])


class _ToolSets(tool_schemas.Lookup[_ToolSet]):
    """Sets of function tools by their bytes: an agent loop resends the same set with
    every request. The set found last is compared first, so a resent set costs a
    compare of its bytes, not a hash of them and a copy for the key."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        super().__init__(_tool_set_size)
        # The set found last and its bytes (of their own, as every key), in one
        # attribute so that a thread never reads one's bytes with another's set.
        self._last: tuple[msgspec.Raw, _ToolSet | None] = (msgspec.Raw(), None)

    def last(self, raw: msgspec.Raw) -> _ToolSet | None:
        """The set found last, when ``raw`` holds its bytes."""
        key, found = self._last
        return found if raw == key else None

    def get(self, key: bytes) -> _ToolSet | None:
        found = super().get(key)
        if found is not None:
            self._last = (msgspec.Raw(key), found)
        return found

    def put(self, key: bytes, value: _ToolSet) -> bool:
        kept = super().put(key, value)
        if kept:  # (a set over the bounds is not kept, nor compared)
            self._last = (msgspec.Raw(key), value)
        return kept

    def clear(self) -> None:
        super().clear()
        self._last = (msgspec.Raw(), None)


_TOOL_SETS = _ToolSets()
_SCHEMAS = tool_schemas.SchemaLookup()
_CLIENT_TOOL_DEFS: LazyDecoder[list[w.ClientToolDef] | None] = LazyDecoder(
    list[w.ClientToolDef] | None
)


class _NotChatTools(Exception):
    """Tools that are not what ``w.ChatRequest`` takes: the general decode names them."""


def _tool_defs_in(req: w.ClientChatRequest) -> tuple[c.Tool, ...] | None:
    """Decode the one-pass decode's tools (left encoded) into ``req.tools``, or find
    them by their bytes. A set of function tools only gives its canonical tools too
    (to be copied; the checks and ``_tools`` have nothing to say of it); another set
    None."""
    found = _TOOL_SETS.last(req.tools)
    if found is None:
        key = bytes(req.tools)
        found = _TOOL_SETS.get(key)
    if found is not None:
        req.tools, made = found  # type: ignore[assignment]
        return made
    try:
        decoded = _CLIENT_TOOL_DEFS.decode(key)
        functions_only = True
        for t in decoded or ():
            f = t.function
            if f is not None:
                p = f.parameters
                f.parameters = None if p is _UNSET else _SCHEMAS.get(p)  # type: ignore[assignment]
            if f is None or t.type not in ("function", _UNSET):
                functions_only = False
    except (msgspec.DecodeError, tool_schemas.NotAnObject):
        raise _NotChatTools from None
    req.tools = decoded  # type: ignore[assignment]
    if not (functions_only and decoded):
        return None
    made = tuple([_function_tool(t.function) for t in decoded])  # type: ignore[arg-type]
    _TOOL_SETS.put(key, (decoded, made))  # type: ignore[arg-type]
    return made


def _function_tool(f: w.FunctionDef) -> c.Tool:
    return c.Tool(name=f.name, description=f.description, parameters=f.parameters, strict=f.strict)


def _tools(req: w.ChatRequest, report: TranslationReport) -> list[c.Tool]:
    tools: list[c.Tool] = []
    for i, t in enumerate(req.tools or ()):
        kind = "function" if t.type is msgspec.UNSET else t.type
        if kind == "function":
            if t.function is None:
                raise _invalid(f"tools[{i}].function is required", f"tools[{i}].function")
            tools.append(_function_tool(t.function))
        elif kind == "custom":
            if t.custom is None:
                raise _invalid(f"tools[{i}].custom is required", f"tools[{i}].custom")
            tools.append(
                c.Tool(
                    name=t.custom.name,
                    kind="custom",
                    description=t.custom.description,
                    format=format_in(t.custom.format),
                )
            )
        else:
            report.drop(f"tools.{kind}")
    for f in req.functions or ():  # legacy
        tools.append(c.Tool(name=f.name, description=f.description, parameters=f.parameters))
    return tools


def _tool_choice(req: w.ChatRequest, report: TranslationReport) -> c.ToolChoice | None:
    tc = req.tool_choice
    if tc is None:
        legacy = req.function_call
        if legacy is None:
            return None
        if isinstance(legacy, str):
            if legacy in ("auto", "none"):
                return c.ToolChoice(mode=legacy)  # type: ignore[arg-type]
            raise _invalid("function_call must be 'auto', 'none' or an object", "function_call")
        return c.ToolChoice(mode="tool", name=legacy.name)
    if isinstance(tc, str):
        if tc in ("auto", "none", "required"):
            return c.ToolChoice(mode=tc)  # type: ignore[arg-type]
        raise _invalid(f"tool_choice: unsupported value {tc!r}", "tool_choice")
    if tc.type == "function":
        if tc.function is None:
            raise _invalid("tool_choice.function is required", "tool_choice.function")
        return c.ToolChoice(mode="tool", name=tc.function.name)
    if tc.type == "custom":
        if tc.custom is None:
            raise _invalid("tool_choice.custom is required", "tool_choice.custom")
        return c.ToolChoice(mode="tool", name=tc.custom.name, kind="custom")
    if tc.type == "allowed_tools":
        report.drop("tool_choice.allowed_tools")
        mode = tc.allowed_tools.mode if tc.allowed_tools is not None else "auto"
        return c.ToolChoice(mode="required" if mode == "required" else "auto")
    raise _invalid(f"tool_choice.type: unsupported value {tc.type!r}", "tool_choice.type")


def _response_format(rf: w.ResponseFormat | None) -> c.ResponseFormat | None:
    if rf is None:
        return None
    if rf.type in ("text", "json_object"):
        return c.ResponseFormat(type=rf.type)  # type: ignore[arg-type]
    if rf.type == "json_schema":
        js = rf.json_schema
        if js is None:
            raise _invalid("response_format.json_schema is required", "response_format.json_schema")
        return c.ResponseFormat(
            type="json_schema",
            name=js.name,
            schema=js.schema,
            strict=js.strict,
            description=js.description,
        )
    raise _invalid(f"response_format.type: unsupported value {rf.type!r}", "response_format.type")


def _decode_body(
    body: bytes, report: TranslationReport
) -> tuple[w.ChatRequest, tuple[c.Tool, ...] | None]:
    """The body, in one parse when it holds only known fields and the declared dropped
    ones (``w.ClientChatRequest``); other top-level fields are dropped and reported in
    body order, which takes a second parse for their names. With it, the canonical
    tools of a set of function tools (``_tool_defs_in``), else None."""
    # fast path of the two parses below (and, for a set of function tools, of ``_tools``)
    one = _ONE_PASS.decode(body, report) if FAST.on else None
    if one is not None:
        if not one.tools:
            return one, None
        try:
            return one, _tool_defs_in(one)
        except _NotChatTools:
            pass
    try:
        req = _REQUEST_DEC.decode(body)
        keys = _KEYS_DEC.decode(body)
    except msgspec.ValidationError as e:
        raise _validation_error(e) from None
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError) as e:
        raise _invalid(f"Invalid JSON body: {e}") from None
    for key in keys:
        if key not in w.REQUEST_FIELDS:
            report.drop(key)
    return req, None


def _messages_in(
    ms: list[w.Message], report: TranslationReport
) -> tuple[list[c.Text], list[c.Message]]:
    """The system texts and the canonical turns, checked in the same walk.

    The usual messages of an agent loop (an assistant turn of text and function calls,
    a tool message of text) are built inline; the rest take ``_assistant`` and
    ``_tool_content``. ``tools`` is the open tool turn: consecutive tool messages
    (system messages between them aside) share one. The walk also does the cheap part
    of ``validate.check_messages``, which it would otherwise repeat: it tracks the calls
    awaiting their tool message and notes anything that check rejects; only then is the
    check run, to raise its 400. ``report.settled`` says whether every tool message
    answered a pending call and no part was media (``checks.check_request`` need not
    walk again).

    The one call of the usual turn waits in ``waiting``, answered by a string compare
    (a dict would hash both fresh ids); a turn's other calls wait in ``pending``. Both
    at once only after a call was left unanswered, which the check rejects anyway. A
    result takes its call's id string, so the tool message's copy is not kept."""
    system: list[c.Text] = []
    messages: list[c.Message] = []
    customs: set[str] = set()  # the call ids whose latest call is a custom tool's
    waiting: str | None = None  # the call id awaiting its tool message (the usual turn's)
    pending: dict[str, str] | None = None  # other call ids awaiting theirs (id -> the id)
    suspect = False  # something check_messages rejects was seen
    settled = True  # no media so far, every result answering a call
    tools: list[c.Part] | None = None
    user_message, assistant_message, tool_message = w.UserMessage, w.AssistantMessage, w.ToolMessage
    text, call, result, message = c.Text, c.ToolCall, c.ToolResult, c.Message
    unset = _UNSET
    fast = FAST.on
    for m in ms:
        if type(m) is tool_message:
            call_id = m.tool_call_id
            if waiting is not None and call_id == waiting:
                call_id = waiting
                waiting = None
            elif pending and (asked := pending.pop(call_id, None)) is not None:
                call_id = asked
            else:
                settled = False  # (it may answer an earlier call: check_request looks)
            content = m.content
            if fast and type(content) is str:  # fast path of ``_tool_content``
                r = result(call_id=call_id, content=[text(text=content)] if content else [])
            else:
                r = result(call_id=call_id, content=_tool_content(content, ms, m))
                if settled:
                    settled = settles(r.content)
            if customs and call_id in customs:
                r.kind = "custom"
            if tools is None:
                tools = [r]
                messages.append(message(role="tool", content=tools))
            else:
                tools.append(r)
            continue  # (a tool message has no name)
        if waiting is not None or pending:
            suspect = True  # a call left unanswered
        if type(m) is assistant_message:
            said = m.content  # a string, or none beside tool calls
            calls = m.tool_calls
            if (  # fast path of the walk below, for the usual turn: no ``pending`` dict
                fast
                and type(said) is str
                and said
                and calls is not None
                and len(calls) == 1
                and m.refusal is None
                and m.reasoning_content is None
                and m.reasoning is None
                and m.function_call is None
                and m.audio is None
                and m.name is None
            ):
                tc = calls[0]  # the most usual turn: a text and one function call
                f = tc.function
                if f is not None and (tc.type is unset or tc.type == "function"):
                    waiting = tc.id
                    if customs:
                        customs.discard(tc.id)
                    turn: list[c.Part] = [
                        text(text=said),
                        call(id=tc.id, name=f.name, arguments=f.arguments),
                    ]
                    messages.append(message(role="assistant", content=turn))
                    tools = None
                    continue
            parts: list[c.Part] | None = None
            if (  # fast path of ``_assistant`` (below), for texts and function calls
                fast
                and (type(said) is str or said is None or said is unset)
                and m.refusal is None
                and m.reasoning_content is None
                and m.reasoning is None
                and m.function_call is None
                and m.audio is None
            ):
                parts = [text(text=said)] if type(said) is str and said else []
                if calls:
                    if pending is None:
                        pending = {}
                    for tc in calls:
                        f = tc.function
                        if f is None or (tc.type is not unset and tc.type != "function"):
                            parts = None  # another kind of call: the general path
                            break
                        parts.append(call(id=tc.id, name=f.name, arguments=f.arguments))
                        pending[tc.id] = tc.id
                        if customs:
                            customs.discard(tc.id)
                elif type(said) is not str:
                    suspect = True  # neither content nor calls
            if parts is None:
                messages.append(_assistant(m, ms, customs, report))
                if m.tool_calls:
                    if pending is None:
                        pending = {}
                    for tc in m.tool_calls:
                        pending[tc.id] = tc.id
                elif (m.content is None or m.content is unset) and not (
                    m.refusal or m.function_call or m.audio
                ):
                    suspect = True
            else:
                messages.append(message(role="assistant", content=parts))
            tools = None
        elif type(m) is user_message:
            words = m.content
            if type(words) is str and not words:
                suspect = True  # an empty user message
            if fast and type(words) is str:  # fast path of ``_user_content``
                messages.append(message(role="user", content=[text(text=words)]))
            else:
                messages.append(message(role="user", content=_user_content(words, ms, m)))
                if settled:
                    settled = settles(messages[-1].content)
            tools = None
        elif type(m) is w.SystemMessage or type(m) is w.DeveloperMessage:
            instructions = m.content
            if type(instructions) is not str:
                system.extend(_text_parts(instructions))
            elif instructions:
                system.append(text(text=instructions))
        else:
            path = f"messages[{_place(ms, m)}]"
            raise _invalid(
                f"{path}.role: legacy 'function' messages are not supported (they carry no "
                "tool_call_id to reference); use role 'tool' with tool_call_id",
                f"{path}.role",
            )
        if m.name is not None:
            report.drop("messages.name")
    if suspect or waiting is not None or pending or not messages:
        validate.check_messages(ms)  # raises the 400 (or finds all well after all)
    report.settled = settled
    return system, messages


def decode_request(body: bytes, report: TranslationReport) -> c.Request:
    """A Chat Completions client body as a canonical request (400 for bad input)."""
    req, made = _decode_body(body, report)
    if not req.messages:
        raise _invalid("messages must not be empty", "messages")
    validate.check_params(req)
    if made is None and req.tools:  # (a set in ``made`` is function tools only)
        validate.check_tool_types(req.tools)
    try:
        system, messages = _messages_in(req.messages, report)
    except ProxyError:
        # The messages' own 400 (``validate``) comes before any conversion error.
        validate.check_messages(req.messages)
        raise

    include_usage = False
    options = req.stream_options
    if options:
        for k, v in options.items():
            if k == "include_usage":
                include_usage = v is True
            else:
                report.drop(f"stream_options.{k}")

    # fast path of ``_rare_reports``/``_rare_fields_in``: none of the rarer fields
    usual = FAST.on and RARE_FIELDS(req)
    if not usual:
        _rare_reports(req, report)
    if made is not None and usual:  # (a legacy ``functions`` list is a rarer field)
        tools = list(map(_copy, made))
    else:
        tools = _tools(req, report) if req.tools or req.functions else []
    out = c.Request(
        model=req.model,
        messages=messages,
        system=system,
        tools=tools,
        tool_choice=_tool_choice(req, report),
        parallel_tool_calls=req.parallel_tool_calls,
        max_tokens=req.max_completion_tokens
        if req.max_completion_tokens is not None
        else req.max_tokens,
        temperature=req.temperature,
        top_p=req.top_p,
        stream=bool(req.stream),
        include_usage=include_usage,
        implicit_caching=True,
    )
    if not usual:
        _rare_fields_in(req, out)
    return out


def _rare_reports(req: w.ChatRequest, report: TranslationReport) -> None:
    """What the rarer fields report, before the tools do."""
    # Audio output is a different kind of answer: no other protocol can give it.
    if req.modalities is not None and "audio" in req.modalities:
        report.reject("modalities", "audio output is only available from Chat Completions")
    if req.audio is not None:
        report.reject("audio", "audio output is only available from Chat Completions")
    # ``safety_identifier`` replaces ``user``: it wins when both are sent.
    if req.user is not None and req.safety_identifier not in (None, req.user):
        report.drop("user")


def _rare_fields_in(req: w.ChatRequest, out: c.Request) -> None:
    """The rarer fields onto ``out`` (after the tools, whose errors come first)."""
    if isinstance(req.stop, str):
        out.stop = [req.stop]
    elif req.stop:
        out.stop = list(req.stop)
    if req.functions and not req.tools:
        out.legacy_functions = True
        # Legacy function calling answers one call: ask the upstream for one.
        if req.parallel_tool_calls is None:
            out.parallel_tool_calls = False
    out.response_format = _response_format(req.response_format)
    if req.reasoning_effort is not None:
        out.reasoning = c.ReasoningConfig(effort=req.reasoning_effort)
    out.user = req.safety_identifier if req.safety_identifier is not None else req.user
    for name in _SAME_NAMED:
        setattr(out, name, getattr(req, name))
    if req.web_search_options is not None:
        out.web_search = search.options_in(req.web_search_options)


# The rarer fields that keep their name and value in the canonical request.
_SAME_NAMED = (
    "metadata",
    "service_tier",
    "prompt_cache_key",
    "verbosity",
    "n",
    "logprobs",
    "top_logprobs",
)


# ============================================ upstream side: canonical -> this upstream's body

_ENC = msgspec.json.Encoder()
_SERVICE_TIERS = frozenset({"auto", "default", "flex", "scale", "priority"})


def format_out(fmt: dict[str, Any] | None) -> dict[str, Any] | None:
    """A canonical custom-tool ``format`` in Chat's nested grammar shape."""
    if fmt is None or fmt.get("type") != "grammar" or "grammar" in fmt:
        return fmt
    return {"type": "grammar", "grammar": {k: v for k, v in fmt.items() if k != "type"}}


def effort_for(reasoning: c.ReasoningConfig | None) -> str | None:
    """``reasoning_effort`` for a canonical reasoning config. A bare token budget maps
    to a bucket: under 2048 -> low, under 8192 -> medium, else high. Thinking switched
    off (Anthropic ``disabled``: older reasoning models reject ``none``) and thinking on
    with neither effort nor budget (Anthropic ``adaptive``: the model decides; models
    without reasoning reject the field) send none."""
    if reasoning is None or reasoning.enabled is False:
        return None
    effort = reasoning.effort
    if effort == "max":
        return "xhigh"
    if effort is not None:
        return effort
    if reasoning.budget_tokens is not None:
        b = reasoning.budget_tokens
        return "low" if b < 2048 else "medium" if b < 8192 else "high"
    return None


class _Encoder:
    """Builds the upstream message list; reports what Chat cannot carry."""

    def __init__(self, report: TranslationReport, options: UpstreamOptions) -> None:
        self.report = report
        self.options = options
        self.messages: list[w.Message] = []
        self.fast = FAST.on

    def system_turn(self, m: c.Message) -> w.SystemMessage | None:
        """A ``system`` turn (text only) as a system message, its texts in one string
        (``policy.joined_system``, as for the system prompt); None when all empty."""
        texts = [p for p in m.content if type(p) is c.Text]
        for t in texts:
            self._cache(t.cache_control)
        said = policy.joined_system(texts)
        return w.SystemMessage(content=said) if said is not None else None

    def _cache(self, cache_control: dict[str, Any] | None) -> None:
        if cache_control is not None:
            self.report.drop("cache_control")

    def _media(self, p: c.Image | c.File, path: str) -> w.UserPart | None:
        """An image or document as a user content part; None when it was dropped."""
        self._cache(p.cache_control)
        if isinstance(p, c.Image):
            url = data_url(p.media_type or "image/png", p.data) if p.data is not None else p.url
            if url is None:
                raise _invalid(f"{path}: image has neither data nor url", path)
            return w.ImagePart(image_url=w.ImageURL(url=url, detail=p.detail))
        if p.data is not None:
            return w.FilePart(
                file=w.FileRef(
                    file_data=data_url(p.media_type or "application/pdf", p.data),
                    filename=p.filename or "document.pdf",
                )
            )
        if p.file_id is not None:
            return w.FilePart(file=w.FileRef(file_id=p.file_id))
        if p.text is not None:
            return w.TextPart(text=p.text)
        self.report.reject(f"{path}.url", "Chat Completions cannot fetch a document by URL")
        return None

    def opaque_dropped(self, p: c.Reasoning) -> None:
        """Reports a reasoning part's provider tokens, which Chat cannot carry."""
        for opaque in reasoning_carry.OPAQUE:
            if getattr(p, opaque) is not None:
                self.report.drop(f"assistant.reasoning.{opaque}")

    def user(self, m: c.Message, i: int) -> None:
        if self.fast and len(m.content) == 1:  # fast path of the loop below: one plain text
            only = m.content[0]
            if type(only) is c.Text and only.cache_control is None:
                self.messages.append(w.UserMessage(content=only.text))
                return
        parts: list[w.UserPart] = []
        results: list[c.ToolResult] = []
        for j, p in enumerate(m.content):
            if type(p) is c.Text:
                if p.cache_control is not None:
                    self.report.drop("cache_control")
                parts.append(w.TextPart(text=p.text))
            elif type(p) is c.Image or type(p) is c.File:
                part = self._media(p, f"messages[{i}].content[{j}]")
                if part is not None:
                    parts.append(part)
            elif type(p) is c.ToolResult:
                results.append(p)
            else:
                self.report.drop(f"user.{type(p).__name__.lower()}")
        if results:  # tool results must come before the user's own words
            self.tool(results, i)
        if not parts:
            return
        if len(parts) == 1 and type(parts[0]) is w.TextPart:
            self.messages.append(w.UserMessage(content=parts[0].text))
        else:
            self.messages.append(w.UserMessage(content=parts))

    def assistant(self, m: c.Message) -> None:
        # The usual turn (texts and calls) allocates only what it uses: the refusal and
        # reasoning lists are made when one turns up, and one text needs no join.
        texts: list[str] = []
        refusals: list[str] | None = None
        reasoning: list[str] | None = None
        calls: list[w.ToolCall] = []
        text_type, call_type, tool_call, function_call = (
            c.Text,
            c.ToolCall,
            w.ToolCall,
            w.FunctionCall,
        )
        for p in m.content:
            if type(p) is text_type:
                if p.cache_control is not None:
                    self.report.drop("cache_control")
                if p.citations:
                    self.report.drop("assistant.citations")
                texts.append(p.text)
            elif type(p) is call_type:
                if p.kind == "custom":
                    calls.append(
                        tool_call(
                            id=p.id,
                            type="custom",
                            custom=w.CustomCall(name=p.name, input=p.arguments),
                        )
                    )
                else:
                    calls.append(
                        tool_call(
                            id=p.id,
                            type="function",
                            function=function_call(name=p.name, arguments=p.arguments),
                        )
                    )
            elif type(p) is c.Refusal:
                if refusals is None:
                    refusals = []
                refusals.append(p.text)
            elif type(p) is c.Reasoning:
                self.opaque_dropped(p)
                if p.text:
                    if self.options.echo_reasoning_content:
                        if reasoning is None:
                            reasoning = []
                        reasoning.append(p.text)
                    else:
                        self.report.drop("assistant.reasoning")
            elif type(p) is c.ServerToolUse and p.name == SEARCH:
                # a replayed search: what it found, as the model's text
                texts.append(hosted_search.as_text(p) + "\n\n")
            elif type(p) is c.ServerToolUse and p.name == hosted_code.CODE:
                texts.append(hosted_code.as_text(p) + "\n\n")  # (likewise a code run)
            else:
                self.report.drop(f"assistant.{type(p).__name__.lower()}")
        text = texts[0] if len(texts) == 1 else "".join(texts)
        if not (text or refusals or calls or reasoning):
            return
        self.messages.append(
            w.AssistantMessage(
                content=text or None,
                refusal="".join(refusals) or None if refusals else None,
                tool_calls=calls or None,
                reasoning_content="\n\n".join(reasoning) or None if reasoning else None,
            )
        )

    def tool(self, results: Sequence[c.Part], i: int) -> None:
        carried: list[w.UserPart] = []
        for p in results:
            if type(p) is not c.ToolResult:
                self.report.drop(f"tool.{type(p).__name__.lower()}")
                continue
            if p.is_error:
                self.report.drop("tool_result.is_error")
            if p.cache_control is not None:
                self.report.drop("cache_control")
            content = p.content
            if self.fast and len(content) == 1 and type(content[0]) is c.Text:  # (fast path)
                self.messages.append(w.ToolMessage(tool_call_id=p.call_id, content=content[0].text))
                continue
            texts: list[str] = []
            media: list[w.UserPart] = []
            for q in content:
                if type(q) is c.Text:
                    texts.append(q.text)
                elif type(q) is c.Image or type(q) is c.File:
                    part = self._media(q, f"messages[{i}].tool_result")
                    if part is not None:
                        media.append(part)
                else:
                    self.report.drop(f"tool_result.{type(q).__name__.lower()}")
            self.messages.append(w.ToolMessage(tool_call_id=p.call_id, content="".join(texts)))
            if media:
                # Chat tool messages are text-only: the media ride in a user message
                # right after the tool turn, labelled with the call they belong to.
                carried.append(w.TextPart(text=f"[content returned by tool call {p.call_id}]"))
                carried.extend(media)
        if carried:
            self.messages.append(w.UserMessage(content=carried))


def encode_request(
    request: c.Request, report: TranslationReport, options: UpstreamOptions
) -> bytes:
    """A canonical request as a Chat Completions upstream body."""
    # Built by the callee, so its objects are let go before the body is copied out
    # (a translation's peak holds the body or them, not both).
    return exact_json.encode_made(_ENC, _to_wire, request, report, options)


def _to_wire(
    request: c.Request, report: TranslationReport, options: UpstreamOptions
) -> w.ChatRequest:
    if request.previous_response_id is not None:
        report.reject(
            "previous_response_id", "Chat Completions is stateless; send the whole conversation"
        )
    if request.background:
        report.reject("background", "Chat Completions has no background mode")
    if request.top_k is not None:
        report.drop("top_k")
    # A Chat answer's logprobs are not translated into other protocols (MP-38 refuses
    # them in a stream), so they are never asked for: a 400 up front, not a failed answer.
    if request.logprobs:
        report.reject("logprobs", "log probabilities from Chat Completions are not translated")
    if request.top_logprobs:
        report.reject("top_logprobs", "log probabilities from Chat Completions are not translated")
    elif request.top_logprobs == 0:
        report.drop("top_logprobs")

    enc = _Encoder(report, options)
    if request.system:
        for s in request.system:
            enc._cache(s.cache_control)
        system = policy.joined_system(request.system)
        if system is not None:
            enc.messages.append(w.SystemMessage(content=system))
    result, text, tool_message, out_messages = c.ToolResult, c.Text, w.ToolMessage, enc.messages
    call, tool_call, function_call, reasoning = c.ToolCall, w.ToolCall, w.FunctionCall, c.Reasoning
    fast = enc.fast
    for i, m in enumerate(request.messages):
        if m.role == "assistant":
            if not fast:
                enc.assistant(m)
                continue
            # fast path of ``enc.assistant``: the usual turn (plain texts and function
            # calls); anything else (a refusal, reasoning, a custom call, a marked text)
            # takes it.
            texts: list[str] = []
            calls: list[w.ToolCall] = []
            for p in m.content:
                if type(p) is call and p.kind == "function":
                    calls.append(
                        tool_call(
                            id=p.id,
                            type="function",
                            function=function_call(name=p.name, arguments=p.arguments),
                        )
                    )
                elif type(p) is text and p.cache_control is None and p.citations is None:
                    texts.append(p.text)
                elif type(p) is reasoning and not p.text:  # a bare carrier (Gemini's)
                    enc.opaque_dropped(p)
                else:
                    enc.assistant(m)  # (what was reported here, it reports again: no-op)
                    break
            else:
                said = texts[0] if len(texts) == 1 else "".join(texts)
                if said or calls:
                    out_messages.append(
                        w.AssistantMessage(content=said or None, tool_calls=calls or None)
                    )
        elif m.role == "user":
            enc.user(m, i)
        elif m.role == "system":  # a mid-conversation instruction: in place, as it was
            instruction = enc.system_turn(m)
            if instruction is not None:
                out_messages.append(instruction)
        else:
            parts = m.content
            if fast and len(parts) == 1:  # fast path of ``enc.tool``: one result of one text
                p = parts[0]
                if (
                    type(p) is result
                    and not p.is_error
                    and p.cache_control is None
                    and len(p.content) == 1
                    and type(only := p.content[0]) is text
                ):
                    out_messages.append(tool_message(tool_call_id=p.call_id, content=only.text))
                    continue
            enc.tool(parts, i)

    tools: list[w.ToolDef] = []
    for t in request.tools:
        enc._cache(t.cache_control)
        if t.kind == "custom":
            tools.append(
                w.ToolDef(
                    type="custom",
                    custom=w.CustomDef(
                        name=t.name, description=t.description, format=format_out(t.format)
                    ),
                )
            )
        else:
            tools.append(
                w.ToolDef(
                    type="function",
                    function=w.FunctionDef(
                        name=t.name,
                        description=t.description,
                        parameters=t.parameters,
                        strict=t.strict,
                    ),
                )
            )
    for h in request.hosted_tools:
        if not hosted_search.is_search_tool(h) and not (
            request.code_execution and hosted_code.is_code_tool(h)
        ):
            report.drop(f"tools.{h.type}")
    if request.code_execution is not None:
        report.drop("tools.code_execution")  # no sandbox behind Chat (the proxy runs none)
    if request.web_search is not None:
        # A Chat upstream does not search (``hosts_web_search``): the proxy runs the
        # search where it is configured to, before this encoder; here it is reported.
        report.drop("tools.web_search")

    tool_choice: str | w.ToolChoiceObject | None = None
    tc = request.tool_choice
    if tc is not None:
        if not tools:
            if tc.mode != "none" and tc.mode != "auto":
                report.drop("tool_choice")
        elif (
            tc.mode == "tool"
            and tc.name is not None
            and tc.name not in {t.name for t in request.tools}
        ):
            report.drop("tool_choice")  # it names a tool that was dropped (a hosted one)
        elif tc.mode == "tool" and tc.name is not None:
            ref = w.NamedRef(name=tc.name)
            tool_choice = (
                w.ToolChoiceObject(type="custom", custom=ref)
                if tc.kind == "custom"
                else w.ToolChoiceObject(type="function", function=ref)
            )
        elif tc.mode == "tool":
            tool_choice = "required"
        else:
            tool_choice = tc.mode

    response_format: w.ResponseFormat | None = None
    rf = request.response_format
    if rf is not None:
        if rf.type == "json_schema":
            response_format = w.ResponseFormat(
                type="json_schema",
                json_schema=w.JSONSchemaFormat(
                    name=rf.name or "response",
                    schema=rf.schema,
                    strict=rf.strict,
                    description=rf.description,
                ),
            )
        else:
            response_format = w.ResponseFormat(type=rf.type)

    if request.reasoning is not None:
        if request.reasoning.enabled is False:
            report.drop("reasoning")  # thinking off: sent as no reasoning_effort at all
        if request.reasoning.summary is not None:
            report.drop("reasoning.summary")

    service_tier = request.service_tier
    if service_tier is not None and service_tier not in _SERVICE_TIERS:
        report.drop("service_tier")
        service_tier = None

    out = w.ChatRequest(
        model=request.model,
        messages=enc.messages,
        tools=tools or None,
        tool_choice=tool_choice,
        parallel_tool_calls=request.parallel_tool_calls if tools else None,
        temperature=request.temperature,
        top_p=request.top_p,
        stop=list(request.stop) or None,
        n=request.n,
        response_format=response_format,
        reasoning_effort=effort_for(request.reasoning),
        user=ids.openai_user_id(request.user) if request.user is not None else None,
        metadata=request.metadata,
        service_tier=service_tier,
        prompt_cache_key=request.prompt_cache_key,
    )
    # Set apart: a call with 16 keywords or more is compiled into one taking a dict,
    # which costs the Struct half a microsecond more (see bench/notes-fixed-cost.md).
    out.verbosity = request.verbosity
    limit = request.max_tokens
    if limit is not None:
        if limit < 1:  # (OpenAI's minimum is 1: an Anthropic client's 0 is refused)
            limit = policy.token_limit(limit, 1, report, "Chat Completions")
        if options.chat_max_tokens_field == "max_tokens":
            out.max_tokens = limit
        else:
            out.max_completion_tokens = limit
    if request.stream:
        out.stream = True
        out.stream_options = {"include_usage": True}
    return out
