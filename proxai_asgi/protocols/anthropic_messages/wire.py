"""Anthropic Messages wire shapes as msgspec Structs.

One definition per shape, used in both directions: the client request we decode is the
upstream request we encode, the upstream response we decode is the client response we
encode, and the same stream event structs are decoded from upstream SSE and encoded
to client SSE. Content blocks, sources, deltas and stream events are tagged unions on
``type``.

Encoding rules the structs encode by construction:
- request blocks omit unset optional fields (``omit_defaults``), so nothing the API
  would reject as ``null`` is sent upstream;
- fields a client needs to see even when empty are always emitted: ``text`` of a text
  block, ``thinking``/``signature`` of a thinking block, ``input`` of a tool_use block,
  every ``Message`` field, ``stop_reason``/``stop_sequence`` of ``message_delta``.

Upstream decoding is lenient (unknown fields are ignored by msgspec); unknown *tags*
(a new block or event type) make a union fail, and the decoders in ``response.py`` and
``stream.py`` fall back to ``TypeOnly`` to skip them.

Citations, sources, blocks and the message are ``gc=False`` (inherited by subclasses):
they hold JSON values only, so they cannot form a reference cycle and the cycle
collector need not track them; every request and answer allocates many of them.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

# ------------------------------------------------------------------ citations


class Citation(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """Any citation location; which fields are set depends on ``type``
    (web_search_result_location, char_location, page_location, ...)."""

    type: str
    cited_text: str | None = None
    url: str | None = None
    title: str | None = None
    encrypted_index: str | None = None
    document_index: int | None = None
    document_title: str | None = None
    start_char_index: int | None = None
    end_char_index: int | None = None
    start_page_number: int | None = None
    end_page_number: int | None = None
    start_block_index: int | None = None
    end_block_index: int | None = None


# -------------------------------------------------------------------- sources


class _Source(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True, gc=False):
    pass


class Base64Source(_Source, tag="base64"):
    media_type: str
    data: str


class UrlSource(_Source, tag="url"):
    url: str


class FileSource(_Source, tag="file"):
    file_id: str


class TextSource(_Source, tag="text"):
    media_type: str  # "text/plain", required by the API
    data: str


class ContentSource(_Source, tag="content"):
    content: str | list[TextBlock | ImageBlock]


ImageSource = Base64Source | UrlSource | FileSource
DocumentSource = Base64Source | TextSource | UrlSource | FileSource | ContentSource


# ----------------------------------------------------------------- blocks


class _Block(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True, gc=False):
    pass


class TextBlock(_Block, tag="text"):
    text: str
    citations: list[Citation] | None = None
    cache_control: dict[str, Any] | None = None


class ImageBlock(_Block, tag="image"):
    source: ImageSource
    cache_control: dict[str, Any] | None = None


class DocumentBlock(_Block, tag="document"):
    source: DocumentSource
    title: str | None = None
    context: str | None = None
    citations: dict[str, Any] | None = None
    cache_control: dict[str, Any] | None = None


class ThinkingBlock(_Block, tag="thinking", omit_defaults=False):
    thinking: str = ""
    signature: str = ""


class RedactedThinkingBlock(_Block, tag="redacted_thinking", omit_defaults=False):
    data: str = ""


class ToolUseBlock(_Block, tag="tool_use"):
    id: str
    name: str
    # A decoded object; the request encoder puts the object's encoding there instead
    # (a ``msgspec.Raw``, written as it is), never read back.
    input: dict[str, Any]
    cache_control: dict[str, Any] | None = None


class ClientToolUseBlock(_Block, tag="tool_use"):
    """``ToolUseBlock`` as a client's request holds it (decode only): ``input`` left
    encoded, as the translation wants its JSON text (``request._arguments_in``), not
    an object to encode again. Whether it is an object is checked there."""

    id: str
    name: str
    input: msgspec.Raw
    cache_control: dict[str, Any] | None = None


class ToolResultBlock(_Block, tag="tool_result"):
    tool_use_id: str
    content: str | list[ToolResultContent] | None = None
    is_error: bool | None = None
    cache_control: dict[str, Any] | None = None


class ServerToolUseBlock(_Block, tag="server_tool_use"):
    id: str = ""
    name: str = ""
    input: dict[str, Any] | None = None


class WebSearchToolResultBlock(_Block, tag="web_search_tool_result"):
    tool_use_id: str = ""
    content: Any = None


# Blocks a client may replay in history that have no canonical shape: accepted,
# dropped and reported. Their fields are not needed, so none are declared.
class _Dropped(_Block):
    pass


class SearchResultBlock(_Dropped, tag="search_result"): ...


class ToolReferenceBlock(_Dropped, tag="tool_reference"): ...


class BrowserStateBlock(_Dropped, tag="browser_state"): ...


class WebFetchToolResultBlock(_Dropped, tag="web_fetch_tool_result"): ...


class AdvisorToolResultBlock(_Dropped, tag="advisor_tool_result"): ...


# Code execution results (``code.py``): the older tool's (Python), the current one's
# bash and file editing; ``content`` is the result object or its error object.
class CodeExecutionToolResultBlock(_Block, tag="code_execution_tool_result"):
    tool_use_id: str = ""
    content: Any = None


class BashCodeExecutionToolResultBlock(_Block, tag="bash_code_execution_tool_result"):
    tool_use_id: str = ""
    content: Any = None


class TextEditorCodeExecutionToolResultBlock(
    _Block, tag="text_editor_code_execution_tool_result"
):
    tool_use_id: str = ""
    content: Any = None


class ToolSearchToolResultBlock(_Dropped, tag="tool_search_tool_result"): ...


class McpToolUseBlock(_Dropped, tag="mcp_tool_use"): ...


class McpToolResultBlock(_Dropped, tag="mcp_tool_result"): ...


class McpToolListingBlock(_Dropped, tag="mcp_tool_listing"): ...


class ContainerUploadBlock(_Dropped, tag="container_upload"): ...


class CompactionBlock(_Dropped, tag="compaction"): ...


class ToolAdditionBlock(_Dropped, tag="tool_addition"): ...


class ToolRemovalBlock(_Dropped, tag="tool_removal"): ...


class FallbackBlock(_Dropped, tag="fallback"): ...


ToolResultContent = (
    TextBlock
    | ImageBlock
    | DocumentBlock
    | SearchResultBlock
    | ToolReferenceBlock
    | BrowserStateBlock
)

_HistoryBlock = (
    TextBlock
    | ImageBlock
    | DocumentBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ToolResultBlock
    | ServerToolUseBlock
    | WebSearchToolResultBlock
    | SearchResultBlock
    | WebFetchToolResultBlock
    | AdvisorToolResultBlock
    | CodeExecutionToolResultBlock
    | BashCodeExecutionToolResultBlock
    | TextEditorCodeExecutionToolResultBlock
    | ToolSearchToolResultBlock
    | McpToolUseBlock
    | McpToolResultBlock
    | McpToolListingBlock
    | ContainerUploadBlock
    | CompactionBlock
    | ToolAdditionBlock
    | ToolRemovalBlock
    | FallbackBlock
)

InputBlock = _HistoryBlock | ToolUseBlock
"""Every block type a request message may carry."""

ClientInputBlock = _HistoryBlock | ClientToolUseBlock
"""``InputBlock`` as a client's request holds it (``ClientToolUseBlock``)."""

