"""The hub model: what every protocol codec maps its wire shapes to and from.

A translated exchange is always ``client codec -> canonical -> upstream codec`` for the
request and the reverse for the answer, so no codec knows which protocol is on the
other side. The model is deliberately small: it holds what at least two protocols can
express; anything only one protocol has is handled (or reported) inside that codec.

Conventions
- Token usage follows OpenAI semantics: ``input_tokens`` counts *all* prompt tokens,
  cache reads and cache writes included; the Anthropic codec subtracts on the way out.
- Tool arguments are always a JSON *string* here (``ToolCall.arguments``); the
  Anthropic codec parses/serialises its ``input`` object at its own boundary.
- Stream events carry a decoder-assigned ``index`` that is unique per stream; encoders
  allocate their own wire identifiers (Anthropic block index, Chat tool index,
  Responses item id / output_index) from it.
- Every Struct is ``gc=False``: built from decoded JSON they form trees, never cycles,
  so the cycle collector need not track the hundreds a long conversation makes.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

# ``system``: an instruction given mid-conversation, kept in place (an Anthropic client's
# ``role: "system"`` message, Claude Code's); the conversation's own system prompt is
# ``Request.system``.
Role = Literal["user", "assistant", "tool", "system"]
StopReason = Literal[
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "content_filter",
]
ToolKind = Literal["function", "custom"]


# --------------------------------------------------------------------------- parts


class Text(msgspec.Struct, gc=False, tag="text", kw_only=True):
    text: str
    # Anthropic ``cache_control`` (kept only toward Anthropic; dropped elsewhere).
    cache_control: dict[str, Any] | None = None
    # Citations / annotations in a neutral shape (see ``Citation``).
    citations: list[Citation] | None = None


class Citation(msgspec.Struct, gc=False, kw_only=True):
    """A URL citation; the only kind all three protocols can carry."""

    url: str
    title: str | None = None
    cited_text: str | None = None
    start_index: int | None = None
    end_index: int | None = None


class Image(msgspec.Struct, gc=False, tag="image", kw_only=True):
    """Exactly one of ``url`` / ``data`` is set. ``data`` is base64 without a prefix."""

    url: str | None = None
    data: str | None = None
    media_type: str | None = None
    detail: str | None = None
    cache_control: dict[str, Any] | None = None


class File(msgspec.Struct, gc=False, tag="file", kw_only=True):
    """A document (PDF, text). One of ``data`` (base64), ``url``, ``file_id`` or ``text``."""

    data: str | None = None
    url: str | None = None
    file_id: str | None = None
    text: str | None = None
    media_type: str | None = None
    filename: str | None = None
    cache_control: dict[str, Any] | None = None


class Refusal(msgspec.Struct, gc=False, tag="refusal", kw_only=True):
    text: str


class Reasoning(msgspec.Struct, gc=False, tag="reasoning", kw_only=True):
    """Model reasoning: Anthropic thinking / redacted_thinking, Responses reasoning
    items, Chat ``reasoning_content``.

    The provider's opaque tokens are kept so a client can replay them, each kind in its
    own field (``reasoning_carry.TOKENS``): a thinking ``signature``, ``redacted``
    thinking data, ``encrypted_content`` with its ``item_id``, a ``thought_signature``.
    A client whose protocol has no field for a token gets it packed by
    ``reasoning_carry`` and gives it back the same way.
    """

    text: str = ""
    summary: bool = False  # text is a summary (Responses summary_text), not raw reasoning
    signature: str | None = None
    redacted: str | None = None
    encrypted_content: str | None = None
    item_id: str | None = None
    thought_signature: str | None = None


class ToolCall(msgspec.Struct, gc=False, tag="tool_call", kw_only=True):
    id: str
    name: str
    arguments: str = ""  # JSON text for function tools, raw text for custom tools
    kind: ToolKind = "function"
    item_id: str | None = None  # Responses item id (``fc_...``), when one exists


class ToolResult(msgspec.Struct, gc=False, tag="tool_result", kw_only=True):
    call_id: str
    content: list[Part] = msgspec.field(default_factory=list)
    is_error: bool = False
    kind: ToolKind = "function"
    cache_control: dict[str, Any] | None = None


class SearchHit(msgspec.Struct, gc=False, kw_only=True):
    """One page a web search found, in the shape every protocol's results map to
    (Anthropic ``web_search_result``, a Responses ``action.sources`` entry, a Gemini
    ``groundingChunks[].web``, a ``SearchResult`` of the proxy's own backend)."""

    url: str
    title: str | None = None
    snippet: str | None = None  # the page's text as the search gave it (proxy-run, Gemini)
    page_age: str | None = None
    encrypted_content: str | None = None  # Anthropic's opaque page content, replayable


class CodeResult(msgspec.Struct, gc=False, kw_only=True):
    """What a hosted code execution printed, in the shape every protocol's maps to
    (Anthropic ``*code_execution_tool_result``, a Responses ``code_interpreter_call``'s
    ``logs`` outputs, Gemini ``codeExecutionResult``). ``return_code`` None: the
    provider did not say (Responses); ``error`` a provider error code (the run failed)."""

    stdout: str = ""
    stderr: str = ""
    return_code: int | None = None
    error: str | None = None


class ServerToolUse(msgspec.Struct, gc=False, tag="server_tool", kw_only=True):
    """A hosted tool run by the provider or by the proxy (web search, web fetch...)
    with its result. ``name`` is canonical ("web_search", "web_fetch", ...);
    ``input`` holds at least ``query`` for a search. A search's results are ``hits``,
    or ``error`` (Anthropic's error codes: "unavailable", "max_uses_exceeded",
    "too_many_requests", "query_too_long", "invalid_tool_input"). ``result`` keeps the
    provider's own raw result for a same-protocol replay. Carried only where the
    client protocol has a shape for it; otherwise dropped and reported."""

    id: str
    name: str
    input: dict[str, Any] = msgspec.field(default_factory=dict)
    result: Any = None
    hits: list[SearchHit] | None = None
    error: str | None = None
    # A code execution (``name == "code_execution"``, ``input`` {"code", "language"}):
    # what it printed (None: no result yet, or the upstream gave none).
    code: CodeResult | None = None


Part = Text | Image | File | Refusal | Reasoning | ToolCall | ToolResult | ServerToolUse


class Message(msgspec.Struct, gc=False, kw_only=True):
    """One conversation turn. ``tool`` turns hold only ``ToolResult`` parts; each
    codec regroups them (Anthropic: a user turn; Chat: one message per result).
    ``system`` turns hold only ``Text`` parts: each encoder sends them in place where
    its protocol can (Chat a system message, Responses a system message item,
    Anthropic a system message), else hoists them (``policy.hoist_system_turns``)."""

    role: Role
    content: list[Part]


# ---------------------------------------------------------------------- request


class Tool(msgspec.Struct, gc=False, kw_only=True):
    name: str
    kind: ToolKind = "function"
    description: str | None = None
    # JSON schema (function tools); as a client decoder gives it, often encoded already
    # (``tool_schemas``: exactly the bytes an encoder writes for the dict).
    parameters: dict[str, Any] | msgspec.Raw | None = None
    strict: bool | None = None
    # Custom tools: the input format, always in the Responses shape
    # (``{type: "text"}`` or ``{type: "grammar", syntax, definition}``); the Chat codec
    # converts its nested ``{type: "grammar", grammar: {syntax, definition}}`` at its boundary.
    format: dict[str, Any] | None = None
    cache_control: dict[str, Any] | None = None


class HostedTool(msgspec.Struct, gc=False, kw_only=True):
    """A provider-hosted tool definition (web_search, ...), kept raw with its protocol."""

    protocol: str
    type: str
    raw: dict[str, Any]


class WebSearch(msgspec.Struct, gc=False, kw_only=True):
    """The client's hosted web search tool, in terms every protocol's search maps to
    (Anthropic ``web_search_*``, Responses ``web_search``, Gemini ``googleSearch``):
    options an upstream cannot express are reported by its encoder."""

    max_uses: int | None = None
    allowed_domains: list[str] | None = None
    blocked_domains: list[str] | None = None
    # {"type": "approximate", "city", "region", "country", "timezone"} (all optional)
    user_location: dict[str, Any] | None = None
    context_size: Literal["low", "medium", "high"] | None = None


class CodeExecution(msgspec.Struct, gc=False, kw_only=True):
    """The client's hosted code execution (Anthropic ``code_execution_*``, Responses
    ``code_interpreter``, Gemini ``codeExecution``): a sandbox the provider runs. It has
    no option the others share (containers and files are each provider's own; the
    decoder reports them)."""


class ToolChoice(msgspec.Struct, gc=False, kw_only=True):
    mode: Literal["auto", "none", "required", "tool"]
    name: str | None = None  # with mode == "tool"
    kind: ToolKind = "function"


class ResponseFormat(msgspec.Struct, gc=False, kw_only=True):
    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None
    description: str | None = None


class ReasoningConfig(msgspec.Struct, gc=False, kw_only=True):
    """``effort`` uses the OpenAI vocabulary (none/minimal/low/medium/high/xhigh);
    ``budget_tokens`` is only set when the client itself sent one."""

    effort: str | None = None
    budget_tokens: int | None = None
    summary: str | None = None  # auto / concise / detailed
    enabled: bool | None = None  # explicit on/off (Anthropic thinking type)


class Request(msgspec.Struct, gc=False, kw_only=True):
    model: str
    messages: list[Message]
    system: list[Text] = msgspec.field(default_factory=list)
    tools: list[Tool] = msgspec.field(default_factory=list)
    hosted_tools: list[HostedTool] = msgspec.field(default_factory=list)
    web_search: WebSearch | None = None  # the client offered its provider's web search
    code_execution: CodeExecution | None = None  # ... its provider's code execution
    # Set by the translation: the upstream tells a search's results after the text that
    # cites them (Gemini's grounding comes last), so a client whose protocol puts them
    # first (Anthropic) holds the answer until they come; others stream as it comes.
    search_results_last: bool = False
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: list[str] = msgspec.field(default_factory=list)
    stream: bool = False
    include_usage: bool = False  # Chat client asked for a usage chunk
    # A Chat client declared legacy ``functions`` (no ``tools``): it reads
    # ``message.function_call`` / ``delta.function_call``, one call per answer.
    legacy_functions: bool = False
    response_format: ResponseFormat | None = None
    reasoning: ReasoningConfig | None = None
    user: str | None = None  # end-user id (Chat ``user`` / Anthropic metadata.user_id)
    metadata: dict[str, str] | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    # The client's protocol caches prompt prefixes by itself (OpenAI): toward an
    # upstream that caches only at explicit breakpoints, the encoder places them.
    implicit_caching: bool = False
    verbosity: str | None = None  # Chat ``verbosity`` / Responses ``text.verbosity``
    # ``messages`` hold ``system`` turns (set by the decoder that made them), so an
    # encoder that cannot keep them in place looks for them only then.
    system_turns: bool = False
    # Fields that change the *kind* of answer; a target that cannot honour them
    # rejects (or, in lossy mode, drops and reports).
    n: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    previous_response_id: str | None = None
    background: bool | None = None
    # The id a Responses client's answer gets when it is stored (minted by the store
    # layer, never the upstream's: upstreams repeat ids); None: derived from upstream.
    response_id: str | None = None


# --------------------------------------------------------------------- response


class Usage(msgspec.Struct, gc=False, kw_only=True):
    input_tokens: int = 0  # all prompt tokens (OpenAI semantics)
    output_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens read from cache
    cache_creation_tokens: int = 0  # prompt tokens written to cache (Anthropic)
    cache_creation_1h_tokens: int = 0  # the part of those kept for an hour (priced apart)
    reasoning_tokens: int = 0  # part of output_tokens
    server_tool_requests: int = 0  # searches, fetches... a server tool made (billed apart)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        """Two answers' usage together (a cut answer and its continuation: both billed)."""
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            cache_creation_1h_tokens=self.cache_creation_1h_tokens
            + other.cache_creation_1h_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            server_tool_requests=self.server_tool_requests + other.server_tool_requests,
        )


