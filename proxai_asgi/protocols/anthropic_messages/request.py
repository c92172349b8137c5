"""Anthropic Messages requests, in two halves: the client side (a client's body decoded
into a ``canonical.Request``), then the upstream side (a canonical request encoded as
an Anthropic upstream's body).

Client side (``decode_request``): validation as strict as the real API and no stricter.
Every field Claude Code sends is accepted; top-level fields with no canonical meaning
(``context_management``, ``cache_control``, ``container``, ``mcp_servers``, ``betas``,
anything unknown) are dropped and reported, as are history blocks of server tools.

Upstream side (``encode_request``), the reasoning rule:
- ``budget_tokens`` given (only an Anthropic client sends one) -> ``thinking
  {type: enabled, budget_tokens}`` (plus ``output_config.effort`` when an effort is set);
- ``enabled is False`` or effort ``none``/``minimal`` -> ``thinking {type: disabled}``;
- effort ``low``/``medium``/``high``/``xhigh`` -> ``thinking {type: adaptive}`` and
  ``output_config.effort`` (``xhigh`` -> ``max``); a budget is never invented;
- ``enabled`` alone -> ``thinking {type: adaptive}``;
- a summary request -> ``thinking.display: "summarized"`` when thinking is on; when it
  is not, the summary is dropped and reported (``reasoning.summary``).

Thinking (adaptive or enabled) conflicts with settings Anthropic rejects alongside it.
Decided per conflict:
- forced tool use (``tool_choice`` any / tool): the client's ``tool_choice`` is kept and
  the thinking (with its ``output_config.effort``) is dropped, reported as
  ``reasoning``. A forced call is an instruction about this turn's answer; thinking is
  only a way of producing it.
- otherwise thinking is kept, and the sampling settings it forbids are dropped and
  reported: a ``temperature`` other than 1, any ``top_k``, a ``top_p`` below 0.95.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, NoReturn, cast

import msgspec

from ... import canonical as c
from ... import ids, reasoning_carry
from ...checks import settle, settles
from ...codec import RARE_REQUEST_FIELDS, OnePassDecoder, UpstreamOptions, absent
from ...errors import ProxyError, TranslationReport
from ...lazy_decoder import LazyDecoder
from .._kit import exact_json, hosted_code, hosted_search, json_objects, policy, tool_schemas
from .._kit.fast_paths import FAST
from .._kit.hosted_search import SEARCH
from .._kit.media import is_data_url, parse_data_url
from . import cache_breakpoints, code_exec, search, wire
from .cache_breakpoints import MARKER
from .response import citations_in, reasoning_from_thinking
from .validate import image_media_type, system_placement, tool_results_follow, validate

# ============================================== client side: the client's body -> canonical

_request_decoder: LazyDecoder[wire.ClientMessagesRequest] = LazyDecoder(wire.ClientMessagesRequest)
# (for the error of a body whose call ``input`` is not an object: ``_decode_error``)
_strict_decoder: LazyDecoder[wire.MessagesRequest] = LazyDecoder(wire.MessagesRequest)
_fields_decoder: LazyDecoder[dict[str, msgspec.Raw]] = LazyDecoder(dict[str, msgspec.Raw])
_json = msgspec.json.Decoder()

_KNOWN_FIELDS = frozenset(wire.MessagesRequest.__struct_fields__)
_one_pass = OnePassDecoder(wire.ClientRequest, _KNOWN_FIELDS)
_TOOL_FIELDS = frozenset(wire.ToolParam.__struct_fields__)
# how many keys the usual tool declaration has: name, input_schema (and description;
# and cache_control, counted apart)
_PLAIN_TOOL_KEY_COUNTS = (3, 2)  # (indexed by ``description is None``)
# The fields an agent loop's turn leaves out, handled only when one is there.
RARE_FIELDS = absent(
    "stop_sequences", "top_p", "top_k", "output_config", "output_format", "service_tier"
)
_PATH = re.compile(r"`\$\.?([^`]*)`")
_EFFORT_IN = {"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh"}
_TOOL_CHOICE_IN: dict[str, Literal["auto", "none", "required"]] = {
    "auto": "auto",
    "none": "none",
    "any": "required",
}


def _invalid(error: Exception, prefix: str = "") -> ProxyError:
    """A 400 from a msgspec error, its ``$.path`` kept (under ``prefix``) and named."""
    message = str(error)
    if prefix:
        if "`$" in message:
            message = message.replace("`$", f"`$.{prefix}", 1)
        else:  # an error at the root of a converted value names no path
            message = f"{message} - at `$.{prefix}`"
    m = _PATH.search(message)
    return ProxyError.invalid(message, param=m.group(1) if m else None)


def _tag(block: msgspec.Struct) -> str:
    return str(block.__struct_config__.tag)


def _decode_body(body: bytes, report: TranslationReport) -> wire.ClientMessagesRequest:
    """The body, in one parse when it holds only known fields and the declared dropped
    ones (``wire.ClientRequest``); other top-level fields are dropped and reported in
    body order, which takes a second parse for their names."""
    one = _one_pass.decode(body, report) if FAST.on else None  # fast path of the two below
    if one is not None:
        return one
    try:
        req = _request_decoder.decode(body)
        fields = _fields_decoder.decode(body)
    except msgspec.ValidationError as e:
        _decode_error(body)  # the strict decode fails too, maybe earlier in the body
        raise _invalid(e) from None
    except (msgspec.DecodeError, ValueError) as e:  # ValueError: invalid UTF-8
        raise ProxyError.invalid(f"request body is not valid JSON: {e}") from None
    for name in fields:
        if name not in _KNOWN_FIELDS:
            report.drop(name)
    return req


def _decode_error(body: bytes) -> None:
    """The 400 the strict decode (``wire.MessagesRequest``, a call's ``input`` an
    object) gives ``body``, if it fails. The client decode leaves ``input`` encoded,
    so it takes a body with an ``input`` that is not one: every error path calls this
    first, as the API names a malformed body before anything else in it."""
    try:
        _strict_decoder.decode(body)
    except msgspec.ValidationError as e:
        raise _invalid(e) from None


def decode_request(body: bytes, report: TranslationReport) -> c.Request:
    req = _decode_body(body, report)
    try:
        return _request_in(req, report)
    except ProxyError:
        _decode_error(body)
        raise


def _request_in(req: wire.ClientMessagesRequest, report: TranslationReport) -> c.Request:
    declared = _declared(req.tools) if req.tools else None
    validate(req, declared)
    system = _system_in(req.system)
    if not req.messages:
        raise ProxyError.invalid("messages: at least one message is required", "messages")
    try:
        messages, system_turns = _messages_in(req.messages, report)
    except ProxyError:
        # The API names an unanswered tool_use before any error in the messages: the
        # pairing is checked as the turns are converted, so it is looked for here.
        tool_results_follow(req.messages)
        raise

    tools, hosted = _tools_in(declared, report) if declared else ([], [])
    tool_choice, parallel = _tool_choice_in(req.tool_choice)
    web_search = search.search_in(hosted, report) if hosted else None
    out = c.Request(
        model=req.model,
        messages=messages,
        system=system,
        tools=tools,
        hosted_tools=hosted,
        web_search=web_search,
        code_execution=hosted_code.code_in(hosted, report) if hosted else None,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        max_tokens=req.max_tokens,
        temperature=req.temperature,
        stream=bool(req.stream),
        reasoning=_reasoning_in(req.thinking, req.output_config),
        user=req.metadata.user_id if req.metadata else None,
    )
    if system_turns:
        out.system_turns = True
    # fast path: the usual request has none of the rarer fields, whose code is skipped
    if not (FAST.on and RARE_FIELDS(req)):
        out.top_p, out.top_k = req.top_p, req.top_k
        out.stop = list(req.stop_sequences or ())
        out.service_tier = req.service_tier
        fmt = (req.output_config.format if req.output_config else None) or req.output_format
        if fmt is not None:
            out.response_format = c.ResponseFormat(
                type="json_schema", name="response", schema=fmt.schema
            )
    return out


def _messages_in(
    wire_messages: list[wire.ClientInputMessage], report: TranslationReport
) -> tuple[list[c.Message], bool]:
    """The turns, a mid-conversation system message one in place. It also checks what
    ``validate.tool_results_follow`` checks, in the same pass: the ids of each
    assistant turn's tool_use blocks are looked for in the next message (the usual
    turn, one call answered by the next message's first block, inline), and a turn
    that fails defers to it for the API's error.

    ``report.settled`` tells ``checks.check_request`` it may skip its walk: the usual
    turns hold no media and their result answers the call before it; what the other
    paths build is looked at (``settles``)."""
    messages: list[c.Message] = []
    count = len(wire_messages)
    text_block, tool_result = wire.TextBlock, wire.ToolResultBlock
    tool_use = wire.ClientToolUseBlock
    text, call, result, message = c.Text, c.ToolCall, c.ToolResult, c.Message
    arguments_in = _ARGUMENTS_IN.recent  # (a miss: ``_arguments_in`` looks again)
    # the ids the previous (assistant) message asks for: one (a str, the usual turn) or more
    pending: str | list[str] | None = None
    settled = True
    system_turns = False
    fast = FAST.on
    for i, m in enumerate(wire_messages):
        content = m.content
        # Fast path of the general walk below (``_user_turn``, ``_assistant_turn``): an
        # agent loop's two turns first, whole: a user turn of one tool result that
        # answers the call before it (if any), and an assistant turn of a text and a
        # call (that follows no call). Neither can hold an empty text block.
        if fast and type(content) is list:
            if len(content) == 1:
                if (
                    type(only := content[0]) is tool_result
                    and m.role == "user"
                    and (pending is None or only.tool_use_id == pending)
                ):
                    messages.append(
                        message(
                            role="tool",
                            content=[
                                result(
                                    call_id=only.tool_use_id,
                                    content=[text(text=only.content)] if only.content else [],
                                    is_error=only.is_error is True,
                                    cache_control=only.cache_control,
                                )
                                if type(only.content) is str
                                else _tool_result_in(only, i, 0, report)
                            ],
                        )
                    )
                    if settled and (pending is None or type(only.content) is not str):
                        settled = settles(messages[-1].content, (pending,) if pending else ())
                    pending = None
                    continue
            elif (
                len(content) == 2
                and type(said := content[0]) is text_block
                and type(used := content[1]) is tool_use
                and m.role == "assistant"
                and pending is None
                and said.text
                and not said.citations
            ):  # (as ``_assistant_turn`` builds it)
                messages.append(
                    message(
                        role="assistant",
                        content=[
                            text(text=said.text, cache_control=said.cache_control),
                            call(
                                id=used.id,
                                name=used.name,
                                arguments=arguments_in(key := bytes(used.input))
                                or _arguments_in(key),
                            ),
                        ],
                    )
                )
                pending = used.id
                continue
            elif (
                len(content) == 2
                and type(only := content[0]) is tool_result
                and type(said := content[1]) is text_block
                and m.role == "user"
                and (pending is None or only.tool_use_id == pending)
                and said.text
                and not said.citations
            ):  # a result and a text (a Claude Code turn): two turns, as ``_user_turn``'s
                messages.append(message(role="tool", content=[_tool_result_in(only, i, 0, report)]))
                if settled:
                    settled = settles(messages[-1].content, (pending,) if pending else ())
                messages.append(
                    message(
                        role="user",
                        content=[text(text=said.text, cache_control=said.cache_control)],
                    )
                )
                pending = None
                continue
        asked: list[str] = []  # the calls this turn answers (every one, once checked)
        if pending is not None:
            asked = [pending] if isinstance(pending, str) else pending
            _check_answered(content, asked, wire_messages)
            pending = None
        if isinstance(content, str):  # the short form: one plain text block
            if not content and not (m.role == "assistant" and i == count - 1):
                _empty_message(i)
            said_text = text(text=content)
            if m.role == "system":
                system_placement(wire_messages, i)
                messages.append(message(role="system", content=[said_text]))
                system_turns = True
            elif m.role == "user":
                messages.append(message(role="user", content=[said_text]))
            else:
                messages.append(message(role="assistant", content=[said_text]))
            continue
        if m.role == "system":
            _check_not_empty(content, i, count, m.role)
            system_placement(wire_messages, i)
            messages.append(message(role="system", content=_system_message(content, i)))
            system_turns = True
            continue
        if not content and not (m.role == "assistant" and i == count - 1):
            _empty_message(i)
        # The turns check their text blocks as they go (one pass, not two); another
        # error in the message gives way to an empty text block anywhere in it, as
        # the API names that one first.
        try:
            if m.role == "user":
                turn = _user_turn(content, i, report)
                messages.extend(turn)
                if settled:
                    settled = settle(turn, asked)
            else:
                messages.append(_assistant_turn(content, i, report))
                pending = [b.id for b in content if type(b) is tool_use] or None
                if settled:
                    settled = settles(messages[-1].content)
        except ProxyError:
            _check_not_empty(content, i, count, m.role)
            raise
    report.settled = settled
    return messages, system_turns


def _check_answered(
    content: str | list[wire.ClientInputBlock],
    ids: list[str],
    messages: list[wire.ClientInputMessage],
) -> None:
    """Whether ``content`` answers every id in ``ids`` (the general case of the check
    in ``_messages_in``); if not, the API's error, from ``tool_results_follow``."""
    if type(content) is not str:
        answered = {b.tool_use_id for b in content if type(b) is wire.ToolResultBlock}
        if answered.issuperset(ids):
            return
    tool_results_follow(messages)
    raise AssertionError("tool_results_follow passed a turn that leaves a tool_use unanswered")


