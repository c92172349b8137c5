"""msgspec wire types of OpenAI Chat Completions.

Three families:
- request types, used both to decode a client request (lenient where real clients are)
  and to encode the upstream request (``omit_defaults``; ``UNSET`` where a key must be
  written only when set, e.g. ``type`` on tool calls, ``content: null`` on assistant
  turns);
- upstream answer types (``*In``): everything optional, unknown keys ignored;
- client answer types (``*Out``): exactly the keys the API writes.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

# =========================================================================== request


class TextPart(msgspec.Struct, tag="text", kw_only=True, omit_defaults=True, gc=False):
    text: str
    cache_control: dict[str, Any] | None = None  # OpenRouter-style clients send it


class ImageURL(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    url: str
    detail: str | None = None


class ImagePart(msgspec.Struct, tag="image_url", kw_only=True, omit_defaults=True, gc=False):
    image_url: ImageURL
    cache_control: dict[str, Any] | None = None


class InputAudioPart(msgspec.Struct, tag="input_audio", kw_only=True, omit_defaults=True, gc=False):
    input_audio: Any = None  # decoded only to be rejected with its path


class FileRef(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None


class FilePart(msgspec.Struct, tag="file", kw_only=True, omit_defaults=True, gc=False):
    file: FileRef
    cache_control: dict[str, Any] | None = None


class RefusalPart(msgspec.Struct, tag="refusal", kw_only=True, omit_defaults=True, gc=False):
    refusal: str


UserPart = TextPart | ImagePart | InputAudioPart | FilePart
AssistantPart = TextPart | RefusalPart
ToolPart = TextPart | ImagePart | FilePart


class FunctionCall(msgspec.Struct, kw_only=True, gc=False):
    name: str
    arguments: str = ""


class CustomCall(msgspec.Struct, kw_only=True, gc=False):
    name: str
    input: str = ""


class ToolCall(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    id: str
    type: str | UnsetType = UNSET  # absent: "function"
    function: FunctionCall | None = None
    custom: CustomCall | None = None


class SystemMessage(
    msgspec.Struct, tag="system", tag_field="role", kw_only=True, omit_defaults=True, gc=False
):
    content: str | list[TextPart]
    name: str | None = None


class DeveloperMessage(
    msgspec.Struct, tag="developer", tag_field="role", kw_only=True, omit_defaults=True, gc=False
):
    content: str | list[TextPart]
    name: str | None = None


class UserMessage(
    msgspec.Struct, tag="user", tag_field="role", kw_only=True, omit_defaults=True, gc=False
):
    content: str | list[UserPart]
    name: str | None = None


class AssistantMessage(
    msgspec.Struct, tag="assistant", tag_field="role", kw_only=True, omit_defaults=True, gc=False
):
    content: str | list[AssistantPart] | UnsetType | None = UNSET
    refusal: str | None = None
    tool_calls: list[ToolCall] | None = None
    reasoning_content: str | None = None  # DeepSeek / vLLM / Kimi extension
    reasoning: Any = None  # OpenRouter / newer vLLM extension (a string)
    function_call: Any = None  # legacy: rejected
    audio: Any = None
    name: str | None = None


class ToolMessage(
    msgspec.Struct, tag="tool", tag_field="role", kw_only=True, omit_defaults=True, gc=False
):
    tool_call_id: str
    content: str | list[ToolPart]


class FunctionMessage(
    msgspec.Struct, tag="function", tag_field="role", kw_only=True, omit_defaults=True, gc=False
):
    content: Any = None  # legacy: rejected
    name: Any = None


Message = (
    SystemMessage
    | DeveloperMessage
    | UserMessage
    | AssistantMessage
    | ToolMessage
    | FunctionMessage
)


class FunctionDef(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | msgspec.Raw | None = None  # (Raw: ``tool_schemas``)
    strict: bool | None = None


class CustomDef(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    name: str
    description: str | None = None
    format: dict[str, Any] | None = None


class ToolDef(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    type: str | UnsetType = UNSET  # absent: "function"
    function: FunctionDef | None = None
    custom: CustomDef | None = None


class ClientFunctionDef(FunctionDef, kw_only=True):
    """``FunctionDef`` as ``request.py`` first reads a client's: its schema left
    encoded, to be held as ``tool_schemas`` keeps it."""

    parameters: msgspec.Raw | UnsetType = UNSET  # type: ignore[assignment]


class ClientToolDef(ToolDef, kw_only=True):
    function: ClientFunctionDef | None = None


class NamedRef(msgspec.Struct, kw_only=True, gc=False):
    name: str


class AllowedTools(msgspec.Struct, kw_only=True, gc=False):
    mode: str = "auto"
    tools: list[Any] = msgspec.field(default_factory=list)


class ToolChoiceObject(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    type: str
    function: NamedRef | None = None
    custom: NamedRef | None = None
    allowed_tools: AllowedTools | None = None


class JSONSchemaFormat(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None
    description: str | None = None


class ResponseFormat(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    type: str
    json_schema: JSONSchemaFormat | None = None


class ChatRequest(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    model: str
    messages: list[Message]
    tools: list[ToolDef] | None = None
    tool_choice: str | ToolChoiceObject | None = None
    parallel_tool_calls: bool | None = None
    functions: list[FunctionDef] | None = None  # legacy
    function_call: str | NamedRef | None = None  # legacy
    max_completion_tokens: int | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: str | list[str] | None = None
    n: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    response_format: ResponseFormat | None = None
    reasoning_effort: str | None = None
    user: str | None = None
    safety_identifier: str | None = None
    metadata: dict[str, str] | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    verbosity: str | None = None
    modalities: list[str] | None = None  # ["audio"]: rejected toward other protocols
    audio: Any = None  # audio output parameters: likewise
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None
    # OpenAI's search models' search (a client's: the canonical ``web_search``)
    web_search_options: Any = None


REQUEST_FIELDS: frozenset[str] = frozenset(ChatRequest.__struct_fields__)


class ClientChatRequest(ChatRequest, kw_only=True, forbid_unknown_fields=True):
    """``ChatRequest`` as a client sends it (decode only). Any key not declared makes
    the decode fail, so a body that decodes has no unknown field to report and needs no
    second parse to list its keys. The OpenAI parameters with no cross-protocol meaning
    are declared, left undecoded (``request.py`` drops and reports them), so bodies
    carrying them decode in one parse too."""

    frequency_penalty: msgspec.Raw | UnsetType = UNSET
    presence_penalty: msgspec.Raw | UnsetType = UNSET
    logit_bias: msgspec.Raw | UnsetType = UNSET
    seed: msgspec.Raw | UnsetType = UNSET
    prediction: msgspec.Raw | UnsetType = UNSET
    store: msgspec.Raw | UnsetType = UNSET
    # Left encoded: ``request.py`` looks a resent set of function tools up by its bytes
    # (empty when the body has no ``tools``).
    tools: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]


# ============================================================ upstream answer (lenient)
# ``gc=False``: decoded JSON cannot form a reference cycle, so the cycle collector need
# not track these (each answer allocates a dozen of them).


class PromptTokensDetails(msgspec.Struct, kw_only=True, gc=False):
    cached_tokens: int | None = 0
    # Prompt tokens written to cache; written to clients only when there were some.
    cache_write_tokens: int | UnsetType | None = UNSET


class CompletionTokensDetails(msgspec.Struct, kw_only=True, gc=False):
    reasoning_tokens: int | None = 0


class Usage(msgspec.Struct, kw_only=True, gc=False):
    """Both directions: decoded leniently, written with every key."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    prompt_tokens_details: PromptTokensDetails | None = None
    completion_tokens_details: CompletionTokensDetails | None = None