class Response(msgspec.Struct, gc=False, kw_only=True):
    id: str  # upstream id as received; each client codec derives its own prefix
    model: str
    content: list[Part]  # Text, Refusal, Reasoning, ToolCall, ServerToolUse in order
    stop_reason: StopReason | None = None
    stop_sequence: str | None = None
    refusal_explanation: str | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    created: int = 0


# ------------------------------------------------------------------ stream events

BlockKind = Literal["text", "reasoning", "redacted_reasoning", "tool_call", "refusal"]


class MessageStart(msgspec.Struct, gc=False, tag="message_start", kw_only=True):
    id: str
    model: str
    created: int = 0
    usage: Usage | None = None  # prompt figures when the upstream knows them early


class BlockStart(msgspec.Struct, gc=False, tag="block_start", kw_only=True):
    index: int
    kind: BlockKind
    # tool_call blocks
    call_id: str | None = None
    name: str | None = None
    tool_kind: ToolKind = "function"
    # reasoning blocks
    summary: bool = False
    item_id: str | None = None
    redacted: str | None = None  # redacted_reasoning payload (no deltas follow)
    encrypted_content: str | None = None


class BlockDelta(msgspec.Struct, gc=False, tag="block_delta", kw_only=True):
    """Text for text/reasoning/refusal blocks, an argument fragment for tool calls."""

    index: int
    text: str