# A call's ``input`` (its JSON, as the client wrote it) as canonical arguments: the JSON
# text of the object, as ``response.arguments_json`` gives it, by a look-up shared with
# Gemini's ``args`` (``json_objects.ARGUMENTS``: an agent loop resends every call).
_ARGUMENTS_IN = json_objects.ARGUMENTS


def _arguments_in(raw: bytes) -> str:
    if not raw.startswith(b"{"):  # (``decode_request`` names it as the strict decode does)
        raise ProxyError.invalid("tool_use.input: Input should be an object")
    return json_objects.arguments(raw)


# Blocks are told apart by ``type(b) is``, not ``isinstance``: a failed ``isinstance``
# against a msgspec Struct class costs ~70 ns (the Struct metaclass sends CPython down
# its slow path), a type identity test ~15 ns, and decoded blocks are always exactly
# one of the union's classes. Error paths (``messages[i].content[j]``) are built only
# when an error (or a media block, which may raise one) needs them.


def _block_path(i: int, j: int) -> str:
    return f"messages[{i}].content[{j}]"


def _empty_message(i: int) -> None:
    path = f"messages[{i}].content"
    raise ProxyError.invalid(
        f"{path}: all messages must have non-empty content except for the optional "
        "final assistant message",
        path,
    )


def _check_not_empty(blocks: list[wire.ClientInputBlock], i: int, count: int, role: str) -> None:
    """The API's rules: every message but a final assistant one has content, and no
    text block is empty."""
    if not blocks and not (role == "assistant" and i == count - 1):
        _empty_message(i)
    for j, b in enumerate(blocks):
        if type(b) is wire.TextBlock and not b.text:
            _empty_text(i, j)