OutputBlock = (
    TextBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ToolUseBlock
    | ServerToolUseBlock
    | WebSearchToolResultBlock
    | CodeExecutionToolResultBlock
    | BashCodeExecutionToolResultBlock
    | TextEditorCodeExecutionToolResultBlock
)
"""The response block types this codec understands (others are skipped upstream)."""


class TypeOnly(msgspec.Struct):
    """Just the tag of an object, to tell an unknown type from a malformed known one."""

    type: str = ""


# ------------------------------------------------------------------ request


class InputMessage(msgspec.Struct, kw_only=True, gc=False):
    # "system": a mid-conversation system message (Claude 4.8 on; Claude Code sends it),
    # kept in place (``validate.system_placement`` checks where it may stand).
    role: Literal["user", "assistant", "system"]
    content: str | list[InputBlock]


class ClientInputMessage(msgspec.Struct, kw_only=True, gc=False):
    """``InputMessage`` as a client's request holds it (decode only)."""

    role: Literal["user", "assistant", "system"]
    content: str | list[ClientInputBlock]


class ToolParam(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """A client-defined ("custom") tool. Typed server tools stay raw dicts."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any] | msgspec.Raw | None = None  # (Raw: ``tool_schemas``)
    cache_control: dict[str, Any] | None = None
    strict: bool | None = None
    type: str | None = None


class ToolChoice(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    type: Literal["auto", "any", "none", "tool"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class ThinkingConfig(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    type: Literal["enabled", "disabled", "adaptive", "between_tools"]
    budget_tokens: int | None = None
    display: str | None = None


class JsonSchemaFormat(msgspec.Struct, kw_only=True, gc=False):
    type: Literal["json_schema"]
    schema: dict[str, Any]


Effort = Literal["low", "medium", "high", "xhigh", "max"]


class OutputConfig(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    effort: Effort | None = None
    format: JsonSchemaFormat | None = None


class Metadata(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    user_id: str | None = None


class MessagesRequest(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """The request body. Decoded from clients; encoded toward upstreams (``tools`` then
    holds ``ToolParam`` structs and raw typed-tool dicts, which encode alike)."""

    model: str
    messages: list[InputMessage]
    max_tokens: int
    system: str | list[TextBlock] | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stream: bool | None = None
    metadata: Metadata | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: ToolChoice | None = None
    thinking: ThinkingConfig | None = None
    output_config: OutputConfig | None = None
    output_format: JsonSchemaFormat | None = None  # pre-GA structured outputs beta
    service_tier: str | None = None


class UpstreamRequest(MessagesRequest, kw_only=True, omit_defaults=True):
    """``MessagesRequest`` as we build it for an upstream (encode only). ``tools`` may
    be a set held encoded, a tuple (``request.ToolSet``)."""

    tools: list[ToolParam | dict[str, Any]] | tuple[msgspec.Raw, ...] | None = None  # type: ignore[assignment]


class ClientMessagesRequest(MessagesRequest, kw_only=True):
    """``MessagesRequest`` as a client sends it (decode only): its calls' ``input``
    left encoded (``ClientToolUseBlock``). ``MessagesRequest`` itself is decoded only
    for the error of a body this one takes and it does not (an ``input`` that is not
    an object)."""

    messages: list[ClientInputMessage]  # type: ignore[assignment]
    # Left encoded: a resent set of the usual declarations is looked up by its bytes
    # (``request.py``); empty when the body has no ``tools``.
    tools: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]


class ClientRequest(ClientMessagesRequest, kw_only=True, forbid_unknown_fields=True):
    """``MessagesRequest`` as a client sends it (decode only). Any key not declared
    makes the decode fail, so a body that decodes has no unknown field to report and
    needs no second parse to list its keys. The top-level fields Claude Code sends that
    have no canonical meaning are declared, left undecoded (``request.py`` drops and
    reports them), so its requests decode in one parse too."""

    context_management: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    cache_control: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    container: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    mcp_servers: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    betas: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


# ----------------------------------------------------------------- response


class CacheCreation(msgspec.Struct, kw_only=True, gc=False):
    """The cache writes by lifetime (priced apart)."""

    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0


class ServerToolUsage(msgspec.Struct, kw_only=True, gc=False):
    web_search_requests: int = 0
    web_fetch_requests: int = 0


class Usage(msgspec.Struct, kw_only=True, gc=False):
    """Encoded with every figure set (the breakdowns when they say something);
    decoded leniently (``message_delta`` may omit figures, which then keep their
    ``message_start`` values)."""

    input_tokens: int | None = None
    output_tokens: int = 0
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation: CacheCreation | msgspec.UnsetType | None = msgspec.UNSET
    server_tool_use: ServerToolUsage | msgspec.UnsetType | None = msgspec.UNSET


class StopDetails(msgspec.Struct, kw_only=True, gc=False):
    type: str = "refusal"
    category: str | None = None
    explanation: str | None = None


class MessageHead(msgspec.Struct, kw_only=True, gc=False):
    """Every ``Message`` field but ``content`` (always emitted, ``null`` included)."""

    id: str
    type: str = "message"
    role: str = "assistant"
    model: str = ""
    stop_reason: str | None = None
    stop_sequence: str | None = None
    stop_details: StopDetails | None = None
    usage: Usage = msgspec.field(default_factory=Usage)


class Message(MessageHead, kw_only=True):
    content: list[OutputBlock] = msgspec.field(default_factory=list)


class UpstreamMessage(Message, kw_only=True):
    """``Message`` as an upstream answer must be to be one: ``content`` is required
    (a body without it is some other JSON, not an answer)."""

    content: list[OutputBlock]


class RawMessage(MessageHead, kw_only=True):
    """``UpstreamMessage`` with its blocks left undecoded (the slow path for unknown
    types)."""

    content: list[msgspec.Raw]


# ------------------------------------------------------------------- stream
# ``gc=False`` (inherited): one event is decoded per upstream SSE event, and decoded
# JSON cannot form a reference cycle, so the cycle collector need not track them.


class _Delta(msgspec.Struct, tag_field="type", kw_only=True, gc=False):
    pass


class TextDelta(_Delta, tag="text_delta"):
    text: str


class InputJsonDelta(_Delta, tag="input_json_delta"):
    partial_json: str


class ThinkingDelta(_Delta, tag="thinking_delta"):
    thinking: str


class SignatureDelta(_Delta, tag="signature_delta"):
    signature: str


class CitationsDelta(_Delta, tag="citations_delta"):
    citation: Citation


Delta = TextDelta | InputJsonDelta | ThinkingDelta | SignatureDelta | CitationsDelta


class _Event(msgspec.Struct, tag_field="type", kw_only=True, gc=False):
    pass


class MessageStartEvent(_Event, tag="message_start"):
    message: Message


class ContentBlockStartEvent(_Event, tag="content_block_start"):
    index: int
    content_block: OutputBlock


class ContentBlockDeltaEvent(_Event, tag="content_block_delta"):
    index: int
    delta: Delta


class ContentBlockStopEvent(_Event, tag="content_block_stop"):
    index: int


class MessageDelta(msgspec.Struct, kw_only=True):
    stop_reason: str | None = None
    stop_sequence: str | None = None
    stop_details: StopDetails | None = None


class MessageDeltaEvent(_Event, tag="message_delta"):
    delta: MessageDelta
    usage: Usage = msgspec.field(default_factory=Usage)


class MessageStopEvent(_Event, tag="message_stop"):
    pass


class PingEvent(_Event, tag="ping"):
    pass


class ErrorBody(msgspec.Struct, kw_only=True):
    type: str = "api_error"
    message: str = ""


class ErrorEvent(_Event, tag="error"):
    """Both the ``event: error`` stream frame and the non-stream error body."""

    error: ErrorBody


StreamEvent = (
    MessageStartEvent
    | ContentBlockStartEvent
    | ContentBlockDeltaEvent
    | ContentBlockStopEvent
    | MessageDeltaEvent
    | MessageStopEvent
    | PingEvent
    | ErrorEvent
)


class RawEvent(msgspec.Struct):
    """An event whose union decode failed: enough to tell unknown from malformed."""

    type: str = ""
    index: int | None = None
    delta: TypeOnly | None = None
    content_block: TypeOnly | None = None