class URLCitationIn(msgspec.Struct, kw_only=True, gc=False):
    url: str = ""
    title: str | None = None
    start_index: int | None = None
    end_index: int | None = None


class AnnotationIn(msgspec.Struct, kw_only=True, gc=False):
    type: str = ""
    url_citation: URLCitationIn | None = None


class FunctionIn(msgspec.Struct, kw_only=True, gc=False):
    name: str | None = None
    arguments: Any = None  # a JSON string; a few servers send an object


class CustomIn(msgspec.Struct, kw_only=True, gc=False):
    name: str | None = None
    input: str | None = None


class ToolCallIn(msgspec.Struct, kw_only=True, gc=False):
    id: str | None = None
    type: str | None = None
    function: FunctionIn | None = None
    custom: CustomIn | None = None


class MessageIn(msgspec.Struct, kw_only=True, gc=False):
    role: str | None = None
    content: str | list[Any] | None = None
    refusal: str | None = None
    reasoning_content: str | None = None
    reasoning: Any = None
    tool_calls: list[ToolCallIn] | None = None
    annotations: list[AnnotationIn] | None = None
    function_call: FunctionIn | None = None
    audio: Any = None


class ChoiceIn(msgspec.Struct, kw_only=True, gc=False):
    index: int = 0
    message: MessageIn | None = None
    finish_reason: str | None = None