def _empty_text(i: int, j: int) -> NoReturn:
    path = f"{_block_path(i, j)}.text"
    raise ProxyError.invalid(f"{path}: text content blocks must be non-empty", path)


def _system_in(system: str | list[wire.TextBlock] | None) -> list[c.Text]:
    if system is None:
        return []
    if isinstance(system, str):
        return [c.Text(text=system)] if system else []
    return [c.Text(text=b.text, cache_control=b.cache_control) for b in system]


def _system_message(blocks: list[wire.ClientInputBlock], i: int) -> list[c.Part]:
    out: list[c.Part] = []
    for j, b in enumerate(blocks):
        if type(b) is not wire.TextBlock:
            path = f"{_block_path(i, j)}.type"
            raise ProxyError.invalid(f"{path}: a system message holds only text blocks", path)
        out.append(c.Text(text=b.text, cache_control=b.cache_control))
    return out


def _text_in(b: wire.TextBlock, report: TranslationReport) -> c.Text:
    """A text block (message content and tool_result content)."""
    if not b.citations:
        return c.Text(text=b.text, cache_control=b.cache_control)
    cites = citations_in(b.citations)
    if len(cites or ()) < len(b.citations):
        report.drop("text.citations")  # document-location citations have no URL
    return c.Text(text=b.text, cache_control=b.cache_control, citations=cites)


def _media_in(
    b: wire.ImageBlock | wire.DocumentBlock, path: str, report: TranslationReport
) -> c.Part:
    """Image and document blocks (message content and tool_result content)."""
    src = b.source
    if type(b) is wire.ImageBlock:
        if type(src) is wire.Base64Source:
            image_media_type(src.media_type, path)
            return c.Image(data=src.data, media_type=src.media_type, cache_control=b.cache_control)
        if type(src) is wire.UrlSource:
            return c.Image(url=src.url, cache_control=b.cache_control)
        raise ProxyError.invalid(
            f"{path}.source: an Anthropic file reference cannot be translated", f"{path}.source"
        )
    assert type(b) is wire.DocumentBlock
    if b.context is not None:
        report.drop("document.context")
    if b.citations is not None:
        report.drop("document.citations")
    doc = c.File(filename=b.title, cache_control=b.cache_control)
    if type(src) is wire.Base64Source:
        doc.data, doc.media_type = src.data, src.media_type
    elif type(src) is wire.TextSource:
        doc.text, doc.media_type = src.data, src.media_type
    elif type(src) is wire.UrlSource:
        doc.url = src.url
    elif type(src) is wire.FileSource:
        # An Anthropic Files-API id means nothing to another provider (an OpenAI
        # ``file_id`` names an OpenAI file): rejected like a file-source image.
        raise ProxyError.invalid(
            f"{path}.source: an Anthropic file reference cannot be translated", f"{path}.source"
        )
    else:
        assert type(src) is wire.ContentSource
        if isinstance(src.content, str):
            doc.text = src.content
        else:
            if any(type(x) is not wire.TextBlock for x in src.content):
                report.drop("document.content.image")  # a document carries its text only
            doc.text = "\n".join(x.text for x in src.content if type(x) is wire.TextBlock)
    return doc


def _tool_result_in(
    b: wire.ToolResultBlock, i: int, j: int, report: TranslationReport
) -> c.ToolResult:
    content: list[c.Part] = []
    if isinstance(b.content, str):
        if b.content:
            content.append(c.Text(text=b.content))
    elif b.content:
        for k, x in enumerate(b.content):
            if type(x) is wire.TextBlock:
                content.append(_text_in(x, report))
            elif type(x) is wire.ImageBlock or type(x) is wire.DocumentBlock:
                content.append(_media_in(x, f"{_block_path(i, j)}.content[{k}]", report))
            else:
                report.drop(f"tool_result.content.{_tag(x)}")
    return c.ToolResult(
        call_id=b.tool_use_id,
        content=content,
        is_error=bool(b.is_error),
        cache_control=b.cache_control,
    )


def _user_turn(
    blocks: list[wire.ClientInputBlock], i: int, report: TranslationReport
) -> list[c.Message]:
    """A user turn: its tool_result blocks become a ``tool`` message placed before the
    rest of the turn's content (a second, ``user`` message)."""
    results: list[c.Part] = []
    rest: list[c.Part] = []
    for j, b in enumerate(blocks):
        if type(b) is wire.TextBlock:
            if not b.text:
                _empty_text(i, j)
            rest.append(_text_in(b, report))
        elif type(b) is wire.ToolResultBlock:
            results.append(_tool_result_in(b, i, j, report))
        elif type(b) is wire.ImageBlock or type(b) is wire.DocumentBlock:
            rest.append(_media_in(b, _block_path(i, j), report))
        elif type(b) is wire.ClientToolUseBlock:
            path = _block_path(i, j)
            raise ProxyError.invalid(
                f"{path}.type: tool_use blocks belong in assistant messages", f"{path}.type"
            )
        else:
            report.drop(f"messages.content.{_tag(b)}")
    out: list[c.Message] = []
    if results:
        out.append(c.Message(role="tool", content=results))
    if rest or not results:
        out.append(c.Message(role="user", content=rest))
    return out


def _assistant_turn(
    blocks: list[wire.ClientInputBlock], i: int, report: TranslationReport
) -> c.Message:
    parts: list[c.Part] = []
    append = parts.append
    for b in blocks:  # (its position is looked up by the paths that name it)
        if type(b) is wire.TextBlock:
            if not b.text:
                _empty_text(i, _position(blocks, b))
            append(
                c.Text(text=b.text, cache_control=b.cache_control)
                if not b.citations
                else _text_in(b, report)
            )
        elif type(b) is wire.ClientToolUseBlock:
            key = bytes(b.input)
            append(
                c.ToolCall(
                    id=b.id, name=b.name, arguments=_ARGUMENTS_IN.recent(key) or _arguments_in(key)
                )
            )
        elif type(b) is wire.ThinkingBlock:
            append(reasoning_from_thinking(b.thinking, b.signature))
        elif type(b) is wire.RedactedThinkingBlock:
            append(c.Reasoning(redacted=b.data))
        elif type(b) is wire.ImageBlock or type(b) is wire.DocumentBlock:
            append(_media_in(b, _block_path(i, _position(blocks, b)), report))
        elif type(b) is wire.ToolResultBlock:
            path = _block_path(i, _position(blocks, b))
            raise ProxyError.invalid(
                f"{path}.type: tool_result blocks belong in user messages", f"{path}.type"
            )
        elif type(b) is wire.ServerToolUseBlock and b.name == SEARCH:
            append(search.replay_in(b, _search_result(blocks, b.id)))
        elif type(b) is wire.WebSearchToolResultBlock and any(
            type(x) is wire.ServerToolUseBlock and x.id == b.tool_use_id for x in blocks
        ):
            pass  # (taken with its call)
        elif type(b) is wire.ServerToolUseBlock and (run := _code_run(blocks, b)) is not None:
            append(run)
        elif code_exec.is_result(b) and any(
            type(x) is wire.ServerToolUseBlock and x.id == b.tool_use_id  # type: ignore[union-attr]
            for x in blocks
        ):
            pass  # (taken with its call)
        else:
            report.drop(f"messages.content.{_tag(b)}")
    return c.Message(role="assistant", content=parts)


