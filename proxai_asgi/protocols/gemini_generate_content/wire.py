"""Gemini ``generateContent`` wire shapes as msgspec Structs (camelCase on the wire).

One definition per shape, used in both directions, as in the other codecs (the
encoder's usual parts have narrow Structs of their own, below). A ``Part``
is a oneof by field presence (``text``, ``inlineData``, ``functionCall``, ...), not a
tagged union, so it is one Struct with every member optional; ``thought`` and
``thoughtSignature`` ride on any part.

Google's JSON accepts snake_case spellings too (the proto field names): clients such as
pydantic-ai send ``thinking_config``/``parameters_json_schema``. ``request.py`` renames
those keys before converting; upstream answers are always camelCase and decode directly.

Every optional field defaults to None and is omitted when encoding (``omit_defaults``),
so nothing the API would reject as ``null`` is sent, and answers look like Google's.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .signatures import SKIP_VALIDATOR


class _Wire(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel", gc=False):
    pass


# ---------------------------------------------------------------------- parts


class Blob(_Wire):
    mime_type: str | None = None
    data: str = ""


class FileData(_Wire):
    mime_type: str | None = None
    file_uri: str = ""


class FunctionCall(_Wire):
    name: str = ""
    args: dict[str, Any] | None = None
    id: str | None = None


class FunctionResponse(_Wire):
    name: str = ""
    response: dict[str, Any] | None = None
    id: str | None = None
    parts: list[dict[str, Any]] | None = None  # multimodal results (Gemini 3)


class Part(_Wire):
    text: str | None = None
    thought: bool | None = None
    thought_signature: str | None = None
    inline_data: Blob | None = None
    file_data: FileData | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    executable_code: dict[str, Any] | None = None
    code_execution_result: dict[str, Any] | None = None
    video_metadata: dict[str, Any] | None = None


class Content(_Wire):
    role: str | None = None
    parts: list[Part] = msgspec.field(default_factory=list)


# -------------------------------------------------------------------- request


class FunctionDeclaration(_Wire):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None  # Google's OpenAPI-subset Schema
    parameters_json_schema: Any = None  # plain JSON Schema
    response: dict[str, Any] | None = None
    response_json_schema: Any = None
    behavior: str | None = None


class FunctionTool(_Wire, forbid_unknown_fields=True):
    """A tool made of function declarations only, every key camelCase: the usual one,
    which a client body's fast decode types in the one pass (any other tool is read as
    a dict)."""

    function_declarations: list[FunctionDeclaration] | None = None


class FunctionCallingConfig(_Wire):
    mode: str | None = None  # AUTO / ANY / NONE / VALIDATED
    allowed_function_names: list[str] | None = None


class ToolConfig(_Wire):
    function_calling_config: FunctionCallingConfig | None = None
    retrieval_config: dict[str, Any] | None = None


class ThinkingConfig(_Wire):
    include_thoughts: bool | None = None
    thinking_budget: int | None = None
    thinking_level: str | None = None


class GenerationConfig(_Wire):
    stop_sequences: list[str] | None = None
    response_mime_type: str | None = None
    response_schema: dict[str, Any] | None = None
    response_json_schema: Any = None
    response_modalities: list[str] | None = None
    candidate_count: int | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    response_logprobs: bool | None = None
    logprobs: int | None = None
    thinking_config: ThinkingConfig | None = None
    media_resolution: str | None = None
    speech_config: dict[str, Any] | None = None
    image_config: dict[str, Any] | None = None
    enable_enhanced_civic_answers: bool | None = None


class GenerateContentRequest(_Wire):
    contents: list[Content] = msgspec.field(default_factory=list)
    system_instruction: Content | None = None
    tools: list[dict[str, Any]] | None = None  # functionDeclarations or a server tool
    tool_config: ToolConfig | None = None
    generation_config: GenerationConfig | None = None
    safety_settings: list[dict[str, Any]] | None = None
    cached_content: str | None = None
    labels: dict[str, str] | None = None
    model: str | None = None  # only inside countTokens' generateContentRequest


# ------------------------------------------------------ upstream request (encode only)
# The encoder's usual parts as Structs of their own: a ``Part`` sets its ten fields on
# every instance and ``omit_defaults`` tests them all when encoding; these hold only
# what they send, in the order ``Part`` sends it, and are built positionally. Never
# decoded (a union of several Structs cannot be), so the unions below are fine.


class _Out(msgspec.Struct, omit_defaults=True, rename="camel", gc=False):
    pass


class DeclarationOut(_Out):
    """A function declaration as the encoder sends it (a dict of up to three keys held
    ~3x the memory: five per agent-loop request)."""

    name: str
    description: str | None = None
    parameters_json_schema: Any = None


class DeclarationsOut(_Out):
    """The ``tools`` entry that holds the function declarations."""

    function_declarations: list[DeclarationOut]


class CallOut(_Out):
    """A ``FunctionCall`` as the encoder sends it: ``args`` an object, or the bytes of
    one (``json_objects``). Defaults as ``FunctionCall``'s, so it leaves out what that
    leaves out."""

    name: str = ""
    args: Any = None
    id: str | None = None


class Output(_Out):
    """The usual ``functionResponse.response``: ``{"output": <text>}``."""

    output: str


class ResponseOut(_Out):
    """A ``FunctionResponse`` of a usual result (the same keys, in order, and defaults)."""

    name: str = ""
    response: Output | None = None
    id: str | None = None


UpstreamResponse = FunctionResponse | ResponseOut


class TextPart(_Out):
    text: str


class CallPart(_Out):
    thought_signature: str | None = None  # before the call, as ``Part`` sends it
    function_call: CallOut | None = None


class ResponsePart(_Out):
    function_response: UpstreamResponse


class SkippedCallPart(_Out, tag_field="thoughtSignature", tag=SKIP_VALIDATOR):
    """A ``CallPart`` whose signature is ``SKIP_VALIDATOR`` (a call Gemini did not
    make), written as a tag: the same bytes, one field fewer to hold."""

    function_call: CallOut


UpstreamPart = Part | TextPart | CallPart | SkippedCallPart | ResponsePart


class UpstreamContent(_Out):
    role: str
    parts: list[UpstreamPart]


# An agent loop's two turns, built whole: the role a tag (written, not held). Their
# parts stay a list, which a later message of the same role extends (an ``array_like``
# Struct of fixed parts held ~0.09x of a 14 KB body less, but took 0.8 µs more to build).


class ModelTurn(_Out, tag_field="role", tag="model"):
    parts: list[UpstreamPart]


class AnswerTurn(_Out, tag_field="role", tag="user"):
    parts: list[UpstreamPart]


UpstreamTurn = UpstreamContent | ModelTurn | AnswerTurn


class UpstreamRequest(_Out, kw_only=True):
    """A ``GenerateContentRequest`` as the encoder sends it (the same fields, in order)."""

    contents: list[UpstreamTurn] = msgspec.field(default_factory=list)  # [] is left out
    system_instruction: Content | None = None
    tools: list[DeclarationsOut | dict[str, Any]] | None = None  # or a server tool's
    tool_config: ToolConfig | None = None
    generation_config: GenerationConfig | None = None


# ------------------------------------------------------------------- response


class Candidate(_Wire):
    content: Content | None = None
    finish_reason: str | None = None
    finish_message: str | None = None
    index: int | None = None
    safety_ratings: list[dict[str, Any]] | None = None
    citation_metadata: dict[str, Any] | None = None
    grounding_metadata: dict[str, Any] | None = None
    token_count: int | None = None
    avg_logprobs: float | None = None


class PromptFeedback(_Wire):
    block_reason: str | None = None
    block_reason_message: str | None = None
    safety_ratings: list[dict[str, Any]] | None = None


class UsageMetadata(_Wire):
    prompt_token_count: int | None = None
    cached_content_token_count: int | None = None
    candidates_token_count: int | None = None
    tool_use_prompt_token_count: int | None = None
    thoughts_token_count: int | None = None
    total_token_count: int | None = None


class GenerateContentResponse(_Wire):
    candidates: list[Candidate] | None = None
    prompt_feedback: PromptFeedback | None = None
    usage_metadata: UsageMetadata | None = None
    model_version: str | None = None
    response_id: str | None = None


# --------------------------------------------------------------------- errors


class ErrorBody(_Wire):
    code: int
    message: str
    status: str


class ErrorResponse(_Wire):
    error: ErrorBody
