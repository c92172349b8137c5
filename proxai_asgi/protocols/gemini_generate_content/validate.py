"""Checks a generateContent request the way Google does, before it is translated.

A translated request must fail where Google would fail it, with Google's 400 and
wording; the proxy never passes on a request it quietly changed (an unknown field
ignored, a part that holds two kinds of data losing one, a temperature clamped).
Pass-through requests are Google's to judge.

``check_fields`` runs on a body's raw JSON (the general decode path; the fast path's
strict Structs refuse unknown keys, so a body with one always takes the general path):
every field name Google takes, in camelCase or snake_case, as the ``google-genai`` SDK
(3.6) writes them. ``check_request`` runs on the typed request on both paths.
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import ProxyError
from . import wire

# Field tables: a message's camelCase field names -> the message a field holds (None: a
# value, or the user's own data, not walked). A one-element tuple is a repeated field.
_Table = dict[str, Any]
_FREE = None
_BLOB: _Table = {"mimeType": _FREE, "data": _FREE, "displayName": _FREE}
_FILE: _Table = {"mimeType": _FREE, "fileUri": _FREE, "displayName": _FREE}
_CALL: _Table = dict.fromkeys(("id", "name", "args", "partialArgs", "willContinue"))
_RESPONSE: _Table = dict.fromkeys(("id", "name", "response", "parts", "willContinue", "scheduling"))
_PART: _Table = dict.fromkeys(
    (
        "text",
        "thought",
        "thoughtSignature",
        "executableCode",
        "codeExecutionResult",
        "videoMetadata",
        "mediaResolution",
        "partMetadata",
        "toolCall",
        "toolResponse",
        "audioTranscription",
        "mediaProcessing",
        "speechMetadata",
        "documentMetadata",
        "spreadsheetMetadata",
        "audioMetadata",
    )
) | {"inlineData": _BLOB, "fileData": _FILE, "functionCall": _CALL, "functionResponse": _RESPONSE}
_CONTENT: _Table = {"role": _FREE, "parts": (_PART,)}
DECLARATION_FIELDS = (
    "name",
    "description",
    "behavior",
    "parameters",
    "parametersJsonSchema",
    "response",
    "responseJsonSchema",
)
TOOL_FIELDS = (
    "functionDeclarations",
    "googleSearchRetrieval",
    "codeExecution",
    "googleSearch",
    "computerUse",
    "urlContext",
    "fileSearch",
    "googleMaps",
    "mcpServers",
)
_TOOL: _Table = dict.fromkeys(TOOL_FIELDS) | {
    "functionDeclarations": (dict.fromkeys(DECLARATION_FIELDS),)
}
_TOOL_CONFIG: _Table = {
    "functionCallingConfig": dict.fromkeys(
        ("mode", "allowedFunctionNames", "streamFunctionCallArguments")
    ),
    "retrievalConfig": _FREE,
    "includeServerSideToolInvocations": _FREE,
}
_GENERATION: _Table = dict.fromkeys(
    (
        "stopSequences",
        "responseMimeType",
        "responseSchema",
        "responseJsonSchema",
        "responseModalities",
        "candidateCount",
        "maxOutputTokens",
        "temperature",
        "topP",
        "topK",
        "seed",
        "presencePenalty",
        "frequencyPenalty",
        "responseLogprobs",
        "logprobs",
        "enableEnhancedCivicAnswers",
        "speechConfig",
        "imageConfig",
        "mediaResolution",
        "enableAffectiveDialog",
        "audioTimestamp",
        "modelSelectionConfig",
        "routingConfig",
        "responseFormat",
        "translationConfig",
        "audioTranscriptionConfig",
    )
) | {"thinkingConfig": dict.fromkeys(("includeThoughts", "thinkingBudget", "thinkingLevel"))}
_REQUEST: _Table = {
    "contents": (_CONTENT,),
    "systemInstruction": _CONTENT,
    "tools": (_TOOL,),
    "toolConfig": _TOOL_CONFIG,
    "generationConfig": _GENERATION,
    "safetySettings": (dict.fromkeys(("category", "threshold", "method")),),
    "cachedContent": _FREE,
    "labels": _FREE,
    "model": _FREE,
    "serviceTier": _FREE,
    "store": _FREE,
    "continuationToken": _FREE,
}


def invalid(message: str, path: str | None = None) -> ProxyError:
    return ProxyError.invalid(message, param=path)


def camel(key: str) -> str:
    """A proto (snake_case) field name in camelCase, as Google takes either."""
    key = key.removeprefix("_")  # ``_responseJsonSchema``, an older SDK spelling
    if "_" not in key:
        return key
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _snake(name: str) -> str:
    """A field's proto name, as Google's error paths spell it."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _unknown(key: str, path: str) -> ProxyError:
    where = f" at '{path}'" if path else ""
    return invalid(
        f'Invalid JSON payload received. Unknown name "{key}"{where}: Cannot find field.',
        path or key,
    )