def _code_run(
    blocks: list[wire.ClientInputBlock], call: wire.ServerToolUseBlock
) -> c.ServerToolUse | None:
    """A replayed code run (the call and its result) as the canonical run; None for a
    call that is no run (file edits) or has no result."""
    for b in blocks:
        if code_exec.is_result(b) and b.tool_use_id == call.id:  # type: ignore[union-attr]
            run = c.ServerToolUse(id=call.id, name=call.name, input=dict(call.input or {}))
            code_exec.result_in(run, b.content)  # type: ignore[union-attr]
            return run if run.name == hosted_code.CODE else None
    return None


def _search_result(
    blocks: list[wire.ClientInputBlock], call_id: str
) -> wire.WebSearchToolResultBlock | None:
    for b in blocks:
        if type(b) is wire.WebSearchToolResultBlock and b.tool_use_id == call_id:
            return b
    return None


# Sets of the usual tool declarations (a name, a description, a schema) by their bytes:
# an agent loop resends the same set with every request (``tool_schemas``).
_TOOLS_IN = tool_schemas.ToolLookup()


def _declared(raw_tools: msgspec.Raw) -> list[c.Tool | dict[str, Any]]:
    """The client's tool declarations: the usual ones as canonical tools, the others
    decoded for ``_tools_in``; a set of usual ones only is looked up by its bytes (one
    hash of the whole set: a look-up per tool cost twice as much)."""
    key = bytes(raw_tools)
    fast = FAST.on
    known = _TOOLS_IN.get(key) if fast else None  # fast path of the loop below
    if known is not None:
        return known  # type: ignore[return-value]
    decls = _json.decode(key)
    if decls is None:
        return []
    if type(decls) is not list:  # (``decode_request`` names it as the strict decode does)
        raise ProxyError.invalid("tools: expected a list", "tools")
    out: list[c.Tool | dict[str, Any]] = []
    plain: list[c.Tool] = []
    for decl in decls:
        if type(decl) is not dict:  # (likewise)
            raise ProxyError.invalid("tools: a tool must be an object", "tools")
        name, schema, about = decl.get("name"), decl.get("input_schema"), decl.get("description")
        mark = decl.get("cache_control")  # (SDK users mark the last tool to cache them all)
        if (  # fast path of ``_tools_in``'s ``msgspec.convert``
            fast
            and type(name) is str
            and type(schema) is dict
            and (about is None or type(about) is str)
            and (mark is None or type(mark) is dict)
            # no other key (a length, not a key-set test: that was a fifth of the loop)
            and len(decl) == _PLAIN_TOOL_KEY_COUNTS[about is None] + (mark is not None)
        ):
            tool = c.Tool(name=name, description=about, parameters=schema, cache_control=mark)
            plain.append(tool)
            out.append(tool)
        else:
            out.append(decl)
    if len(plain) == len(out):
        _TOOLS_IN.put(key, plain)
    return out


def _tools_in(
    declared: list[c.Tool | dict[str, Any]], report: TranslationReport
) -> tuple[list[c.Tool], list[c.HostedTool]]:
    tools: list[c.Tool] = []
    hosted: list[c.HostedTool] = []
    for i, raw in enumerate(declared):
        if type(raw) is c.Tool:  # the usual declaration (``_declared``)
            tools.append(raw)
            continue
        assert type(raw) is dict
        kind = raw.get("type")
        if kind is not None and kind != "custom":
            if not isinstance(kind, str):
                path = f"tools[{i}].type"
                raise ProxyError.invalid(f"{path}: expected a string", path)
            hosted.append(c.HostedTool(protocol="anthropic_messages", type=kind, raw=raw))
            continue
        try:
            t = msgspec.convert(raw, wire.ToolParam)
        except msgspec.ValidationError as e:
            raise _invalid(e, f"tools[{i}]") from None
        if t.input_schema is None:  # required by the API for client tools
            path = f"tools[{i}].input_schema"
            raise ProxyError.invalid(f"{path}: field required", path)
        for name in raw:
            if name not in _TOOL_FIELDS:
                report.drop(f"tools.{name}")  # defer_loading, input_examples, ...
        tools.append(
            c.Tool(
                name=t.name,
                description=t.description,
                parameters=t.input_schema,
                strict=t.strict,
                cache_control=t.cache_control,
            )
        )
    return tools, hosted


def _tool_choice_in(tc: wire.ToolChoice | None) -> tuple[c.ToolChoice | None, bool | None]:
    if tc is None:
        return None, None
    parallel = False if tc.disable_parallel_tool_use else None
    if tc.type == "tool":
        if not tc.name:
            raise ProxyError.invalid(
                "tool_choice.name: required when type is 'tool'", "tool_choice.name"
            )
        return c.ToolChoice(mode="tool", name=tc.name), parallel
    return c.ToolChoice(mode=_TOOL_CHOICE_IN[tc.type]), parallel


def _reasoning_in(
    thinking: wire.ThinkingConfig | None, output: wire.OutputConfig | None
) -> c.ReasoningConfig | None:
    effort = _EFFORT_IN[output.effort] if output and output.effort else None
    if thinking is None:
        return c.ReasoningConfig(effort=effort) if effort else None
    rc = c.ReasoningConfig(effort=effort, enabled=thinking.type != "disabled")
    if thinking.type == "disabled":
        rc.effort = "none"
    elif thinking.type == "enabled":
        rc.budget_tokens = thinking.budget_tokens
    if thinking.display == "summarized":
        rc.summary = "auto"
    return rc


# ============================================ upstream side: canonical -> this upstream's body

_encoder = msgspec.json.Encoder()
_replace = msgspec.structs.replace
_EFFORT_OUT: dict[str, wire.Effort] = {
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "max",
}
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
# base64 prefixes of the image formats Anthropic accepts, for data without a media type
_IMAGE_MAGIC = (
    ("/9j/", "image/jpeg"),
    ("iVBORw0KGgo", "image/png"),
    ("R0lGOD", "image/gif"),
    ("UklGR", "image/webp"),
)
_DEFAULT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
_TOOL_CHOICE_OUT: dict[str, Literal["auto", "none", "any"]] = {
    "auto": "auto",
    "none": "none",
    "required": "any",
}


def encode_request(
    request: c.Request, report: TranslationReport, options: UpstreamOptions
) -> bytes:
    # Built by the callee, so its objects are let go before the body is copied out (a
    # translation's peak holds the body or them, not both); a tool set not kept yet
    # comes back in ``fresh`` and is kept after that, so the request that makes the
    # entry peaks no higher than the others.
    fresh: list[list[wire.ToolParam | dict[str, Any]]] = []
    out = exact_json.encode_made(_encoder, _to_wire, request, report, options, fresh)
    if fresh and FAST.on:
        _keep_tool_set(request.tools, fresh.pop())
    return out


