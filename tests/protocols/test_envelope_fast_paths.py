"""The request codecs' fast path for the usual envelope (``codec.absent``): a request
that sends none of the rarer request-level fields skips the code that handles them.
Here every body is decoded (every canonical request encoded) twice, as production
does and with the general path forced (``fast_paths.general_only``), and both must
give the same canonical request (upstream bytes), the same report and the same error:
the fast path is only a shortcut, never a different answer."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols._kit import tool_schemas
from proxai_asgi.protocols._kit.fast_paths import general_only
from proxai_asgi.protocols.anthropic_messages import request as anthropic_request
from proxai_asgi.protocols.gemini_generate_content import request as gemini_request
from proxai_asgi.protocols.openai_chat import request as chat_request
from proxai_asgi.protocols.openai_responses import request as responses_request
from tests.helpers.schemas import plain_request

_TEXT = st.text(alphabet="abcxyz-_", max_size=4)
_NULLABLE = st.none()


def _outcome(decode: Any, body: bytes) -> tuple[Any, ...]:
    """``decode``'s outcome, each tool declaration decoded afresh (not looked up)."""
    tool_schemas.forget()
    report = TranslationReport()
    try:
        request = decode(body, report)
    except ProxyError as e:
        return ("error", e.status, e.message, e.param, report.dropped)
    return ("ok", plain_request(request), report.dropped)


def _both_paths(module: Any, body: bytes) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    fast = _outcome(module.decode_request, body)
    with general_only():
        slow = _outcome(module.decode_request, body)
    return fast, slow