def check_fields(body: dict[str, Any]) -> None:
    """Google's 400 for the first field name it does not have (it answers the same for
    an OpenAI-shaped ``content`` or tool, or an Anthropic ``input_schema``)."""
    _walk(body, _REQUEST, "")


def check_tools(tools: Any) -> None:
    """``check_fields`` for the ``tools`` alone (the fast path reads them on their own)."""
    _walk({"tools": tools}, _REQUEST, "")


def _walk(value: dict[str, Any], table: _Table, path: str) -> None:
    for key, child in value.items():
        name = camel(key) if isinstance(key, str) else key
        if name not in table:
            raise _unknown(key, path)
        sub = table[name]
        if sub is None:
            continue
        where = f"{path}.{_snake(name)}" if path else _snake(name)
        if type(sub) is tuple:
            if type(child) is list:
                for i, item in enumerate(child):
                    if type(item) is dict:
                        _walk(item, sub[0], f"{where}[{i}]")
        elif type(child) is dict:
            _walk(child, sub, where)


# ------------------------------------------------------------------------ values

# Standard or URL-safe base64, padded or not: what Google's JSON parser takes as bytes.
_BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"
# The members of a part's ``data`` oneof (attribute and proto names alike).
_DATA_FIELDS = (
    "text",
    "inline_data",
    "file_data",
    "function_call",
    "function_response",
    "executable_code",
    "code_execution_result",
)
_MIME_TYPES = frozenset(
    ("text/plain", "application/json", "application/xml", "application/yaml", "text/x.enum")
)
THINKING_LEVELS = frozenset(
    ("THINKING_LEVEL_UNSPECIFIED", "MINIMAL", "LOW", "MEDIUM", "HIGH", "XHIGH")
)
# The categories the Gemini API takes, and the rest of the enum (older or Vertex's).
_CATEGORIES = (
    "HARM_CATEGORY_HATE_SPEECH",
    "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    "HARM_CATEGORY_DANGEROUS_CONTENT",
    "HARM_CATEGORY_HARASSMENT",
    "HARM_CATEGORY_CIVIC_INTEGRITY",
)
_OTHER_CATEGORIES = frozenset(
    (
        "HARM_CATEGORY_UNSPECIFIED",
        "HARM_CATEGORY_DEROGATORY",
        "HARM_CATEGORY_TOXICITY",
        "HARM_CATEGORY_VIOLENCE",
        "HARM_CATEGORY_SEXUAL",
        "HARM_CATEGORY_MEDICAL",
        "HARM_CATEGORY_DANGEROUS",
        "HARM_CATEGORY_JAILBREAK",
        "HARM_CATEGORY_IMAGE_HATE",
        "HARM_CATEGORY_IMAGE_DANGEROUS_CONTENT",
        "HARM_CATEGORY_IMAGE_HARASSMENT",
        "HARM_CATEGORY_IMAGE_SEXUALLY_EXPLICIT",
    )
)
_THRESHOLDS = frozenset(
    (
        "HARM_BLOCK_THRESHOLD_UNSPECIFIED",
        "BLOCK_LOW_AND_ABOVE",
        "BLOCK_MEDIUM_AND_ABOVE",
        "BLOCK_ONLY_HIGH",
        "BLOCK_NONE",
        "OFF",
    )
)
_SAFETY_FIELDS = frozenset(("category", "threshold", "method"))
_ENUM = "type.googleapis.com/google.ai.generativelanguage.v1beta."
_CALL_AFTER_USER = (
    "Please ensure that function call turn comes immediately after a user turn or after a "
    "function response turn."
)


def _bad_value(path: str, kind: str, value: object) -> ProxyError:
    shown = value if not isinstance(value, str) else f'"{value[:200]}"'
    return invalid(f"Invalid value at '{path}' ({kind}), {shown}", path)


def _field(path: str, message: str) -> ProxyError:
    """A rule Google checks after parsing: ``* GenerateContentRequest.<path>: <message>``."""
    return invalid(f"* GenerateContentRequest.{path}: {message}\n", path)


def _base64(value: str) -> bool:
    # (``bytes.translate`` deletes the alphabet in C: a few times a regex's speed on the
    # kilobytes of signatures a resent history holds)
    body = value.rstrip("=")
    return (
        value.isascii()
        and len(value) - len(body) <= 2
        and len(body) % 4 != 1
        and not body.encode().translate(None, _BASE64)
    )


_ROLES = frozenset(("", "user", "model", "function"))