class CompletionIn(msgspec.Struct, kw_only=True, gc=False):
    id: str | None = None
    created: int | float | None = None
    model: str | None = None
    choices: list[ChoiceIn] | None = None
    usage: Usage | None = None


# ---- stream chunks
# ``gc=False``: one chunk is decoded per upstream SSE event, and decoded JSON cannot form
# a reference cycle, so the cycle collector need not track them (~3 % per chunk).


class DeltaToolCallIn(msgspec.Struct, kw_only=True, gc=False):
    index: int | None = None
    id: str | None = None
    type: str | None = None
    function: FunctionIn | None = None
    custom: CustomIn | None = None


class DeltaIn(msgspec.Struct, kw_only=True, gc=False):
    role: str | None = None
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = None
    reasoning: Any = None
    tool_calls: list[DeltaToolCallIn] | None = None


class LogprobsIn(msgspec.Struct, kw_only=True, gc=False):
    content: list[msgspec.Raw] | None = None
    refusal: list[msgspec.Raw] | None = None


class ChunkChoiceIn(msgspec.Struct, kw_only=True, gc=False):
    index: int = 0
    delta: DeltaIn | None = None
    finish_reason: str | None = None
    logprobs: LogprobsIn | None = None


class ErrorIn(msgspec.Struct, kw_only=True):
    message: Any = None
    type: Any = None
    code: Any = None
    param: Any = None


class ChunkIn(msgspec.Struct, kw_only=True, gc=False):
    id: str | None = None
    object: str | None = None
    created: int | float | None = None
    model: str | None = None
    choices: list[ChunkChoiceIn] | None = None
    usage: Usage | None = None
    error: ErrorIn | None = None


# ========================================================================= client answer


class FunctionOut(msgspec.Struct, kw_only=True):
    name: str
    arguments: str


class CustomOut(msgspec.Struct, kw_only=True):
    name: str
    input: str


class FunctionToolCallOut(msgspec.Struct, tag="function", tag_field="type", kw_only=True):
    id: str
    function: FunctionOut


class CustomToolCallOut(msgspec.Struct, tag="custom", tag_field="type", kw_only=True):
    id: str
    custom: CustomOut


ToolCallOut = FunctionToolCallOut | CustomToolCallOut


class URLCitationOut(msgspec.Struct, kw_only=True):
    url: str
    title: str
    start_index: int
    end_index: int


class AnnotationOut(msgspec.Struct, tag="url_citation", tag_field="type", kw_only=True):
    url_citation: URLCitationOut


class MessageOut(msgspec.Struct, kw_only=True):
    role: str = "assistant"
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCallOut] | UnsetType = UNSET
    function_call: FunctionOut | UnsetType = UNSET  # legacy ``functions`` clients
    annotations: list[AnnotationOut] | UnsetType = UNSET
    reasoning_content: str | UnsetType = UNSET


class ChoiceOut(msgspec.Struct, kw_only=True):
    index: int = 0
    message: MessageOut
    logprobs: None = None
    finish_reason: str


class CompletionOut(msgspec.Struct, kw_only=True):
    id: str
    object: str = "chat.completion"
    created: int
    model: str
    choices: list[ChoiceOut]
    usage: Usage


# ---- stream deltas (the chunk envelope is assembled as bytes by the encoder)


class FunctionDeltaOut(msgspec.Struct, kw_only=True):
    name: str | UnsetType = UNSET
    arguments: str


class CustomDeltaOut(msgspec.Struct, kw_only=True):
    name: str | UnsetType = UNSET
    input: str


class ToolCallDeltaOut(msgspec.Struct, kw_only=True):
    index: int
    id: str | UnsetType = UNSET
    type: str | UnsetType = UNSET
    function: FunctionDeltaOut | UnsetType = UNSET
    custom: CustomDeltaOut | UnsetType = UNSET


class DeltaOut(msgspec.Struct, kw_only=True):
    role: str | UnsetType = UNSET
    content: str | UnsetType = UNSET
    refusal: str | UnsetType = UNSET
    reasoning_content: str | UnsetType = UNSET
    tool_calls: list[ToolCallDeltaOut] | UnsetType = UNSET
    function_call: FunctionDeltaOut | UnsetType = UNSET  # legacy ``functions`` clients
    annotations: list[AnnotationOut] | UnsetType = UNSET