def _to_wire(
    request: c.Request,
    report: TranslationReport,
    options: UpstreamOptions,
    fresh: list[list[wire.ToolParam | dict[str, Any]]],
) -> wire.UpstreamRequest:
    if not (FAST.on and RARE_REQUEST_FIELDS(request)):  # (fast path: none there)
        _check_fields(request, report)
    tools = _tools_out(request, report)
    tool_choice = _tool_choice_out(request, tools, report)
    thinking, effort = (
        _reasoning_out(request.reasoning, report) if request.reasoning is not None else _NO_THINKING
    )
    fmt = _format_out(request.response_format) if request.response_format is not None else None
    temperature = request.temperature
    if temperature is not None and temperature > 1.0:
        report.drop("temperature")  # Anthropic's range is 0..1
        temperature = 1.0
    top_p, top_k = request.top_p, request.top_k
    thinking_on = thinking is not None and thinking.type != "disabled"
    if thinking_on and tool_choice is not None and tool_choice.type in ("any", "tool"):
        report.drop("reasoning")  # forced tool use wins (see the module docstring)
        thinking, effort, thinking_on = None, None, False
    if thinking_on:
        temperature, top_p, top_k = _sampling_with_thinking(temperature, top_p, top_k, report)
    if request.system_turns:
        messages, marked, short = _messages_with_system_turns(request.messages, report)
    else:
        messages, marked, short = _messages_out(request.messages, report)
    body = wire.UpstreamRequest(
        model=request.model,
        messages=messages,
        max_tokens=_max_tokens(request, thinking, options),
        system=_system_out(request.system),
        stop_sequences=request.stop or None,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        stream=True if request.stream else None,
        metadata=wire.Metadata(user_id=request.user) if request.user else None,
        tools=(tools.plain if isinstance(tools, ToolSet) else tools) or None,
        tool_choice=tool_choice,
        thinking=thinking,
        output_config=wire.OutputConfig(effort=effort, format=fmt) if effort or fmt else None,
        service_tier=(
            request.service_tier if request.service_tier in ("auto", "standard_only") else None
        ),
    )
    if request.implicit_caching and options.cache_breakpoints:
        cache_breakpoints.place(
            body,
            messages_marked=marked,
            short_turns=short,
            marked_tools=tools.marked if isinstance(tools, ToolSet) else None,
        )
    if type(tools) is list and tools and not request.hosted_tools and request.web_search is None:
        fresh.append(tools)  # a set not kept yet
    return body


_NO_THINKING: tuple[None, None] = (None, None)


def _max_tokens(
    request: c.Request, thinking: wire.ThinkingConfig | None, options: UpstreamOptions
) -> int:
    """The client's max_tokens (0 too: Anthropic takes it, to write the prompt cache
    without an answer), or the default; with no max_tokens from the client and a
    thinking budget at least as large (Gemini CLI asks for 8192 and no limit), room
    for the answer on top of the budget, since Anthropic requires budget < max_tokens."""
    limit = request.max_tokens
    if limit is not None:
        if limit < 0:  # (every client codec refuses it first)
            policy.negative_limit(limit)
        return limit
    budget = thinking.budget_tokens if thinking is not None else None
    if budget is not None and budget >= options.default_max_tokens:
        return budget + options.default_max_tokens
    return options.default_max_tokens


def _check_fields(request: c.Request, report: TranslationReport) -> None:
    """Fields Anthropic cannot express: rejected when dropping them changes the kind of
    answer, otherwise dropped and reported."""
    if request.n is not None and request.n > 1:
        report.reject("n", "Anthropic Messages returns a single candidate")
    if request.logprobs:
        report.reject("logprobs", "Anthropic Messages has no log probabilities")
    if request.top_logprobs:
        report.reject("top_logprobs", "Anthropic Messages has no log probabilities")
    if request.previous_response_id is not None:
        report.reject(
            "previous_response_id", "Anthropic Messages is stateless; send the whole history"
        )
    if request.background:
        report.reject("background", "Anthropic Messages has no background responses")
    if request.prompt_cache_key is not None:
        report.drop("prompt_cache_key")
    if request.verbosity is not None:
        report.drop("verbosity")
    if request.metadata:
        report.drop("metadata")
    if request.service_tier is not None and request.service_tier not in ("auto", "standard_only"):
        report.drop("service_tier")


def _system_out(system: list[c.Text]) -> str | list[wire.TextBlock] | None:
    if len(system) == 1:  # the usual system prompt, in the short form
        only = system[0]
        if only.text and only.cache_control is None:
            return only.text
    if not system:
        return None
    texts = [t for t in system if t.text]
    if not texts:
        return None
    if len(texts) == 1 and texts[0].cache_control is None:
        return texts[0].text
    return [wire.TextBlock(text=t.text, cache_control=t.cache_control) for t in texts]


def _messages_with_system_turns(
    messages: list[c.Message], report: TranslationReport
) -> tuple[list[wire.InputMessage], bool, list[wire.InputMessage]]:
    """``_messages_out`` for a conversation with system turns: each stays a system
    message in its place (Anthropic takes them there: the client's placement was
    checked), the turns between them made as usual."""
    out: list[wire.InputMessage] = []
    short: list[wire.InputMessage] = []
    marked = False
    start = 0
    for i, m in enumerate([*messages, None]):
        if m is not None and m.role != "system":
            continue
        if start < i:
            made, made_marked, made_short = _messages_out(messages[start:i], report)
            out += made
            short += made_short
            marked = marked or made_marked
        start = i + 1
        if m is None:
            break
        texts = [p for p in m.content if type(p) is c.Text and p.text]
        marked = marked or any(t.cache_control is not None for t in texts)
        if len(texts) == 1 and texts[0].cache_control is None:
            out.append(turn := wire.InputMessage(role="system", content=texts[0].text))
            short.append(turn)
        elif texts:
            blocks: list[wire.InputBlock] = [
                wire.TextBlock(text=t.text, cache_control=t.cache_control) for t in texts
            ]
            out.append(wire.InputMessage(role="system", content=blocks))
    return out, marked, short


