"""Responses requests, in two halves: the client side (``decode_request``: a client's
body decoded into a ``canonical.Request``), then the upstream side (``encode_request``:
a canonical request encoded as a Responses upstream's body)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, TypeVar

import msgspec
from msgspec import Raw

from ... import canonical as c
from ... import ids, reasoning_carry
from ...checks import settles
from ...codec import OnePassDecoder, UpstreamOptions, absent
from ...errors import ProxyError, TranslationReport
from ...lazy_decoder import LazyDecoder
from .._kit import exact_json, hosted_code, hosted_search, policy, tool_schemas
from .._kit.fast_paths import FAST
from .._kit.hosted_search import SEARCH
from .._kit.media import data_url, is_data_url, parse_data_url
from .._kit.openai_checks import check_at_least, check_effort, check_image_url, check_range
from . import code_run, search
from . import wire as w
from .response import reasoning_in

T = TypeVar("T")

# ============================================== client side: the client's body -> canonical

# ------------------------------------------------------------------ decoders (reused)

_body_keys: LazyDecoder[dict[str, Raw]] = LazyDecoder(dict[str, Raw])
_body: LazyDecoder[w.CreateRequest] = LazyDecoder(w.CreateRequest)
_item_head: LazyDecoder[w.ItemHead] = LazyDecoder(w.ItemHead)
_tool_head: LazyDecoder[w.ToolHead] = LazyDecoder(w.ToolHead)
_raw_object: LazyDecoder[dict[str, Any]] = LazyDecoder(dict[str, Any])
_function_tool: LazyDecoder[w.FunctionTool] = LazyDecoder(w.FunctionTool)
_custom_tool: LazyDecoder[w.CustomTool] = LazyDecoder(w.CustomTool)
# An input item decodes in one pass in the usual cases (see ``_decode_item``); a
# function or custom tool through the tagged union of the two. Decoding the head first
# for every item, to pick its decoder, would parse each item twice.
_any_item: LazyDecoder[w.InputItem] = LazyDecoder(w.InputItem)
_client_tool: LazyDecoder[w.FunctionTool | w.CustomTool] = LazyDecoder(
    w.FunctionTool | w.CustomTool
)
_message_item: LazyDecoder[w.MessageItem] = LazyDecoder(w.MessageItem)
_search_call: LazyDecoder[search.CallItem] = LazyDecoder(search.CallItem)
_code_call: LazyDecoder[code_run.CallItem] = LazyDecoder(code_run.CallItem)
_item_decoders: dict[str, LazyDecoder[Any]] = {
    "message": _message_item,
    "function_call": LazyDecoder(w.FunctionCallItem),
    "function_call_output": LazyDecoder(w.FunctionCallOutputItem),
    "custom_tool_call": LazyDecoder(w.CustomToolCallItem),
    "custom_tool_call_output": LazyDecoder(w.CustomToolCallOutputItem),
    "reasoning": LazyDecoder(w.ReasoningItem),
}

# Top-level fields real clients send that a stateless translation cannot honour. They
# are accepted and reported, never grounds for rejection (Codex sends them all). They
# are the fields w.ClientCreateRequest declares beyond w.CreateRequest's, read in one
# C call.
_DECLARED_DROPPED = tuple(
    name
    for name in w.ClientCreateRequest.__struct_fields__
    if name not in w.CreateRequest.__struct_fields__
)
_DROPPED_FIELDS = frozenset(_DECLARED_DROPPED)
_one_pass = OnePassDecoder(w.ClientCreateRequest, w.CreateRequest.__struct_fields__)
_typed_pass = OnePassDecoder(w.TypedClientCreateRequest, w.CreateRequest.__struct_fields__)
# Fields that point at provider-side state (a stored conversation, a stored prompt):
# dropping them silently would answer a different question.
_STATEFUL_FIELDS = ("conversation", "prompt")
_KNOWN_FIELDS = (
    frozenset(w.CreateRequest.__struct_fields__) | _DROPPED_FIELDS | frozenset(_STATEFUL_FIELDS)
)

# Items produced by provider-hosted tools (or server-side state). They have no
# canonical shape; in replayed history they are dropped and reported.
_HOSTED_ITEMS = frozenset(
    {
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "tool_search_call",
        "tool_search_output",
        "additional_tools",
        "configuration_update",
        "compaction",
        "compaction_trigger",
        "image_generation_call",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "program",
        "program_output",
    }
)

# The Responses API rejects max_output_tokens below 16: from a Responses client that is
# a 400; another client's smaller limit is raised to it and reported (``policy.token_limit``).
MIN_OUTPUT_TOKENS = 16


def _invalid(err: Exception, path: str = "") -> ProxyError:
    """A 400 from a msgspec error, its ``$``-path re-rooted at ``path``."""
    msg = str(err)
    if "`$" in msg:
        if path:
            msg = msg.replace("`$", f"`$.{path}", 1)
    elif path:
        msg = f"{msg} - at `$.{path}`"
    param = None
    start = msg.find("`$")
    if start >= 0:
        param = msg[start + 3 : msg.find("`", start + 1)] or None
    missing = msg.find("required field `")
    if missing >= 0:
        name = msg[missing + 16 : msg.find("`", missing + 16)]
        param = f"{param}.{name}" if param else name
    return ProxyError.invalid(msg, param=param)


def _decode(decoder: LazyDecoder[T], raw: Raw | bytes, path: str) -> T:
    try:
        return decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise _invalid(e, path) from None
    except UnicodeDecodeError as e:  # a Raw slice of the body holding invalid UTF-8
        raise _invalid(ValueError(f"the request body is not valid UTF-8 JSON: {e}"), path) from None


def _decode_body(body: bytes, report: TranslationReport) -> w.CreateRequest:
    """The body, in one parse when it holds only known fields and the declared dropped
    ones (``w.ClientCreateRequest``); otherwise its keys are parsed first: dropped
    fields are reported in body order, stateful ones rejected, before the body itself
    is validated."""
    if FAST.on:  # fast path of the parses below
        one = _typed_pass.decode(body, report) or _one_pass.decode(body, report)
        if one is not None:
            return one
    try:
        keys = _body_keys.decode(body)
    except msgspec.ValidationError:
        raise ProxyError.invalid("the request body must be a JSON object") from None
    except msgspec.DecodeError as e:
        raise ProxyError.invalid(f"the request body is not valid JSON: {e}") from None
    for key in keys:
        if key not in _KNOWN_FIELDS or key in _DROPPED_FIELDS:
            report.drop(key)
    for key in _STATEFUL_FIELDS:
        if key in keys:
            report.reject(key, "it refers to state stored by the provider; this proxy is stateless")
    return _decode(_body, body, "")


# The fields Codex's turn leaves out, handled only when one is there.
RARE_FIELDS = absent(
    "top_p",
    "user",
    "safety_identifier",
    "metadata",
    "service_tier",
    "previous_response_id",
    "background",
    "top_logprobs",
)


# Sets of tool declarations by their bytes: an agent loop resends the same set with
# every request (``tool_schemas``).
_TOOLS_IN = tool_schemas.ToolLookup()


def decode_request(body: bytes, report: TranslationReport) -> c.Request:
    req = _decode_body(body, report)
    # What the Responses API itself rejects with a 400 (never clamped, dropped or
    # passed on changed).
    # (each check called only for a field that is there: this runs on every request)
    if req.temperature is not None:
        check_range("temperature", req.temperature, 0, 2)
    if req.top_p is not None:
        check_range("top_p", req.top_p, 0, 1)
    if req.max_output_tokens is not None and req.max_output_tokens < MIN_OUTPUT_TOKENS:
        check_at_least("max_output_tokens", req.max_output_tokens, MIN_OUTPUT_TOKENS)
    if req.reasoning is not None:
        check_effort(req.reasoning.effort, "reasoning.effort")
    if req.input == []:
        raise ProxyError.invalid(
            "Invalid 'input': empty array. Expected at least one item.", "input"
        )
    if req.store:
        # store: false is what a stateless proxy does anyway; store: true is not honoured.
        report.drop("store")

    system: list[c.Text] = []
    if req.instructions:
        system.append(c.Text(text=req.instructions))
    messages = _input_messages(req.input, system, report)

    hosted: list[c.HostedTool] = []
    tools = _tools_in(req.tools, hosted) if req.tools else []

    response_format = None
    if req.text is not None:
        f = req.text.format
        if f is not None:
            response_format = c.ResponseFormat(
                type=f.type,
                name=f.name,
                schema=f.schema,
                strict=f.strict,
                description=f.description,
            )

    reasoning = None
    if req.reasoning is not None:
        reasoning = c.ReasoningConfig(
            effort=req.reasoning.effort,
            summary=req.reasoning.summary or req.reasoning.generate_summary,
        )

    usual = FAST.on and RARE_FIELDS(req)  # fast path: the rarer fields' code skipped
    # ``safety_identifier`` replaces ``user``: it wins when both are sent.
    if not usual and req.user is not None and req.safety_identifier not in (None, req.user):
        report.drop("user")
    out = c.Request(
        model=req.model,
        messages=messages,
        system=system,
        tools=tools,
        hosted_tools=hosted,
        tool_choice=_tool_choice(req.tool_choice, report),
        parallel_tool_calls=req.parallel_tool_calls,
        max_tokens=req.max_output_tokens,
        temperature=req.temperature,
        stream=bool(req.stream),
        response_format=response_format,
        reasoning=reasoning,
        prompt_cache_key=req.prompt_cache_key,
        implicit_caching=True,
        verbosity=req.text.verbosity if req.text is not None else None,
    )
    if hosted:
        out.web_search = search.search_in(hosted, report)
        out.code_execution = hosted_code.code_in(hosted, report)
    if not usual:
        out.user = req.safety_identifier if req.safety_identifier is not None else req.user
        for name in _SAME_NAMED:
            setattr(out, name, getattr(req, name))
    return out


# The rarer fields that keep their name and value in the canonical request.
_SAME_NAMED = (
    "top_p",
    "metadata",
    "service_tier",
    "previous_response_id",
    "background",
    "top_logprobs",
)

# The hosted tool types of the Responses API (dated variants such as
# ``web_search_preview_2025_03_11`` share the prefix).
HOSTED_TOOL_TYPES = (
    "web_search",
    "file_search",
    "computer_use",
    "code_interpreter",
    "image_generation",
    "mcp",
    "local_shell",
    "shell",
    "apply_patch",
    "tool_search",
    "namespace",
)


def _tools_in(raws: list[Raw], hosted: list[c.HostedTool]) -> list[c.Tool]:
    """The function and custom tools (hosted ones appended to ``hosted``); a set of
    no hosted tool (Codex's: functions and its custom ``apply_patch``) is looked up by
    its bytes (one hash of the whole set: a look-up per tool cost twice as much)."""
    key = b",".join(raws)  # (each a whole JSON value: no two sets give the same key)
    fast = FAST.on
    known = _TOOLS_IN.get(key) if fast else None  # fast path of the loop below
    if known is not None:
        return known
    tools: list[c.Tool] = []
    no_hosted = True
    for i, raw in enumerate(raws):
        tool: w.FunctionTool | w.CustomTool | None
        try:
            tool = _client_tool.decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError):  # ValidationError is a DecodeError
            tool = _careful_tool(raw, i, hosted)
            if tool is None:
                no_hosted = False
                continue
        if type(tool) is w.FunctionTool:
            tools.append(
                c.Tool(
                    name=tool.name,
                    parameters=tool.parameters,
                    description=tool.description,
                    strict=tool.strict,
                )
            )
        else:
            assert type(tool) is w.CustomTool
            tools.append(
                c.Tool(
                    name=tool.name, kind="custom", description=tool.description, format=tool.format
                )
            )
    if no_hosted and fast:
        _TOOLS_IN.put(key, tools)
    return tools


def _careful_tool(
    raw: Raw, i: int, hosted: list[c.HostedTool]
) -> w.FunctionTool | w.CustomTool | None:
    """A tool the union refused: a hosted tool (appended to ``hosted``; None), or the
    400 that names what is wrong with it."""
    path = f"tools[{i}]"
    kind = _decode(_tool_head, raw, path).type
    if kind == "function":
        return _decode(_function_tool, raw, path)
    if kind == "custom":
        return _decode(_custom_tool, raw, path)
    if not kind.startswith(HOSTED_TOOL_TYPES):
        raise ProxyError.invalid(
            f"Invalid value: '{kind}'. Supported values are: 'function', 'custom', "
            + ", ".join(f"'{t}'" for t in HOSTED_TOOL_TYPES),
            param=f"{path}.type",
        )
    hosted.append(
        c.HostedTool(protocol="openai_responses", type=kind, raw=_decode(_raw_object, raw, path))
    )
    return None


def _tool_choice(
    choice: str | w.ToolChoiceParam | None, report: TranslationReport
) -> c.ToolChoice | None:
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice in ("auto", "none", "required"):
            return c.ToolChoice(mode=choice)  # type: ignore[arg-type]
        raise ProxyError.invalid(
            f"tool_choice: expected 'auto', 'none', 'required' or an object, got {choice!r}",
            param="tool_choice",
        )
    if choice.type in ("function", "custom"):
        if not choice.name:
            raise ProxyError.invalid(
                "Object missing required field `name` - at `$.tool_choice`",
                param="tool_choice.name",
            )
        return c.ToolChoice(mode="tool", name=choice.name, kind=choice.type)  # type: ignore[arg-type]
    if choice.type == "allowed_tools":
        # The subset of allowed tools has no canonical shape: keep the mode only.
        report.drop("tool_choice.allowed_tools")
        return c.ToolChoice(mode="required" if choice.mode == "required" else "auto")
    if search.is_search_choice(choice.type):
        return c.ToolChoice(mode="tool", name=SEARCH)
    # Another hosted tool choice ({type: "file_search"} ...): let the model choose.
    report.drop("tool_choice")
    return c.ToolChoice(mode="auto")


# ------------------------------------------------------------------------ input items


def _input_messages(
    input: str | list[Raw] | list[w.InputItem] | None,
    system: list[c.Text],
    report: TranslationReport,
) -> list[c.Message]:
    if input is None:
        return []
    if isinstance(input, str):
        return [c.Message(role="user", content=[c.Text(text=input)])]
    if not input:
        return []
    messages: list[c.Message] = []
    # The open turn (see ``_turn``), kept in locals: consecutive assistant items
    # (message, reasoning, calls) form one turn, consecutive tool outputs one tool turn.
    role: str | None = None
    turn: list[c.Part] = []
    message, call, output = w.MessageItem, w.FunctionCallItem, w.FunctionCallOutputItem
    assistant_text, input_text = w.AssistantText, w.InputText
    tool_call, tool_result, text, new_message = c.ToolCall, c.ToolResult, c.Text, c.Message
    # every call's id, in order (a dict: each once), and every output's
    calls: dict[str, None] = {}
    answered: set[str] = set()
    settled = True  # no media so far (see ``report.settled``)
    fast = FAST.on
    # Items come typed from the one-parse decoder, raw from the general path (decoded
    # one at a time, as the walk reaches them, so errors keep the items' order).
    typed = enumerate(input) if type(input[0]) is not Raw else _decoded_items(input, report)
    for i, item in typed:
        # Dispatched on ``type(item)``: a failed ``isinstance`` against a msgspec Struct
        # class costs ~70 ns (its metaclass takes CPython's slow path), this ~15 ns.
        # (A part that opens a turn is made first, and the turn's list with it.)
        if type(item) is call:
            part: c.Part = tool_call(
                id=item.call_id, name=item.name, arguments=item.arguments, item_id=item.id
            )
            if role != "assistant":
                role, turn = "assistant", [part]
                messages.append(new_message(role="assistant", content=turn))
            else:
                turn.append(part)
            calls[item.call_id] = None
        elif type(item) is output:
            out = item.output
            answered.add(item.call_id)
            if fast and type(out) is str:  # fast path of ``_output``
                got: list[c.Part] = [text(text=out)] if out else []
            else:
                got = _output(out, i)
                if settled:
                    settled = settles(got)
            part = tool_result(call_id=item.call_id, content=got)
            if role != "tool":
                role, turn = "tool", [part]
                messages.append(new_message(role="tool", content=turn))
            else:
                turn.append(part)
        elif type(item) is message:
            if item.role == "user":
                content = item.content
                if fast and len(content) == 1 and type(only := content[0]) is input_text:
                    turn = [text(text=only.text)]  # fast path of ``_parts``: an input_text
                else:
                    _user_parts_only(content, i)
                    turn = _parts(content, i)
                    if settled:
                        settled = settles(turn)
                role = "user"
                messages.append(new_message(role="user", content=turn))
            elif item.role == "assistant":
                content = item.content
                if fast and len(content) == 1 and type(only := content[0]) is assistant_text:
                    said: list[c.Part] = [text(text=only.text)]  # fast path of ``_parts``
                else:
                    said = _parts(content, i)
                    if settled:
                        settled = settles(said)
                if role != "assistant":
                    role, turn = "assistant", said
                    messages.append(new_message(role="assistant", content=turn))
                else:
                    turn.extend(said)
            else:  # system, developer
                system.extend(_system_texts(item.content, i))
        elif type(item) is w.ReasoningItem:
            turn = _turn(messages, "assistant")
            role = "assistant"
            turn.append(_reasoning_in(item))
        elif type(item) is w.CustomToolCallItem:
            turn = _turn(messages, "assistant")
            role = "assistant"
            turn.append(
                c.ToolCall(
                    id=item.call_id,
                    name=item.name,
                    arguments=item.input,
                    kind="custom",
                    item_id=item.id,
                )
            )
            calls[item.call_id] = None
        elif type(item) is w.CustomToolCallOutputItem:
            turn = _turn(messages, "tool")
            role = "tool"
            answered.add(item.call_id)
            answer = _output(item.output, i)
            turn.append(c.ToolResult(call_id=item.call_id, content=answer, kind="custom"))
            if settled:
                settled = settles(answer)
        elif type(item) is search.CallItem:
            turn = _turn(messages, "assistant")
            role = "assistant"
            turn.append(search.replay_in(item))
        elif type(item) is code_run.CallItem:
            turn = _turn(messages, "assistant")
            role = "assistant"
            turn.append(code_run.use_in(item))
        else:
            assert type(item) is w.ItemReference
            report.reject(
                f"input[{i}]", "item_reference needs server-side state; send the item itself"
            )
    # The API rejects a call whose output is not in the input (lossy: the outputs may
    # live in state the client refers to).
    if not report.lossy and not answered.issuperset(calls):
        for call_id in calls:
            if call_id not in answered:
                raise ProxyError.invalid(
                    f"No tool output found for function call {call_id}.", param="input"
                )
    # Every output answers a call: when not lossy the check above leaves only
    # the count to compare.
    report.settled = settled and (
        len(answered) == len(calls) if not report.lossy else calls.keys() >= answered
    )
    return messages


def _decoded_items(
    input: list[Raw] | list[w.InputItem], report: TranslationReport
) -> Iterator[tuple[int, w.InputItem | search.CallItem | code_run.CallItem]]:
    """The raw items decoded, with their place in ``input``; dropped ones left out."""
    for i, raw in enumerate(input):
        item = _decode_item(raw, i, report) if type(raw) is Raw else raw
        if item is not None:
            yield i, item


def _user_parts_only(content: str | list[w.InputContent], i: int) -> None:
    """A user message holds input parts; ``output_text`` and ``refusal`` are the
    assistant's, and the API rejects them here."""
    if isinstance(content, str):
        return
    for j, part in enumerate(content):
        if type(part) is w.InputImage:
            check_image_url(part.image_url, f"input[{i}].content[{j}]")
        elif type(part) is w.AssistantText or type(part) is w.RefusalPart:
            kind = "output_text" if type(part) is w.AssistantText else "refusal"
            raise ProxyError.invalid(
                f"Invalid value: '{kind}'. Supported values are: 'input_text', "
                "'input_image', and 'input_file'.",
                param=f"input[{i}].content[{j}]",
            )


def _decode_item(
    raw: Raw, i: int, report: TranslationReport
) -> w.InputItem | search.CallItem | code_run.CallItem | None:
    """``input[i]``, decoded once in the usual cases: as a message (which decodes with
    or without ``type: "message"``, as the "easy" messages most SDK users send have
    none), or through the tagged union of the typed items (Codex types every item).
    A conversation opens with a message, so the first item is tried as one first;
    later items through the union first. An item both refuse takes the careful path.
    None: the item was dropped."""
    if not FAST.on:
        return _careful_item(raw, i, report)
    item: w.InputItem  # fast path of ``_careful_item``: one parse
    try:
        item = (_any_item if i else _message_item).decode(raw)
        return item
    except (msgspec.DecodeError, UnicodeDecodeError):  # ValidationError is a DecodeError
        pass
    try:
        item = (_message_item if i else _any_item).decode(raw)
        return item
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass
    return _careful_item(raw, i, report)


def _careful_item(
    raw: Raw, i: int, report: TranslationReport
) -> w.InputItem | search.CallItem | code_run.CallItem | None:
    """An item neither decoder took: an item reference, a hosted tool's item (dropped
    and reported: None), an unknown type, or a malformed item, whose 400 names it. The
    head is decoded first to pick the item's decoder (an untyped item is a message)."""
    path = f"input[{i}]"
    head = _decode(_item_head, raw, path)
    kind = head.type
    if kind is None:
        # An "easy" message has no type; an item reference may have only an id.
        kind = "item_reference" if head.role is None and head.id is not None else "message"
    if kind == "item_reference":
        report.reject(path, "item_reference needs server-side state; send the item itself")
        return None
    if kind in _HOSTED_ITEMS:
        report.drop(f"input.{kind}")
        return None
    if kind == "web_search_call":
        return _decode(_search_call, raw, path)
    if kind == "code_interpreter_call":
        return _decode(_code_call, raw, path)
    decoder = _item_decoders.get(kind)
    if decoder is None:
        raise ProxyError.invalid(
            f"{path}.type: unsupported input item type {kind!r}", param=f"{path}.type"
        )
    item: w.InputItem = _decode(decoder, raw, path)
    return item


def _turn(messages: list[c.Message], role: c.Role) -> list[c.Part]:
    """The content of the current turn of ``role``, opening one if needed: consecutive
    assistant items (message, reasoning, calls) form one turn; consecutive tool outputs
    form one tool turn."""
    if messages and messages[-1].role == role:
        return messages[-1].content
    msg = c.Message(role=role, content=[])
    messages.append(msg)
    return msg.content


def _system_texts(content: str | list[w.InputContent], i: int) -> list[c.Text]:
    if isinstance(content, str):
        return [c.Text(text=content)]
    out: list[c.Text] = []
    for j, part in enumerate(content):
        if type(part) is w.InputText or type(part) is w.AssistantText:
            out.append(c.Text(text=part.text))
        else:
            where = f"input[{i}].content[{j}]"
            raise ProxyError.invalid(
                f"{where}: system and developer messages hold text only", param=where
            )
    return out


def _output(output: str | list[w.InputContent], i: int) -> list[c.Part]:
    if isinstance(output, str):
        return [c.Text(text=output)] if output else []
    return _parts(output, i, "output")


def _parts(content: str | list[w.InputContent], i: int, field: str = "content") -> list[c.Part]:
    """The parts of ``input[i].content`` (or ``.output``); their path is formatted only
    for an image or a file, which may need it for an error."""
    if isinstance(content, str):
        return [c.Text(text=content)]
    out: list[c.Part] = []
    for j, part in enumerate(content):
        if type(part) is w.InputText or type(part) is w.AssistantText:
            out.append(c.Text(text=part.text))
        elif type(part) is w.RefusalPart:
            out.append(c.Refusal(text=part.refusal))
        elif type(part) is w.InputImage:
            out.append(_image(part, f"input[{i}].{field}[{j}]"))
        elif type(part) is w.InputFile:
            out.append(_file(part, f"input[{i}].{field}[{j}]"))
        else:
            where = f"input[{i}].{field}[{j}]"
            raise ProxyError.invalid(
                f"{where}: input_audio is not supported by this proxy", param=where
            )
    return out


def _image(part: w.InputImage, where: str) -> c.Image:
    url = part.image_url
    if url:
        if is_data_url(url):
            parsed = parse_data_url(url)
            if parsed is None:
                raise ProxyError.invalid(
                    f"{where}.image_url: only base64 data URLs are supported",
                    param=f"{where}.image_url",
                )
            return c.Image(data=parsed.data, media_type=parsed.media_type, detail=part.detail)
        return c.Image(url=url, detail=part.detail)
    if part.file_id:
        raise ProxyError.invalid(
            f"{where}.file_id: images by file_id are not supported; send image_url",
            param=f"{where}.file_id",
        )
    raise ProxyError.invalid(f"{where}: input_image needs image_url", param=where)


def _file(part: w.InputFile, where: str) -> c.File:
    if part.file_data:
        parsed = parse_data_url(part.file_data)
        if parsed is not None:
            return c.File(data=parsed.data, media_type=parsed.media_type, filename=part.filename)
        return c.File(data=part.file_data, filename=part.filename)
    if part.file_url:
        return c.File(url=part.file_url, filename=part.filename)
    if part.file_id:
        return c.File(file_id=part.file_id, filename=part.filename)
    raise ProxyError.invalid(
        f"{where}: input_file needs file_data, file_url or file_id", param=where
    )


def _reasoning_in(item: w.ReasoningItem) -> c.Reasoning:
    if item.summary:
        text, summary = "\n\n".join(s.text for s in item.summary), True
    elif item.content:
        text, summary = "\n\n".join(t.text for t in item.content), False
    else:
        text, summary = "", True
    return reasoning_in(text, summary, item.encrypted_content, item.id)


# ============================================ upstream side: canonical -> this upstream's body

_OPENAI_SERVICE_TIERS = frozenset({"auto", "default", "flex", "scale", "priority"})


def effort_for_budget(budget_tokens: int) -> str:
    """A thinking budget as a Responses effort: < 2048 low, < 8192 medium, else high."""
    if budget_tokens < 2048:
        return "low"
    if budget_tokens < 8192:
        return "medium"
    return "high"


_EMPTY_SCHEMA = Raw(b"{}")  # ``{}`` as ``tool_schemas.compact`` holds it


def _schema_out(schema: dict[str, Any] | Raw | None) -> dict[str, Any] | Raw:
    """A function tool's schema as sent: none or an empty one (which the API refuses)
    as an object schema of no properties."""
    if type(schema) is Raw:
        return {"type": "object", "properties": {}} if schema == _EMPTY_SCHEMA else schema
    return schema or {"type": "object", "properties": {}}


def encode_request(
    request: c.Request, report: TranslationReport, options: UpstreamOptions
) -> bytes:
    """A canonical request as a Responses upstream body."""
    # Built by the callee, so its objects are let go before the body is copied out
    # (a translation's peak holds the body or them, not both).
    return exact_json.encode_made(w.json_encoder, _to_wire, request, report, options)


def _to_wire(
    request: c.Request, report: TranslationReport, options: UpstreamOptions
) -> w.UpstreamRequest:
    if request.n is not None and request.n > 1:
        report.reject("n", "the Responses API returns a single answer per request")
    top_logprobs = request.top_logprobs
    if request.logprobs:
        report.reject("logprobs", "log probabilities are not translated to the Responses API")
        if top_logprobs is not None:  # lossy mode: never sent without its logprobs
            report.drop("top_logprobs")
            top_logprobs = None
    if request.stop:
        report.drop("stop")
    if request.top_k is not None:
        report.drop("top_k")

    instructions = None
    if request.system:
        for s in request.system:  # (a loop: a generator costs more for one text)
            if s.cache_control:
                report.drop("cache_control")
                break
        instructions = policy.joined_system(request.system)

    tools: list[Any] = []
    for t in request.tools:
        if t.cache_control:
            report.drop("cache_control")
        if t.kind == "custom":
            tools.append(w.CustomTool(name=t.name, description=t.description, format=t.format))
        else:
            tools.append(
                w.FunctionTool(
                    name=t.name,
                    description=t.description,
                    parameters=_schema_out(t.parameters),
                    # The Responses API defaults to strict schemas, which most schemas
                    # written for other protocols do not satisfy: say it explicitly.
                    strict=bool(t.strict),
                )
            )
    own_search: str | None = None  # the type of the client's own search tool
    own_code = False
    for h in request.hosted_tools:
        if h.protocol == "openai_responses":
            tools.append(h.raw)
            if hosted_search.is_search_tool(h):
                own_search = h.type
            own_code = own_code or hosted_code.is_code_tool(h)
        elif not hosted_search.is_search_tool(h) and not (
            request.code_execution and hosted_code.is_code_tool(h)
        ):
            report.drop(f"tools.{h.type}")  # (a search, a sandbox: written from canonical)
    if request.web_search is not None and own_search is None:
        tools.append(search.tool_out(request.web_search, report))
    if request.code_execution is not None and not own_code:
        tools.append(dict(hosted_code.RESPONSES_TOOL))

    tool_choice: Any = None
    parallel: bool | None = None
    tc = request.tool_choice
    if tools:
        parallel = request.parallel_tool_calls
        if tc is not None:
            if tc.mode == "tool" and tc.name == SEARCH and request.web_search is not None:
                tool_choice = {"type": own_search or SEARCH}  # (the tool's own type)
            elif tc.mode == "tool" and tc.name not in {t.name for t in request.tools}:
                report.drop("tool_choice")  # it names a tool that was dropped (a hosted one)
            elif tc.mode == "tool" and tc.name:
                tool_choice = w.NamedToolChoice(type=tc.kind, name=tc.name)
            elif tc.mode != "tool":
                tool_choice = tc.mode
    elif tc is not None and tc.mode not in ("auto", "none"):
        report.drop("tool_choice")  # nothing to require or name without tools

    text = None
    rf = request.response_format
    if rf is not None and rf.type == "json_schema":
        text = w.TextConfig(
            format=w.TextFormat(
                type="json_schema",
                name=rf.name or "response",
                schema=rf.schema or {},
                strict=rf.strict,
                description=rf.description,
            )
        )
    elif rf is not None and rf.type == "json_object":
        text = w.TextConfig(format=w.TextFormat(type="json_object"))
    if request.verbosity is not None:
        text = text or w.TextConfig()
        text.verbosity = request.verbosity

    reasoning, include = _reasoning_param(request.reasoning, report)
    if request.web_search is not None and own_search is None:
        # The pages a search found are listed only when asked for: without them an
        # Anthropic client's search result (and a Gemini one's grounding) would be empty.
        include = [*(include or ()), "web_search_call.action.sources"]
    if request.code_execution is not None and not own_code:
        include = [*(include or ()), hosted_code.RESPONSES_INCLUDE]

    max_tokens = request.max_tokens
    if max_tokens is not None and max_tokens < MIN_OUTPUT_TOKENS:
        max_tokens = policy.token_limit(max_tokens, MIN_OUTPUT_TOKENS, report, "the Responses API")

    service_tier = request.service_tier
    if service_tier is not None and service_tier not in _OPENAI_SERVICE_TIERS:
        report.drop("service_tier")
        service_tier = None

    body = w.UpstreamRequest(
        model=request.model,
        input=_input_items(request.messages, report),
        store=False,
        instructions=instructions,
        tools=tools or None,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        max_output_tokens=max_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        stream=True if request.stream else None,
        text=text,
        reasoning=reasoning,
        include=include,
        prompt_cache_key=request.prompt_cache_key,
    )
    # Set apart: a call with 16 keywords or more is compiled into one taking a dict,
    # which costs the Struct half a microsecond more (see bench/notes-fixed-cost.md).
    if request.user is not None:
        body.safety_identifier = ids.openai_user_id(request.user)
    body.metadata = request.metadata
    body.service_tier = service_tier
    body.previous_response_id = request.previous_response_id
    body.background = request.background
    body.top_logprobs = top_logprobs
    return body


def _reasoning_param(
    rc: c.ReasoningConfig | None, report: TranslationReport
) -> tuple[w.ReasoningParam | None, list[str] | None]:
    """``reasoning`` and ``include`` for a canonical reasoning config.

    - An effort, or a thinking budget (as its effort bucket), is sent as
      ``reasoning.effort``, with the encrypted reasoning included unless it is ``none``.
      Thinking asked for explicitly (Anthropic ``enabled``) also asks for a summary:
      Responses shows reasoning text only as one.
    - Thinking switched off (Anthropic ``disabled``) sends no reasoning and is reported
      as ``reasoning``: older reasoning models reject effort ``none``.
    - Thinking on with neither effort nor budget (Anthropic ``adaptive``) means "the
      model decides": no reasoning and no ``include`` (models without reasoning reject
      ``reasoning.summary``); a summary asked for with it is reported.
    """
    if rc is None:
        return None, None
    effort = rc.effort
    if effort is None and rc.budget_tokens is not None:
        effort = effort_for_budget(rc.budget_tokens)
    if rc.enabled is False:
        report.drop("reasoning")
        return None, None
    if effort is None and rc.enabled:
        if rc.summary is not None:
            report.drop("reasoning.summary")
        return None, None
    if effort is None and rc.summary is None:
        return None, None
    summary = rc.summary or ("auto" if rc.enabled else None)
    include = ["reasoning.encrypted_content"] if effort != "none" else None
    return w.ReasoningParam(effort=effort, summary=summary), include


def _input_items(messages: list[c.Message], report: TranslationReport) -> list[Any]:
    """Canonical turns as input items: a turn's text, refusal and media parts gather in
    message items, its calls, results and reasoning become items of their own. Parts
    are dispatched on ``type(p)``: a failed ``isinstance`` against a msgspec Struct
    class costs ~70 ns (its metaclass takes CPython's slow path), this ~15 ns. The
    usual turns (an assistant's plain texts and function calls, a tool turn of results
    of one text) are built inline, as an agent loop resends them all on every turn: a
    turn with any other part is undone and goes to ``_message_items``, as do user
    turns."""
    items: list[Any] = []
    text, call, result = c.Text, c.ToolCall, c.ToolResult
    call_item, output_item = w.FunctionCallItem, w.FunctionCallOutputItem
    message_item, assistant_text, reasoning = w.MessageItem, w.AssistantText, c.Reasoning
    fast = FAST.on
    for m in messages:
        role = m.role
        start = len(items)
        if not fast:
            pass
        elif role == "tool":  # fast path of ``_message_items``: results of one text each
            for p in m.content:
                if (
                    type(p) is result
                    and p.kind == "function"
                    and not p.cache_control
                    and not p.is_error
                    and len(p.content) == 1
                    and type(only := p.content[0]) is text
                ):
                    items.append(
                        output_item(call_id=p.call_id, output=only.text, status="completed")
                    )
                else:
                    break
            else:
                continue
            del items[start:]  # (the general path redoes them)
        elif role == "assistant":  # (fast path, likewise): plain texts, function calls
            said: list[Any] | None = None  # the texts since the last item (made by the first)
            for p in m.content:
                if type(p) is call and p.kind == "function":
                    if said is not None:
                        items.append(message_item(role="assistant", content=said))
                        said = None
                    fid = p.item_id if p.item_id and p.item_id.startswith("fc_") else None
                    items.append(
                        call_item(call_id=p.id, name=p.name, arguments=p.arguments or "{}", id=fid)
                    )
                elif type(p) is text and not p.cache_control and not p.citations:
                    if said is None:
                        said = [assistant_text(text=p.text)]
                    else:
                        said.append(assistant_text(text=p.text))
                elif type(p) is reasoning:  # (Gemini's turns carry one each)
                    if said is not None:
                        items.append(message_item(role="assistant", content=said))
                        said = None
                    item = _reasoning_out(p, report)
                    if item is not None:
                        items.append(item)
                else:
                    break  # (what was reported here, the general path reports again: no-op)
            else:
                if said is not None:
                    items.append(message_item(role="assistant", content=said))
                continue
            del items[start:]  # (the general path redoes them)
        _message_items(m, items, report)
    return items


def _message_items(m: c.Message, items: list[Any], report: TranslationReport) -> None:
    """Any turn's items onto ``items`` (the general path of ``_input_items``)."""
    if m.role == "system":  # a mid-conversation instruction: a system message, in place
        said: list[w.InputContent] = [
            w.InputText(text=p.text) for p in m.content if type(p) is c.Text and p.text
        ]
        if any(type(p) is c.Text and p.cache_control for p in m.content):
            report.drop("cache_control")
        if said:
            items.append(w.MessageItem(role="system", content=said))
        return
    assistant = m.role == "assistant"
    text, call, result = c.Text, c.ToolCall, c.ToolResult
    pending: list[Any] = []
    for p in m.content:
        if type(p) is text:
            if p.cache_control:
                report.drop("cache_control")
            if assistant:
                if p.citations:
                    report.drop("assistant.citations")
                pending.append(w.AssistantText(text=p.text))
            else:
                pending.append(w.InputText(text=p.text))
        elif type(p) is call or type(p) is result or type(p) is c.Reasoning:
            if pending:
                items.append(w.MessageItem(role=_role(assistant), content=pending))
                pending = []
            item = _item_out(p, report)
            if item is not None:
                items.append(item)
        elif type(p) is c.Refusal:
            pending.append(w.RefusalPart(refusal=p.text) if assistant else w.InputText(text=p.text))
        elif type(p) is c.Image or type(p) is c.File:
            if p.cache_control:
                report.drop("cache_control")
            if assistant:
                report.drop(f"assistant {p.__struct_config__.tag}")
            else:
                pending.append(_media_part(p))
        else:
            assert type(p) is c.ServerToolUse
            if p.name == SEARCH and assistant and search.own_call(p):
                if pending:
                    items.append(w.MessageItem(role="assistant", content=pending))
                    pending = []
                items.append(search.call_out(p))
            elif p.name == SEARCH and assistant:
                # Another provider's search, as text: its id is not one OpenAI issued.
                pending.append(w.AssistantText(text=hosted_search.as_text(p)))
            elif p.name == hosted_code.CODE and assistant and code_run.own_call(p):
                if pending:
                    items.append(w.MessageItem(role="assistant", content=pending))
                    pending = []
                items.append(code_run.call_out(p))
            elif p.name == hosted_code.CODE and assistant:
                pending.append(w.AssistantText(text=hosted_code.as_text(p)))  # (likewise)
            else:
                report.drop("server_tool_use")
    if pending:
        items.append(w.MessageItem(role=_role(assistant), content=pending))


def _role(assistant: bool) -> Literal["user", "assistant"]:
    return "assistant" if assistant else "user"


def _media_part(p: c.Image | c.File) -> Any:
    if isinstance(p, c.Image):
        url = p.url if p.url else data_url(p.media_type or "image/png", p.data or "")
        return w.InputImage(image_url=url, detail=p.detail or "auto")
    if p.text is not None:
        return w.InputText(text=p.text)
    if p.data is not None:
        media = p.media_type or "application/pdf"
        name = p.filename or ("document.pdf" if media == "application/pdf" else "document")
        return w.InputFile(file_data=data_url(media, p.data), filename=name)
    if p.url is not None:
        return w.InputFile(file_url=p.url, filename=p.filename)
    return w.InputFile(file_id=p.file_id, filename=p.filename)


def _item_out(p: c.Reasoning | c.ToolCall | c.ToolResult, report: TranslationReport) -> Any | None:
    if type(p) is c.ToolCall:
        if p.kind == "custom":
            cid = p.item_id if p.item_id and p.item_id.startswith("ctc_") else None
            return w.CustomToolCallItem(call_id=p.id, name=p.name, input=p.arguments, id=cid)
        fid = p.item_id if p.item_id and p.item_id.startswith("fc_") else None
        return w.FunctionCallItem(call_id=p.id, name=p.name, arguments=p.arguments or "{}", id=fid)
    if type(p) is c.ToolResult:
        if p.cache_control:
            report.drop("cache_control")
        if p.is_error:
            report.drop("tool_result.is_error")  # the error text stays in the output
        output = _tool_output(p.content, report)
        if p.kind == "custom":
            return w.CustomToolCallOutputItem(call_id=p.call_id, output=output)
        # Always "completed", whatever is_error (spec message-placement: a failed tool
        # run is still a finished one; the error text is in the output). The SDK's
        # FunctionCallOutput param allows status; custom_tool_call_output has none.
        return w.FunctionCallOutputItem(call_id=p.call_id, output=output, status="completed")
    assert type(p) is c.Reasoning
    return _reasoning_out(p, report)


def _tool_output(content: list[c.Part], report: TranslationReport) -> str | list[Any]:
    texts: list[str] = []
    for x in content:
        if type(x) is not c.Text:
            break
        texts.append(x.text)
    else:  # text only (the usual tool output): one string
        return "\n".join(texts)
    parts: list[Any] = []
    for x in content:
        if type(x) is c.Text or type(x) is c.Refusal:
            parts.append(w.InputText(text=x.text))
        elif type(x) is c.Image or type(x) is c.File:
            parts.append(_media_part(x))
        else:
            report.drop(f"tool_result {x.__struct_config__.tag}")
    return parts


def _reasoning_out(p: c.Reasoning, report: TranslationReport) -> w.ReasoningItem | None:
    encrypted = p.encrypted_content
    if not encrypted or reasoning_carry.is_packed(encrypted):
        # Other providers' tokens and bare text: OpenAI would reject them.
        report.drop("reasoning")
        return None
    summary = [w.SummaryText(text=p.text)] if p.summary and p.text else []
    return w.ReasoningItem(id=p.item_id, summary=summary, encrypted_content=encrypted)
