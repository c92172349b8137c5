"""OpenAI Responses wire shapes.

Three families, because the three jobs want different strictness:

- Request shapes (``CreateRequest`` and the input items / content parts): decoded
  strictly from clients (msgspec errors name the path) and reused, with
  ``omit_defaults``, to encode the request we send upstream.
- Output shapes (``ResponseObject``, ``Output*`` items, stream events): what we emit to
  Responses clients. Exact field sets, every required key present.
- ``Up*`` shapes: what we read back from a Responses upstream. Lenient: every field
  has a default, unknown fields are ignored, unknown item/part types are skipped by
  the caller.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import Raw, Struct, field


class _Tagged(Struct, tag_field="type", kw_only=True):
    """Base of the shapes tagged on ``type``."""


class _TaggedOmit(Struct, tag_field="type", kw_only=True, omit_defaults=True):
    """Tagged shapes whose unset optional fields are left out when encoding."""


# ============================================================== request: content parts


class InputText(_Tagged, tag="input_text", gc=False):
    text: str


class AssistantText(_Tagged, tag="output_text", gc=False):
    """``output_text`` in replayed assistant history (annotations kept raw, ignored)."""

    text: str
    annotations: list[Any] = field(default_factory=list)


class RefusalPart(_Tagged, tag="refusal", gc=False):
    refusal: str


class InputImage(_TaggedOmit, tag="input_image", gc=False):
    image_url: str | None = None
    file_id: str | None = None
    detail: str | None = None


class InputFile(_TaggedOmit, tag="input_file", gc=False):
    file_data: str | None = None
    file_url: str | None = None
    file_id: str | None = None
    filename: str | None = None


class InputAudio(_TaggedOmit, tag="input_audio", gc=False):
    input_audio: Any = None


InputContent = InputText | AssistantText | RefusalPart | InputImage | InputFile | InputAudio


class SummaryText(_Tagged, tag="summary_text"):
    text: str


class ReasoningText(_Tagged, tag="reasoning_text"):
    text: str


# ================================================================ request: input items


class MessageItem(_TaggedOmit, tag="message", gc=False):
    """A message item; clients may leave ``type`` out (the "easy" input message)."""

    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[InputContent]
    id: str | None = None
    status: str | None = None


class FunctionCallItem(_TaggedOmit, tag="function_call", gc=False):
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    status: str | None = None


class FunctionCallOutputItem(_TaggedOmit, tag="function_call_output", gc=False):
    call_id: str
    output: str | list[InputContent]
    id: str | None = None
    status: str | None = None


class CustomToolCallItem(_TaggedOmit, tag="custom_tool_call", gc=False):
    call_id: str
    name: str
    input: str
    id: str | None = None


class CustomToolCallOutputItem(_TaggedOmit, tag="custom_tool_call_output", gc=False):
    call_id: str
    output: str | list[InputContent]
    id: str | None = None


class ReasoningItem(_TaggedOmit, tag="reasoning", gc=False):
    summary: list[SummaryText]
    id: str | None = None
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None
    status: str | None = None


class ItemReference(_TaggedOmit, tag="item_reference", gc=False):
    id: str


InputItem = (
    MessageItem
    | FunctionCallItem
    | FunctionCallOutputItem
    | CustomToolCallItem
    | CustomToolCallOutputItem
    | ReasoningItem
    | ItemReference
)


class ItemHead(Struct):
    """Just enough of an input item to choose its decoder."""

    type: str | None = None
    role: Any = None
    id: Any = None


# ======================================================================= request: tools


class FunctionTool(_TaggedOmit, tag="function", gc=False):
    name: str
    parameters: dict[str, Any] | Raw | None = None  # (Raw: ``tool_schemas``)
    description: str | None = None
    strict: bool | None = None


class CustomTool(_TaggedOmit, tag="custom", gc=False):
    name: str
    description: str | None = None
    format: dict[str, Any] | None = None


class ToolHead(Struct):
    type: str


class ToolChoiceParam(Struct, kw_only=True, gc=False):
    """Object form of ``tool_choice`` (function / custom / allowed_tools / hosted)."""

    type: str
    name: str | None = None
    mode: str | None = None


class NamedToolChoice(Struct, kw_only=True, gc=False):
    type: str
    name: str


# ======================================================================= request: body


class TextFormat(Struct, kw_only=True, omit_defaults=True):
    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None
    description: str | None = None


class TextConfig(Struct, kw_only=True, omit_defaults=True):
    format: TextFormat | None = None
    verbosity: str | None = None


class ReasoningParam(Struct, kw_only=True, omit_defaults=True):
    effort: str | None = None
    summary: str | None = None
    generate_summary: str | None = None


class CreateRequest(Struct, kw_only=True, gc=False):
    """A client's ``POST /v1/responses`` body (fields we translate; see request.py for
    the ones we accept and drop)."""

    model: str
    input: str | list[Raw] | None = None
    instructions: str | None = None
    tools: list[Raw] | None = None
    tool_choice: str | ToolChoiceParam | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stream: bool | None = None
    text: TextConfig | None = None
    reasoning: ReasoningParam | None = None
    prompt_cache_key: str | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    service_tier: str | None = None
    previous_response_id: str | None = None
    background: bool | None = None
    top_logprobs: int | None = None
    store: bool | None = None


class ClientCreateRequest(CreateRequest, kw_only=True, forbid_unknown_fields=True):
    """``CreateRequest`` as a client sends it (decode only). Any key not declared makes
    the decode fail, so a body that decodes has no unknown or stateful field to report
    and needs no second parse to list its keys. The fields real clients send that a
    stateless translation drops (Codex sends ``include``) are declared, left undecoded
    (``request.py`` drops and reports them), so such bodies decode in one parse too."""

    include: Raw | msgspec.UnsetType = msgspec.UNSET
    truncation: Raw | msgspec.UnsetType = msgspec.UNSET
    client_metadata: Raw | msgspec.UnsetType = msgspec.UNSET
    prompt_cache_retention: Raw | msgspec.UnsetType = msgspec.UNSET
    stream_options: Raw | msgspec.UnsetType = msgspec.UNSET


class TypedClientCreateRequest(ClientCreateRequest, kw_only=True, forbid_unknown_fields=True):
    """``ClientCreateRequest`` with every input item typed (Codex types them all): the
    items decode in the body's one parse instead of one decoder call each. A body with
    an item the tagged union refuses (an "easy" message without ``type``, an unknown
    or malformed item) does not decode and takes the item-by-item path."""

    input: str | list[InputItem] | None = None  # type: ignore[assignment]


class UpstreamRequest(Struct, kw_only=True, omit_defaults=True, gc=False):
    """The body we send to a Responses upstream. ``store`` has no default so it is
    always sent (translation is stateless: ``store: false``)."""

    model: str
    input: list[Any]
    store: bool
    instructions: str | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stream: bool | None = None
    text: TextConfig | None = None
    reasoning: ReasoningParam | None = None
    include: list[str] | None = None
    prompt_cache_key: str | None = None
    metadata: dict[str, str] | None = None
    safety_identifier: str | None = None
    service_tier: str | None = None
    previous_response_id: str | None = None
    background: bool | None = None
    top_logprobs: int | None = None


# ==================================================================== output (to clients)


class UrlCitation(_Tagged, tag="url_citation"):
    url: str
    title: str
    start_index: int
    end_index: int


class OutputText(_Tagged, tag="output_text"):
    text: str
    annotations: list[UrlCitation] = field(default_factory=list)
    logprobs: list[Any] = field(default_factory=list)


class OutputRefusal(_Tagged, tag="refusal"):
    refusal: str


OutputContent = OutputText | OutputRefusal


class OutputMessage(_Tagged, tag="message"):
    id: str
    status: str
    role: str = "assistant"
    content: list[OutputContent] = field(default_factory=list)


class OutputReasoning(_TaggedOmit, tag="reasoning"):
    id: str
    summary: list[SummaryText]
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None


class OutputFunctionCall(_Tagged, tag="function_call"):
    id: str
    call_id: str
    name: str
    arguments: str
    status: str


class OutputCustomToolCall(_Tagged, tag="custom_tool_call"):
    id: str
    call_id: str
    name: str
    input: str


class OutputWebSearchCall(_Tagged, tag="web_search_call"):
    id: str
    status: str
    action: dict[str, Any]


class OutputCodeInterpreterCall(_Tagged, tag="code_interpreter_call"):
    id: str
    status: str
    container_id: str
    code: str | None
    outputs: list[dict[str, Any]] | None


OutputItem = (
    OutputMessage
    | OutputReasoning
    | OutputFunctionCall
    | OutputCustomToolCall
    | OutputWebSearchCall
    | OutputCodeInterpreterCall
)


class InputTokensDetails(Struct):
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class OutputTokensDetails(Struct):
    reasoning_tokens: int = 0


class ResponseUsage(Struct, kw_only=True):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class IncompleteDetails(Struct):
    reason: str


class ResponseErrorObject(Struct):
    code: str
    message: str


class ResponseObject(Struct, kw_only=True):
    """A Response resource: the non-stream body and every stream snapshot."""

    id: str
    object: str = "response"
    created_at: int
    status: str
    error: ResponseErrorObject | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    model: str
    output: list[OutputItem] = field(default_factory=list)
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    reasoning: ReasoningParam | None = None
    temperature: float | None = None
    text: TextConfig
    tool_choice: Any = "auto"
    tools: list[Any] = field(default_factory=list)
    top_p: float | None = None
    usage: ResponseUsage | None = None
    metadata: dict[str, str] = field(default_factory=dict)


# ================================================================ stream events (to clients)


class _Event(Struct, tag_field="type", kw_only=True):
    sequence_number: int


class _LifecycleEvent(_Event):
    response: ResponseObject


class ResponseCreated(_LifecycleEvent, tag="response.created"):
    pass


class ResponseInProgress(_LifecycleEvent, tag="response.in_progress"):
    pass


class ResponseCompleted(_LifecycleEvent, tag="response.completed"):
    pass


class ResponseIncomplete(_LifecycleEvent, tag="response.incomplete"):
    pass


class ResponseFailed(_LifecycleEvent, tag="response.failed"):
    pass


class OutputItemAdded(_Event, tag="response.output_item.added"):
    output_index: int
    item: OutputItem


class OutputItemDone(_Event, tag="response.output_item.done"):
    output_index: int
    item: OutputItem


class ContentPartAdded(_Event, tag="response.content_part.added"):
    item_id: str
    output_index: int
    content_index: int
    part: OutputText | OutputRefusal | ReasoningText


class ContentPartDone(_Event, tag="response.content_part.done"):
    item_id: str
    output_index: int
    content_index: int
    part: OutputText | OutputRefusal | ReasoningText


class OutputTextDelta(_Event, tag="response.output_text.delta"):
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[Any] = field(default_factory=list)


class OutputTextDone(_Event, tag="response.output_text.done"):
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[Any] = field(default_factory=list)


class AnnotationAdded(_Event, tag="response.output_text.annotation.added"):
    item_id: str
    output_index: int
    content_index: int
    annotation_index: int
    annotation: UrlCitation


class RefusalDelta(_Event, tag="response.refusal.delta"):
    item_id: str
    output_index: int
    content_index: int
    delta: str


class RefusalDone(_Event, tag="response.refusal.done"):
    item_id: str
    output_index: int
    content_index: int
    refusal: str


class SummaryPartAdded(_Event, tag="response.reasoning_summary_part.added"):
    item_id: str
    output_index: int
    summary_index: int
    part: SummaryText


class SummaryPartDone(_Event, tag="response.reasoning_summary_part.done"):
    item_id: str
    output_index: int
    summary_index: int
    part: SummaryText


class SummaryTextDelta(_Event, tag="response.reasoning_summary_text.delta"):
    item_id: str
    output_index: int
    summary_index: int
    delta: str


class SummaryTextDone(_Event, tag="response.reasoning_summary_text.done"):
    item_id: str
    output_index: int
    summary_index: int
    text: str


class ReasoningTextDelta(_Event, tag="response.reasoning_text.delta"):
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ReasoningTextDone(_Event, tag="response.reasoning_text.done"):
    item_id: str
    output_index: int
    content_index: int
    text: str


class ArgumentsDelta(_Event, tag="response.function_call_arguments.delta"):
    item_id: str
    output_index: int
    delta: str


class ArgumentsDone(_Event, tag="response.function_call_arguments.done"):
    item_id: str
    output_index: int
    name: str
    arguments: str


class CustomInputDelta(_Event, tag="response.custom_tool_call_input.delta"):
    item_id: str
    output_index: int
    delta: str


class CustomInputDone(_Event, tag="response.custom_tool_call_input.done"):
    item_id: str
    output_index: int
    input: str


class WebSearchInProgress(_Event, tag="response.web_search_call.in_progress"):
    item_id: str
    output_index: int


class WebSearchSearching(_Event, tag="response.web_search_call.searching"):
    item_id: str
    output_index: int


class WebSearchCompleted(_Event, tag="response.web_search_call.completed"):
    item_id: str
    output_index: int


class CodeInProgress(_Event, tag="response.code_interpreter_call.in_progress"):
    item_id: str
    output_index: int


class CodeDelta(_Event, tag="response.code_interpreter_call_code.delta"):
    item_id: str
    output_index: int
    delta: str


class CodeDone(_Event, tag="response.code_interpreter_call_code.done"):
    item_id: str
    output_index: int
    code: str


class CodeInterpreting(_Event, tag="response.code_interpreter_call.interpreting"):
    item_id: str
    output_index: int


class CodeCompleted(_Event, tag="response.code_interpreter_call.completed"):
    item_id: str
    output_index: int


class ErrorEvent(_Event, tag="error"):
    code: str | None
    message: str
    param: str | None = None


StreamEvent = (
    ResponseCreated
    | ResponseInProgress
    | ResponseCompleted
    | ResponseIncomplete
    | ResponseFailed
    | OutputItemAdded
    | OutputItemDone
    | ContentPartAdded
    | ContentPartDone
    | OutputTextDelta
    | OutputTextDone
    | AnnotationAdded
    | RefusalDelta
    | RefusalDone
    | SummaryPartAdded
    | SummaryPartDone
    | SummaryTextDelta
    | SummaryTextDone
    | ReasoningTextDelta
    | ReasoningTextDone
    | ArgumentsDelta
    | ArgumentsDone
    | CustomInputDelta
    | CustomInputDone
    | ErrorEvent
)


# ============================================================ upstream answers (lenient)


class UpAnnotation(Struct):
    type: str = ""
    url: str | None = None
    title: str | None = None
    start_index: int | None = None
    end_index: int | None = None


class UpPart(Struct):
    """Any content / summary part: output_text, refusal, summary_text, reasoning_text."""

    type: str = ""
    text: str = ""
    refusal: str = ""
    annotations: list[UpAnnotation] | None = None


class UpMessage(Struct, tag_field="type", tag="message"):
    id: str | None = None
    status: str | None = None
    content: list[UpPart] = field(default_factory=list)


class UpReasoning(Struct, tag_field="type", tag="reasoning"):
    id: str | None = None
    summary: list[UpPart] | None = None
    content: list[UpPart] | None = None
    encrypted_content: str | None = None


class UpFunctionCall(Struct, tag_field="type", tag="function_call"):
    id: str | None = None
    call_id: str | None = None
    name: str = ""
    arguments: str = ""


class UpCustomToolCall(Struct, tag_field="type", tag="custom_tool_call"):
    id: str | None = None
    call_id: str | None = None
    name: str = ""
    input: str = ""


class UpWebSearchCall(Struct, tag_field="type", tag="web_search_call"):
    id: str = ""
    action: dict[str, Any] | None = None
    status: str | None = None


class UpCodeInterpreterCall(Struct, tag_field="type", tag="code_interpreter_call"):
    id: str = ""
    code: str | None = None
    outputs: list[dict[str, Any]] | None = None
    status: str | None = None
    container_id: str | None = None


UpItem = (
    UpMessage
    | UpReasoning
    | UpFunctionCall
    | UpCustomToolCall
    | UpWebSearchCall
    | UpCodeInterpreterCall
)
UP_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "custom_tool_call",
        "web_search_call",
        "code_interpreter_call",
    }
)


class UpTypeHead(Struct):
    type: str | None = None


class UpInputDetails(Struct):
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None


class UpOutputDetails(Struct):
    reasoning_tokens: int | None = None


class UpUsage(Struct):
    input_tokens: int = 0
    output_tokens: int = 0
    input_tokens_details: UpInputDetails | None = None
    output_tokens_details: UpOutputDetails | None = None


class UpIncomplete(Struct):
    reason: str | None = None


class UpError(Struct):
    code: str | int | None = None
    message: str | None = None
    type: str | None = None


class UpResponse(Struct):
    id: str = ""
    object: str = "response"
    model: str = ""
    created_at: float = 0
    status: str | None = None
    incomplete_details: UpIncomplete | None = None
    error: UpError | None = None
    output: list[Raw] | None = None
    usage: UpUsage | None = None


class UpResponseTyped(UpResponse):
    """``UpResponse`` with its output items decoded in the same pass: the usual answer,
    whose items are all of types we carry. One unknown item type makes the decode fail,
    and ``UpResponse`` then takes the items one by one."""

    output: list[UpItem] | None = None  # type: ignore[assignment]


class UpEvent(Struct):
    """The envelope of any upstream stream event. Nested objects we only need on a few
    events (``response``, ``item``) stay raw until a handler asks for them."""

    type: str = ""
    sequence_number: int | None = None
    response: Raw = Raw()
    item: Raw = Raw()
    output_index: int | None = None
    item_id: str | None = None
    content_index: int | None = None
    summary_index: int | None = None
    part: UpPart | None = None
    delta: str | None = None
    text: str | None = None
    arguments: str | None = None
    input: str | None = None
    annotation: UpAnnotation | None = None
    # ``error`` events, flat ({code, message, param}) or nested ({error: {...}})
    code: str | int | None = None
    message: str | None = None
    error: UpError | None = None


# ============================================================================ codecs

json_encoder = msgspec.json.Encoder()