def _messages_out(
    messages: list[c.Message], report: TranslationReport
) -> tuple[list[wire.InputMessage], bool, list[wire.InputMessage]]:
    """Canonical turns -> Anthropic turns: tool turns become user turns of tool_result
    blocks; consecutive same-role turns merge (parallel results share ONE user turn);
    in each user turn the tool_result blocks come first. Also whether a block carries
    ``cache_control``, and the turns opened in the short form (a string; they may
    have become blocks since): ``cache_breakpoints.place`` need not look at every block.

    One pass, one wire message per turn: the usual parts (text, a function call, a
    tool result of one text) are built inline, as an agent loop resends every one of
    them each turn and a call per part (``_part_out``, which the rest take) was most of
    this function's time; a turn's message is made when it opens and later same-role
    turns extend its blocks (a user turn that took tool results after other blocks is
    reordered at the end)."""
    out: list[wire.InputMessage] = []
    dropped_calls: set[str] = set()
    marked = False
    text_block, tool_use, tool_result = wire.TextBlock, wire.ToolUseBlock, wire.ToolResultBlock
    text, call, result, reasoning = c.Text, c.ToolCall, c.ToolResult, c.Reasoning
    # (the young generations' look-ups: a miss is looked up again by ``_safe_id`` and
    # ``_raw_input``, which also find older entries)
    message, safe_ids, raw_inputs = wire.InputMessage, _SAFE_IDS.recent, _RAW_OBJECTS.recent
    turn: wire.InputMessage | None = None  # the open turn, its blocks and role
    turn_blocks: list[wire.InputBlock] = []
    turn_user = turn_other = turn_unordered = False
    unordered: list[wire.InputMessage] = []  # user turns with a result after another block
    short: list[wire.InputMessage] = []
    thoughts_dropped = False
    fast = FAST.on
    for i, m in enumerate(messages):
        parts_in = m.content
        # Fast path of the loop below: an agent loop's usual turns, whole (no per-part
        # loop, flags or branches): a tool turn of one result of one plain text, a turn
        # of one text, and an assistant turn of a text then one call. The same blocks,
        # and the same merge, as the loop.
        n = len(parts_in) if fast else 0
        if n == 1:
            if (
                type(p := parts_in[0]) is result
                and m.role == "tool"
                and p.kind != "custom"
                and (not dropped_calls or p.call_id not in dropped_calls)
                and len(p.content) == 1
                and type(only := p.content[0]) is text
                and only.text
                and only.cache_control is None
            ):
                answer = tool_result(
                    tool_use_id=safe_ids(p.call_id) or _safe_id(p.call_id),
                    content=only.text,
                    is_error=True if p.is_error else None,
                    cache_control=p.cache_control,
                )
                if p.cache_control is not None:
                    marked = True
                if turn is not None and turn_user:
                    if type(turn.content) is str:
                        turn.content = turn_blocks
                    if turn_other and not turn_unordered:
                        unordered.append(turn)
                        turn_unordered = True
                    turn_blocks.append(answer)
                    continue
                turn_blocks = [answer]
                turn = message(role="user", content=turn_blocks)
                out.append(turn)
                turn_user, turn_other, turn_unordered = True, False, False
                continue
            if type(p) is text and p.text and not p.citations:
                # a turn of one text (a conversation's first and last user turns):
                # opened in the short form when it is not marked
                said_block = text_block(text=p.text, cache_control=p.cache_control)
                user = m.role != "assistant"
                if turn is not None and turn_user is user:
                    if type(turn.content) is str:
                        turn.content = turn_blocks
                    turn_blocks.append(said_block)
                    turn_other = True
                elif p.cache_control is None:
                    turn_blocks = [said_block]
                    turn = message(role="user" if user else "assistant", content=p.text)
                    short.append(turn)
                    out.append(turn)
                    turn_user, turn_other, turn_unordered = user, True, False
                else:
                    turn_blocks = [said_block]
                    turn = message(role="user" if user else "assistant", content=turn_blocks)
                    out.append(turn)
                    turn_user, turn_other, turn_unordered = user, True, False
                if p.cache_control is not None:
                    marked = True
                continue
        elif (
            (
                n == 2
                or (  # a Gemini turn's reasoning, a thought signature only: dropped
                    n == 3
                    and type(thought := parts_in[1]) is reasoning
                    and thought.signature is None
                    and thought.redacted is None
                )
            )
            and type(said := parts_in[0]) is text
            and type(p := parts_in[-1]) is call
            and m.role == "assistant"
            and said.text
            and not said.citations
            and p.kind != "custom"
        ):
            if n == 3 and not thoughts_dropped:  # (reported once: a Gemini turn has one)
                report.drop("reasoning")
                thoughts_dropped = True
            value = raw_inputs(p.arguments) or _raw_input(p.arguments, i, n - 1)
            if said.cache_control is not None:
                marked = True
            blocks: list[wire.InputBlock] = [
                text_block(text=said.text, cache_control=said.cache_control),
                tool_use(
                    id=safe_ids(p.id) or _safe_id(p.id),
                    name=p.name,
                    input=value,  # type: ignore[arg-type]  # (encoded as it is; no cast() call)
                ),
            ]
            if turn is not None and not turn_user:
                if type(turn.content) is str:
                    turn.content = turn_blocks
                turn_blocks.extend(blocks)
                turn_other = True
                continue
            turn = message(role="assistant", content=blocks)
            out.append(turn)
            turn_blocks, turn_user, turn_other, turn_unordered = blocks, False, True, False
            continue
        assistant = m.role == "assistant"
        other = late = results = False  # a block not a result; a result after one; a result
        blocks = []
        append = blocks.append
        for p in parts_in:  # (its position is looked up by the rare paths that need it)
            if type(p) is text:
                if p.text:  # Anthropic rejects empty text blocks
                    if p.citations:
                        report.drop("text.citations")
                    if p.cache_control is not None:
                        marked = True
                    append(text_block(text=p.text, cache_control=p.cache_control))
                    other = True
            elif fast and type(p) is call and assistant and p.kind != "custom":
                # fast path of ``_part_out``: a function call, its input kept encoded
                args = p.arguments
                raw = raw_inputs(args) or _raw_input(args, i, _position(parts_in, p))
                append(
                    tool_use(
                        id=safe_ids(p.id) or _safe_id(p.id),
                        name=p.name,
                        input=raw,  # type: ignore[arg-type]  # (encoded as it is)
                    )
                )
            elif type(p) is reasoning and assistant and p.signature is None and p.redacted is None:
                # reasoning with no Anthropic signature (a Gemini thought signature, once
                # per turn of a resent conversation): dropped as ``_thinking_out`` would
                report.drop("reasoning")
            elif (  # fast path of ``_part_out``: a tool result
                fast
                and type(p) is result
                and not assistant
                and p.kind != "custom"
                and p.call_id not in dropped_calls
            ):
                if p.cache_control is not None:
                    marked = True
                late, results = late or other, True
                parts = p.content
                content: str | list[wire.ToolResultContent] | None
                if (
                    len(parts) == 1
                    and type(only := parts[0]) is text
                    and only.text
                    and (only.cache_control is None)
                ):  # the usual result: one plain text, sent in the short form
                    content = only.text
                else:
                    j = _position(m.content, p)
                    content = _tool_result_content_out(parts, i, j, report)
                append(
                    tool_result(
                        tool_use_id=safe_ids(p.call_id) or _safe_id(p.call_id),
                        content=content,
                        is_error=True if p.is_error else None,
                        cache_control=p.cache_control,
                    )
                )
            elif type(p) is c.ServerToolUse and assistant and p.name == SEARCH:
                blocks.extend(search.replay_out(p))
                other = True
            elif type(p) is c.ServerToolUse and assistant and p.name == hosted_code.CODE:
                blocks.extend(code_exec.replay_out(p))
                other = True
            else:
                role = "assistant" if assistant else "user"
                j = _position(m.content, p)
                block = _part_out(p, role, i, j, report, dropped_calls)
                if block is not None:  # (never a tool_result)
                    marked = marked or getattr(block, "cache_control", None) is not None
                    append(block)
                    other = True
        if not blocks:
            continue
        user = not assistant
        if turn is not None and turn_user is user:
            if type(turn.content) is str:  # it was one plain text: blocks again
                turn.content = turn_blocks
            if user and (late or (turn_other and results)) and not turn_unordered:
                unordered.append(turn)
                turn_unordered = True
            turn_blocks.extend(blocks)
            turn_other = turn_other or other
            continue
        first = blocks[0]
        if len(blocks) == 1 and type(first) is text_block and first.cache_control is None:
            # the short form for a lone plain text block
            turn = message(role="user" if user else "assistant", content=first.text)
            short.append(turn)
        else:
            turn = message(role="user" if user else "assistant", content=blocks)
        out.append(turn)
        turn_blocks, turn_user, turn_other, turn_unordered = blocks, user, other, user and late
        if turn_unordered:
            unordered.append(turn)
    for turn in unordered:
        blocks = cast("list[wire.InputBlock]", turn.content)
        turn.content = [b for b in blocks if type(b) is tool_result] + [
            b for b in blocks if type(b) is not tool_result
        ]
    return out, marked, short


# Call ids as Anthropic takes them (``ids.safe_tool_id``), looked up first in its table
# (``ids.SAFE_IDS``, a ``BoundedCache``): an agent loop resends every id twice per turn,
# and the function call was an eighth of ``_messages_out``.
_SAFE_IDS = ids.SAFE_IDS