def check_request(req: wire.GenerateContentRequest) -> None:
    """Google's 400 for what the translation would otherwise change or forward. (It runs
    over every part of a resent history: one loop, plain tests, paths made on error.)"""
    if not req.contents:
        raise _field("contents", "contents is not specified")
    previous: str | None = None
    for i, content in enumerate(req.contents):
        role, parts = content.role, content.parts
        if role is not None and role not in _ROLES:
            raise invalid("Please use a valid role: user, model.", f"contents[{i}].role")
        if not parts:
            raise _field(f"contents[{i}].parts", "contents.parts must not be empty.")
        for p in parts:
            if not (
                (p.text is None) + (p.function_call is None) + (p.function_response is None) == 2
                and p.inline_data is None
                and p.file_data is None
                and p.executable_code is None
                and p.code_execution_result is None
            ):
                _data_oneof(p, _part_path(i, parts, p))  # (media, or a part Google refuses)
            signature = p.thought_signature
            if signature is not None and not _base64(signature):
                path = f"{_part_path(i, parts, p)}.thought_signature"
                raise _bad_value(path, "TYPE_BYTES", signature)
        if (
            role == "model"
            and previous != "user"
            and any(p.function_call is not None for p in parts)
        ):
            raise invalid(_CALL_AFTER_USER, f"contents[{i}]")
        previous = "model" if role == "model" else "user"
    if req.generation_config is not None:
        _check_generation(req.generation_config)
    for i, setting in enumerate(req.safety_settings or ()):
        _check_safety(setting, i)


def _part_path(i: int, parts: list[wire.Part], p: wire.Part) -> str:
    return f"contents[{i}].parts[{next(j for j, q in enumerate(parts) if q is p)}]"


def _data_oneof(p: wire.Part, path: str) -> None:
    """Google's 400 for a part with none, or more than one, of its ``data`` members."""
    set_ = [name for name in _DATA_FIELDS if getattr(p, name) is not None]
    blob = p.inline_data
    if len(set_) == 1 and blob is not None and not _base64(blob.data):
        raise _bad_value(f"{path}.inline_data.data", "TYPE_BYTES", blob.data)
    if len(set_) == 1:
        return
    if not set_:
        raise _field(f"{path}.data", "required oneof field 'data' must have one initialized field")
    raise invalid(
        f"Invalid value at '{path}' (oneof), oneof field 'data' is already set. "
        f"Cannot set '{set_[1]}'",
        path,
    )


def _check_generation(g: wire.GenerationConfig) -> None:
    base = "generation_config"
    t = g.temperature
    if t is not None and not 0 <= t <= 2:
        raise _field(
            f"{base}.temperature", f"temperature must be in the range [0.0, 2.0], got {t:g}"
        )
    if g.max_output_tokens is not None and g.max_output_tokens < 1:
        raise _field(f"{base}.max_output_tokens", "max_output_tokens must be positive.")
    if g.candidate_count is not None and g.candidate_count < 1:
        raise _field(f"{base}.candidate_count", "candidate_count must be positive.")
    mime = g.response_mime_type
    if mime is not None and mime not in _MIME_TYPES:
        raise _field(
            f"{base}.response_mime_type",
            "allowed mimetypes are `text/plain`, `application/json`, `application/xml`, "
            "`application/yaml` and `text/x.enum`.",
        )
    tc = g.thinking_config
    if tc is not None and tc.thinking_level is not None:
        if tc.thinking_level.upper() not in THINKING_LEVELS:
            path = f"{base}.thinking_config.thinking_level"
            raise _bad_value(path, f"{_ENUM}ThinkingConfig.ThinkingLevel", tc.thinking_level)
        if tc.thinking_budget is not None:
            raise invalid(
                "You can only set only one of thinking budget and thinking level.",
                f"{base}.thinking_config",
            )


def _check_safety(setting: dict[str, Any], i: int) -> None:
    path = f"safety_settings[{i}]"
    for key in setting:  # (a dict on the fast path too: its keys are checked here)
        if key not in _SAFETY_FIELDS:
            raise _unknown(key, path)
    category, threshold = setting.get("category"), setting.get("threshold")
    if not isinstance(category, str) or category not in _CATEGORIES:
        if not isinstance(category, str) or category not in _OTHER_CATEGORIES:
            raise _bad_value(f"{path}.category", f"{_ENUM}HarmCategory", category)
        supported = ", ".join(f"HarmCategory.{c}" for c in _CATEGORIES)
        raise _field(path, f"element predicate failed: $.category in ({supported})")
    if threshold is not None and not (isinstance(threshold, str) and threshold in _THRESHOLDS):
        raise _bad_value(f"{path}.threshold", f"{_ENUM}SafetySetting.HarmBlockThreshold", threshold)