def _envelope(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Any subset of ``fields``, each valid, odd or null."""
    return st.fixed_dictionaries({}, optional={k: v | _NULLABLE for k, v in fields.items()})


_FUNCTION = {"name": "f", "parameters": {"type": "object", "properties": {}}}
_CHAT_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "tools": st.sampled_from(
        [
            [{"type": "function", "function": _FUNCTION}],
            [{"type": "custom", "custom": {"name": "patch"}}],
            [{"type": "bogus"}],
        ]
    ),
    "tool_choice": st.sampled_from(
        ["auto", "none", "required", "sometimes", {"type": "function", "function": {"name": "f"}}]
    ),
    "parallel_tool_calls": st.booleans(),
    "functions": st.just([_FUNCTION]),
    "function_call": st.sampled_from(["auto", "none", "never", {"name": "f"}]),
    "max_completion_tokens": st.integers(1, 10),
    "max_tokens": st.integers(1, 10),
    "temperature": st.sampled_from([0.0, 0.5, 2.5]),
    "top_p": st.sampled_from([0.5, 1.5]),
    "stop": st.one_of(_TEXT, st.lists(_TEXT, max_size=2)),
    "n": st.integers(0, 2),
    "logprobs": st.booleans(),
    "top_logprobs": st.integers(0, 2),
    "response_format": st.sampled_from(
        [
            {"type": "text"},
            {"type": "json_object"},
            {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
            {"type": "json_schema"},
        ]
    ),
    "reasoning_effort": st.sampled_from(["low", "high", "bogus"]),
    "user": _TEXT,
    "safety_identifier": _TEXT,
    "metadata": st.just({"k": "v"}),
    "service_tier": st.sampled_from(["auto", "flex", "odd"]),
    "prompt_cache_key": _TEXT,
    "verbosity": st.sampled_from(["low", "high"]),
    "modalities": st.sampled_from([["text"], ["text", "audio"]]),
    "audio": st.just({"voice": "alloy", "format": "wav"}),
    "stream": st.booleans(),
    "stream_options": st.sampled_from([{"include_usage": True}, {"include_obfuscation": False}]),
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_envelope(_CHAT_FIELDS))
def test_chat_fast_and_general_paths_agree(envelope: dict[str, Any]) -> None:
    body = msgspec.json.encode(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], **envelope}
    )
    fast, slow = _both_paths(chat_request, body)
    assert fast == slow


def test_chat_usual_request_takes_the_fast_path() -> None:
    """The guard answers as it should: an agent loop's envelope skips the general
    path, one rarer field takes it."""
    usual, _tools = chat_request._decode_body(
        b'{"model":"m","messages":[],"tools":[],"tool_choice":"auto","stream":true,'
        b'"stream_options":{"include_usage":true},"temperature":0.2,"max_tokens":5}',
        TranslationReport(),
    )
    rare = msgspec.structs.replace(usual, user="u")
    assert chat_request.RARE_FIELDS(usual)
    assert not chat_request.RARE_FIELDS(rare)


_ANTHROPIC_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "system": st.sampled_from(["be brief", "", [{"type": "text", "text": "be brief"}]]),
    "tools": st.sampled_from(
        [
            [{"name": "f", "input_schema": {"type": "object"}}],
            [{"name": "f", "input_schema": {"type": "object"}, "defer_loading": True}],
            [{"type": "web_search_20250305", "name": "web_search"}],
            [{"name": "f"}],
        ]
    ),
    "tool_choice": st.sampled_from(
        [
            {"type": "auto"},
            {"type": "any", "disable_parallel_tool_use": True},
            {"type": "tool", "name": "f"},
            {"type": "tool"},
        ]
    ),
    "temperature": st.sampled_from([0.0, 0.5, 1.5]),
    "top_p": st.sampled_from([0.5, 0.99]),
    "top_k": st.integers(1, 5),
    "stop_sequences": st.lists(_TEXT, max_size=2),
    "stream": st.booleans(),
    "metadata": st.sampled_from([{"user_id": "u"}, {}]),
    "thinking": st.sampled_from(
        [
            {"type": "enabled", "budget_tokens": 2048},
            {"type": "enabled", "budget_tokens": 10},
            {"type": "adaptive"},
            {"type": "disabled"},
            {"type": "adaptive", "display": "summarized"},
        ]
    ),
    "output_config": st.sampled_from(
        [{"effort": "high"}, {"format": {"type": "json_schema", "schema": {"type": "object"}}}]
    ),
    "output_format": st.just({"type": "json_schema", "schema": {"type": "object"}}),
    "service_tier": st.sampled_from(["auto", "standard_only"]),
    "context_management": st.just({"edits": []}),
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_envelope(_ANTHROPIC_FIELDS))
def test_anthropic_fast_and_general_paths_agree(envelope: dict[str, Any]) -> None:
    body = msgspec.json.encode(
        {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], **envelope}
    )
    fast, slow = _both_paths(anthropic_request, body)
    assert fast == slow


_RESPONSES_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "instructions": st.sampled_from(["be brief", ""]),
    "tools": st.sampled_from(
        [
            [{"type": "function", **_FUNCTION}],
            [{"type": "custom", "name": "patch"}],
            [{"type": "web_search_preview"}],
            [{"type": "bogus"}],
        ]
    ),
    "tool_choice": st.sampled_from(
        ["auto", "never", {"type": "function", "name": "f"}, {"type": "web_search_preview"}]
    ),
    "parallel_tool_calls": st.booleans(),
    "max_output_tokens": st.integers(1, 10),
    "temperature": st.sampled_from([0.0, 0.5, 2.5]),
    "top_p": st.sampled_from([0.5, 1.5]),
    "stream": st.booleans(),
    "text": st.sampled_from(
        [{"verbosity": "low"}, {"format": {"type": "json_schema", "name": "x", "schema": {}}}]
    ),
    "reasoning": st.sampled_from([{"effort": "high", "summary": "auto"}, {"effort": "bogus"}]),
    "user": _TEXT,
    "safety_identifier": _TEXT,
    "metadata": st.just({"k": "v"}),
    "service_tier": st.sampled_from(["auto", "flex"]),
    "prompt_cache_key": _TEXT,
    "previous_response_id": _TEXT,
    "background": st.booleans(),
    "top_logprobs": st.integers(0, 2),
    "store": st.booleans(),
    "include": st.just(["reasoning.encrypted_content"]),
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_envelope(_RESPONSES_FIELDS))
def test_responses_fast_and_general_paths_agree(envelope: dict[str, Any]) -> None:
    body = msgspec.json.encode({"model": "m", "input": "hi", **envelope})
    fast, slow = _both_paths(responses_request, body)
    assert fast == slow


_GENERATION_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "maxOutputTokens": st.integers(1, 10),
    "temperature": st.sampled_from([0.0, 0.5]),
    "topP": st.just(0.5),
    "topK": st.integers(1, 5),
    "stopSequences": st.lists(_TEXT, max_size=2),
    "candidateCount": st.integers(1, 2),
    "responseLogprobs": st.booleans(),
    "logprobs": st.integers(0, 2),
    "responseMimeType": st.sampled_from(["application/json", "text/plain", "text/x.enum"]),
    "responseJsonSchema": st.just({"type": "object"}),
    "responseModalities": st.sampled_from([["TEXT"], ["IMAGE"]]),
    "seed": st.integers(0, 3),
    "presencePenalty": st.just(0.5),
    "frequencyPenalty": st.just(0.5),
    "mediaResolution": st.just("MEDIA_RESOLUTION_LOW"),
    "thinkingConfig": st.sampled_from(
        [{"thinkingBudget": 0}, {"thinkingBudget": 1024, "includeThoughts": True}]
    ),
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_envelope(_GENERATION_FIELDS))
def test_gemini_fast_and_general_paths_agree(config: dict[str, Any]) -> None:
    body = msgspec.json.encode(
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": config}
    )
    fast, slow = _both_paths(gemini_request, body)
    assert fast == slow


_CANONICAL_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "n": st.integers(1, 2),
    "logprobs": st.booleans(),
    "top_logprobs": st.integers(0, 2),
    "previous_response_id": _TEXT,
    "background": st.booleans(),
    "user": _TEXT,
    "metadata": st.just({"k": "v"}),
    "prompt_cache_key": _TEXT,
    "verbosity": st.sampled_from(["low", "high"]),
    "service_tier": st.sampled_from(["auto", "flex", "standard_only"]),
    "parallel_tool_calls": st.booleans(),
}


def _encoded_both_ways(module: Any, request: c.Request, lossy: bool) -> None:
    def outcome() -> tuple[Any, ...]:
        report = TranslationReport(lossy)
        try:
            body = module.encode_request(
                msgspec.structs.replace(request), report, UpstreamOptions()
            )
        except ProxyError as e:
            return ("error", e.status, e.message, e.param, report.dropped)
        return ("ok", body, report.dropped)

    fast = outcome()
    with general_only():
        slow = outcome()
    assert fast == slow


@pytest.mark.parametrize("module", [anthropic_request, gemini_request], ids=["anthropic", "gemini"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=_envelope(_CANONICAL_FIELDS), lossy=st.booleans())
def test_encoders_fast_and_general_paths_agree(
    module: Any, fields: dict[str, Any], lossy: bool
) -> None:
    request = c.Request(
        model="m",
        messages=[c.Message(role="user", content=[c.Text(text="hi")])],
        tools=[c.Tool(name="f", parameters={"type": "object"})],
        max_tokens=8,
    )
    for name, value in fields.items():
        setattr(request, name, value)
    _encoded_both_ways(module, request, lossy)


_TOOL_DECLARATIONS = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["f", "g"])},
        optional={
            "description": st.sampled_from(["does f", None, 3]),
            "input_schema": st.sampled_from([{"type": "object"}, None, "schema"]),
            "cache_control": st.just({"type": "ephemeral"}),
            "strict": st.booleans(),
            "defer_loading": st.booleans(),
            "type": st.sampled_from(["custom", "bash_20250124"]),
        },
    ),
    max_size=3,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TOOL_DECLARATIONS)
def test_anthropic_plain_tool_declarations_agree(tools: list[dict[str, Any]]) -> None:
    """The usual declaration is built without ``msgspec.convert``; with that path
    turned off every declaration gives the same tools, report and error."""
    body = msgspec.json.encode(
        {
            "model": "m",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": tools,
        }
    )
    fast = _outcome(anthropic_request.decode_request, body)
    with general_only():
        slow = _outcome(anthropic_request.decode_request, body)
    assert fast == slow