def _safe_id(call_id: str) -> str:
    return ids.safe_tool_id(call_id, "toolu_missing")


_RAW_OBJECTS = json_objects.RAW_OBJECTS


def _raw_input(arguments: str, i: int, j: int) -> msgspec.Raw:
    """``arguments`` (of ``messages[i].content[j]``) as a tool_use ``input``, kept
    encoded (``json_objects``)."""
    return _RAW_OBJECTS.get(arguments) or json_objects.remember(
        arguments, _arguments_out(arguments, i, j)
    )


def _position(items: Sequence[object], item: object) -> int:
    """``items.index(item)`` by identity (Structs compare equal by value), for the
    error paths of the usual parts, which are built without counting."""
    return next(k for k, x in enumerate(items) if x is item)


def _part_out(
    p: c.Part, role: str, i: int, j: int, report: TranslationReport, dropped_calls: set[str]
) -> wire.InputBlock | None:
    """One canonical part of ``messages[i]`` as a block (None: dropped), for the parts
    ``_messages_out`` does not build inline (text is always built there). Dispatched on
    ``type(p)`` (see ``_block_path``); ``messages[i].content[j]`` is formatted only
    where it may be needed."""
    if type(p) is c.ToolCall and role == "assistant":
        if p.kind == "custom":
            report.reject(
                _block_path(i, j), "custom (freeform) tool calls cannot be sent to Anthropic"
            )
            dropped_calls.add(p.id)
            return None
        return wire.ToolUseBlock(
            id=ids.safe_tool_id(p.id, "toolu_missing"),
            name=p.name,
            input=_arguments_out(p.arguments, i, j),
        )
    if type(p) is c.ToolResult and role == "user":
        if p.kind == "custom":
            report.reject(
                _block_path(i, j), "custom (freeform) tool results cannot be sent to Anthropic"
            )
            return None
        if p.call_id in dropped_calls:
            return None
        return wire.ToolResultBlock(
            tool_use_id=ids.safe_tool_id(p.call_id, "toolu_missing"),
            content=_tool_result_content_out(p.content, i, j, report),
            is_error=True if p.is_error else None,
            cache_control=p.cache_control,
        )
    if type(p) is c.Refusal:
        return wire.TextBlock(text=p.text) if p.text else None
    if type(p) is c.Reasoning and role == "assistant":
        block = _thinking_out(p)
        if block is None:
            report.drop("reasoning")  # no Anthropic signature: Anthropic would reject it
        return block
    if type(p) is c.Image:
        return _image_out(p, _block_path(i, j), report)
    if type(p) is c.File:
        return _document_out(p, _block_path(i, j))
    report.drop(f"messages.content.{type(p).__struct_config__.tag}")
    return None


def _arguments_out(arguments: str, i: int, j: int) -> dict[str, Any]:
    if not arguments:
        return {}
    try:
        value = _json.decode(arguments)
    except (msgspec.DecodeError, ValueError):
        path = f"{_block_path(i, j)}.arguments"
        raise ProxyError.invalid(f"{path}: tool call arguments are not valid JSON", path) from None
    if not isinstance(value, dict):
        path = f"{_block_path(i, j)}.arguments"
        raise ProxyError.invalid(f"{path}: tool call arguments must be a JSON object", path)
    return value


def _tool_result_content_out(
    parts: list[c.Part], i: int, j: int, report: TranslationReport
) -> str | list[wire.ToolResultContent] | None:
    if len(parts) == 1:  # the usual result: one plain text, sent in the short form
        only = parts[0]
        if type(only) is c.Text and only.text and only.cache_control is None:
            return only.text
    blocks: list[wire.ToolResultContent] = []
    for k, p in enumerate(parts):
        if type(p) is c.Text:
            if p.text:
                blocks.append(wire.TextBlock(text=p.text, cache_control=p.cache_control))
        elif type(p) is c.Refusal:
            if p.text:
                blocks.append(wire.TextBlock(text=p.text))
        elif type(p) is c.Image:
            blocks.append(_image_out(p, f"{_block_path(i, j)}.content[{k}]", report))
        elif type(p) is c.File:
            blocks.append(_document_out(p, f"{_block_path(i, j)}.content[{k}]"))
        else:
            report.drop(f"tool_result.content.{type(p).__struct_config__.tag}")
    if not blocks:
        return None
    first = blocks[0]
    if len(blocks) == 1 and type(first) is wire.TextBlock and first.cache_control is None:
        return first.text
    return blocks


def _data_url(url: str, path: str) -> tuple[str | None, str]:
    """A base64 data URL -> (media type, data); a 400 for any other data URL."""
    parsed = parse_data_url(url)
    if parsed is None:
        raise ProxyError.invalid(f"{path}: only base64 data URLs can be translated", path)
    return parsed


def _image_out(img: c.Image, path: str, report: TranslationReport) -> wire.ImageBlock:
    if img.detail is not None:
        report.drop("image.detail")
    source: wire.ImageSource
    if img.data is None and img.url is not None and not is_data_url(img.url):
        source = wire.UrlSource(url=img.url)
    else:
        if img.data is not None:
            media_type, data = img.media_type, img.data
        elif img.url is not None:
            media_type, data = _data_url(img.url, path)
        else:
            raise ProxyError.invalid(f"{path}: image has neither data nor url", path)
        if not media_type:
            media_type = next((t for magic, t in _IMAGE_MAGIC if data.startswith(magic)), None)
        if media_type not in _IMAGE_TYPES:
            raise ProxyError.invalid(
                f"{path}: image type {media_type!r} is not supported by Anthropic "
                "(image/jpeg, image/png, image/gif, image/webp)",
                path,
            )
        source = wire.Base64Source(media_type=media_type, data=data)
    return wire.ImageBlock(source=source, cache_control=img.cache_control)