class BlockSignature(msgspec.Struct, gc=False, tag="block_signature", kw_only=True):
    """A reasoning block's opaque tokens, once known (a signature delta, an
    encrypted_content at item done, a thought signature); fields as on ``Reasoning``."""

    index: int
    signature: str | None = None
    encrypted_content: str | None = None
    item_id: str | None = None  # goes with encrypted_content
    thought_signature: str | None = None


class Citations(msgspec.Struct, gc=False, tag="citations", kw_only=True):
    index: int
    citations: list[Citation]


class ServerTool(msgspec.Struct, gc=False, tag="server_tool", kw_only=True):
    """A hosted tool's call and result, whole, where it ran in the answer (between
    blocks: no block is open). Each encoder writes its protocol's own sequence for it
    (Anthropic ``server_tool_use`` + ``web_search_tool_result`` blocks, a Responses
    ``web_search_call`` item, Gemini ``groundingMetadata``)."""

    index: int
    use: ServerToolUse


class BlockStop(msgspec.Struct, gc=False, tag="block_stop", kw_only=True):
    index: int


class Finish(msgspec.Struct, gc=False, tag="finish", kw_only=True):
    """The terminal event of a successful stream: stop reason and final usage."""

    stop_reason: StopReason | None
    usage: Usage
    stop_sequence: str | None = None
    refusal_explanation: str | None = None


class StreamError(msgspec.Struct, gc=False, tag="error", kw_only=True):
    """The terminal event of a failed stream."""

    status: int
    kind: str  # an ``errors.ErrorKind``
    message: str
    # The provider's own code for the error (OpenAI ``error.code``, Anthropic
    # ``error.type``, a Google status name or ``ErrorInfo`` reason), when it sent one:
    # what the codec's ``stream_failure_hint`` tells the failure's class by.
    code: str | None = None


StreamEvent = (
    MessageStart
    | BlockStart
    | BlockDelta
    | BlockSignature
    | Citations
    | ServerTool
    | BlockStop
    | Finish
    | StreamError
)