def _document_out(f: c.File, path: str) -> wire.DocumentBlock:
    source: wire.DocumentSource
    data, media_type = f.data, f.media_type
    if data is None and f.url is not None and is_data_url(f.url):
        media_type, data = _data_url(f.url, path)
    if data is not None:
        if not media_type and data.startswith("JVBER"):  # base64 of "%PDF"
            media_type = "application/pdf"
        if media_type == "application/pdf":
            source = wire.Base64Source(media_type=media_type, data=data)
        elif media_type is not None and media_type.startswith("text/"):
            try:
                text = base64.b64decode(data, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                raise ProxyError.invalid(
                    f"{path}: text document is not base64 UTF-8", path
                ) from None
            source = wire.TextSource(media_type="text/plain", data=text)
        else:
            raise ProxyError.invalid(
                f"{path}: document type {media_type!r} is not supported by Anthropic "
                "(application/pdf or text)",
                path,
            )
    elif f.text is not None:
        source = wire.TextSource(media_type="text/plain", data=f.text)
    elif f.url is not None:
        source = wire.UrlSource(url=f.url)
    else:
        raise ProxyError.invalid(
            f"{path}: a file_id reference cannot be carried to Anthropic; send the file data",
            path,
        )
    return wire.DocumentBlock(source=source, title=f.filename, cache_control=f.cache_control)


def _thinking_out(p: c.Reasoning) -> wire.ThinkingBlock | wire.RedactedThinkingBlock | None:
    """Only reasoning Anthropic itself signed can be replayed to it."""
    if p.redacted is not None:
        return wire.RedactedThinkingBlock(data=p.redacted)
    if p.signature and not reasoning_carry.is_packed(p.signature):
        return wire.ThinkingBlock(thinking=p.text, signature=p.signature)
    return None


class ToolSet(NamedTuple):
    """A tool set's ``tools`` as Anthropic takes them, encoded (``_TOOL_SETS``): the
    tools before the last as one ``Raw`` (their items, comma-separated: the encoder
    writes the commas between a tuple's items) and the last; only the last for a set
    of one."""

    plain: tuple[msgspec.Raw, ...]
    marked: tuple[msgspec.Raw, ...]  # the last one marked (``cache_breakpoints.place``)

    @property
    def size(self) -> int:
        """About how many bytes it holds."""
        return sum([len(t) for t in self.plain]) + len(self.marked[-1])


# An agent loop resends its tool set with every request: a set of the usual function
# tools is written once, as a whole (made from ``_tools_general``'s tools, so the same
# bytes; it reports nothing for them), and found by content (``tool_schemas.SetLookup``).
_TOOL_SETS: tool_schemas.SetLookup[ToolSet] = tool_schemas.SetLookup()


def _tools_out(
    request: c.Request, report: TranslationReport
) -> ToolSet | list[wire.ToolParam | dict[str, Any]]:
    """The body's ``tools``: a set kept as a whole (``_TOOL_SETS``), or one by one."""
    tools = request.tools
    if not tools or request.hosted_tools or request.web_search or not FAST.on:
        return _tools_general(request, report)
    return _TOOL_SETS.get(tools) or _tools_general(request, report)  # (fast path of it)


def _keep_tool_set(tools: list[c.Tool], made: list[wire.ToolParam | dict[str, Any]]) -> None:
    """Keep ``tools`` (``made`` by ``_tools_general``; ``place`` may have marked the last)
    as a whole, if the set was seen before and is one ``_TOOL_SETS`` keeps. (Not
    through ``exact_json``, whose buffer a small body would shrink.)"""
    if not (tool_schemas.keepable(tools) and _TOOL_SETS.second_sight(tools)):
        return
    params = cast("list[wire.ToolParam]", made)
    last = params[-1]  # (a kept set has no mark of its own)
    plain: tuple[msgspec.Raw, ...] = (_items([_replace(last, cache_control=None)]),)
    if len(params) > 1:
        plain = (_items(params[:-1]), *plain)
    marked = (*plain[:-1], _items([_replace(last, cache_control=MARKER)]))
    made_set = ToolSet(plain=plain, marked=marked)
    _TOOL_SETS.put(tools, made_set, made_set.size)


def _items(values: list[wire.ToolParam]) -> msgspec.Raw:
    """``values`` encoded as the items of a list, without its brackets (a slice: bytes
    of their own at their exact size)."""
    return msgspec.Raw(_encoder.encode(values)[1:-1])


def _tools_general(
    request: c.Request, report: TranslationReport
) -> list[wire.ToolParam | dict[str, Any]]:
    out: list[wire.ToolParam | dict[str, Any]] = []
    for i, t in enumerate(request.tools):
        if t.kind == "custom":
            report.reject(f"tools[{i}]", "custom (freeform) tools cannot be Anthropic tools")
            continue
        schema: dict[str, Any] | msgspec.Raw | None = (
            t.parameters if t.parameters is not None else _DEFAULT_SCHEMA
        )
        if type(schema) is msgspec.Raw:  # kept encoded (``tool_schemas``)
            schema = tool_schemas.anthropic_form(schema)
        elif "type" not in schema:  # type: ignore[operator]
            schema = {"type": "object", **schema}  # type: ignore[dict-item]
        elif schema["type"] != "object":  # type: ignore[index]
            schema = None
        if schema is None:
            path = f"tools[{i}].parameters"
            raise ProxyError.invalid(f"{path}: Anthropic tool schemas must be of type object", path)
        out.append(
            wire.ToolParam(
                name=t.name,
                description=t.description,
                input_schema=schema,
                cache_control=t.cache_control,
                strict=True if t.strict else None,
            )
        )
    own_search = own_code = False
    for h in request.hosted_tools:
        if h.protocol == "anthropic_messages":
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
        out.append(dict(hosted_code.ANTHROPIC_TOOL))
    return out


def _tool_choice_out(
    request: c.Request,
    tools: ToolSet | list[wire.ToolParam | dict[str, Any]],
    report: TranslationReport,
) -> wire.ToolChoice | None:
    tc = request.tool_choice
    if not tools:
        if tc is not None:
            report.drop("tool_choice")
        return None
    choice: wire.ToolChoice | None = None
    if tc is not None:
        if tc.mode == "tool":
            names = (
                {t.name for t in request.tools}  # (all of them: a kept set drops none)
                if isinstance(tools, ToolSet)
                else {t.name if isinstance(t, wire.ToolParam) else t.get("name") for t in tools}
            )
            if tc.kind == "custom":
                report.reject(
                    "tool_choice", "a custom (freeform) tool cannot be forced on Anthropic"
                )
            elif tc.name not in names:
                report.drop("tool_choice")  # it names a tool that was dropped
            else:
                choice = wire.ToolChoice(type="tool", name=tc.name)
        else:
            choice = wire.ToolChoice(type=_TOOL_CHOICE_OUT[tc.mode])
    if request.parallel_tool_calls is False:
        if choice is None:
            choice = wire.ToolChoice(type="auto")
        if choice.type != "none":
            choice.disable_parallel_tool_use = True
    return choice


def _reasoning_out(
    rc: c.ReasoningConfig | None, report: TranslationReport
) -> tuple[wire.ThinkingConfig | None, wire.Effort | None]:
    if rc is None:
        return None, None
    effort = _EFFORT_OUT.get(rc.effort) if rc.effort else None
    summary = bool(rc.summary and rc.summary != "none")
    if rc.enabled is False or rc.effort in ("none", "minimal"):
        if summary:
            report.drop("reasoning.summary")  # no thinking to summarise
        return wire.ThinkingConfig(type="disabled"), None
    if rc.budget_tokens is not None:
        thinking = wire.ThinkingConfig(type="enabled", budget_tokens=rc.budget_tokens)
    elif effort is not None or rc.enabled:
        thinking = wire.ThinkingConfig(type="adaptive")
    else:
        if summary:
            report.drop("reasoning.summary")  # a summary alone does not turn thinking on
        return None, None
    if summary:
        thinking.display = "summarized"
    return thinking, effort


# Anthropic rejects thinking together with forced tool use (tool_choice any/tool), a
# temperature other than 1, any top_k, and a top_p below 0.95.
_THINKING_MIN_TOP_P = 0.95


def _sampling_with_thinking(
    temperature: float | None, top_p: float | None, top_k: int | None, report: TranslationReport
) -> tuple[float | None, float | None, int | None]:
    """Sampling settings Anthropic allows alongside thinking; each one removed is
    reported. Thinking was kept, so the settings that conflict with it go."""
    if temperature is not None and temperature != 1.0:
        report.drop("temperature")
        temperature = None
    if top_k is not None:
        report.drop("top_k")
        top_k = None
    if top_p is not None and top_p < _THINKING_MIN_TOP_P:
        report.drop("top_p")
        top_p = None
    return temperature, top_p, top_k


def _format_out(rf: c.ResponseFormat | None) -> wire.JsonSchemaFormat | None:
    if rf is None or rf.type == "text":
        return None
    schema = rf.schema if rf.type == "json_schema" and rf.schema is not None else {"type": "object"}
    return wire.JsonSchemaFormat(type="json_schema", schema=schema)
