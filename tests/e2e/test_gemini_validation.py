"""A Gemini client's request is rejected where Google rejects it, with Google's 400
(``INVALID_ARGUMENT``, Google's wording), toward every upstream, streamed and not, and
nothing reaches the upstream (issue 26): a translated request is never one the proxy
quietly changed (a tool dropped, a part's image lost, a user turn gone, a temperature
clamped). What Google and the real clients send still goes through."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import types

from tests.helpers.servers import FakeUpstream, reply_from_capture

from .conftest import Stack
from .test_tool_schemas import ANSWER as TEXT_REPLY

UPSTREAMS = ["openai_chat_completions", "openai_responses", "anthropic_messages"]
USER = {"role": "user", "parts": [{"text": "hi"}]}
PNG = "iVBORw0KGgoAAAANSUhEUg=="


def body(**fields: Any) -> dict[str, Any]:
    return {"contents": [USER], **fields}


def generation(**config: Any) -> dict[str, Any]:
    return body(generationConfig=config)


def unknown(name: str, where: str = "") -> str:
    at = f" at '{where}'" if where else ""
    return f'Invalid JSON payload received. Unknown name "{name}"{at}: Cannot find field.'


CALL_FIRST = [
    {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": "x"}}}]},
]
SIGNED = [
    USER,
    {"role": "model", "parts": [{"text": "ok", "thoughtSignature": "not base64!"}]},
    USER,
]
# (id, body, the start of Google's message)
REJECTED = [
    (
        "openai_shaped_tool",
        body(tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}]),
        unknown("type", "tools[0]"),
    ),
    (
        "declaration_input_schema",
        body(tools=[{"functionDeclarations": [{"name": "f", "input_schema": {"type": "object"}}]}]),
        unknown("input_schema", "tools[0].function_declarations[0]"),
    ),
    (
        "part_with_two_data_fields",
        {
            "contents": [
                {
                    "role": "user",
                    "parts": [
                        {"text": "look", "inlineData": {"mimeType": "image/png", "data": PNG}}
                    ],
                }
            ]
        },
        "Invalid value at 'contents[0].parts[0]' (oneof), oneof field 'data' is already set. "
        "Cannot set 'inline_data'",
    ),
    (
        "empty_parts",
        {"contents": [USER, {"role": "model", "parts": []}, USER]},
        "* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.",
    ),
    (
        "openai_shaped_content",
        {"contents": [{"role": "user", "content": "hi"}]},
        unknown("content", "contents[0]"),
    ),
    ("unknown_top_level_field", body(temperature=0.5), unknown("temperature")),
    (
        "unknown_snake_case_field",
        body(generation_config={"max_tokens": 5}),
        unknown("max_tokens", "generation_config"),
    ),
    (
        "temperature_above_two",
        generation(temperature=5),
        "* GenerateContentRequest.generation_config.temperature:",
    ),
    (
        "zero_max_output_tokens",
        generation(maxOutputTokens=0),
        "* GenerateContentRequest.generation_config.max_output_tokens:",
    ),
    (
        "negative_max_output_tokens",
        generation(maxOutputTokens=-5),
        "* GenerateContentRequest.generation_config.max_output_tokens:",
    ),
    (
        "zero_candidate_count",
        generation(candidateCount=0),
        "* GenerateContentRequest.generation_config.candidate_count:",
    ),
    (
        "unknown_response_mime_type",
        generation(responseMimeType="application/pdf"),
        "* GenerateContentRequest.generation_config.response_mime_type: allowed mimetypes are",
    ),
    (
        "unknown_thinking_level",
        generation(thinkingConfig={"thinkingLevel": "EXTREME"}),
        "Invalid value at 'generation_config.thinking_config.thinking_level'",
    ),
    (
        "thinking_budget_and_level",
        generation(thinkingConfig={"thinkingLevel": "LOW", "thinkingBudget": 128}),
        "You can only set only one of thinking budget and thinking level.",
    ),
    (
        "history_starting_with_a_function_call",
        {"contents": CALL_FIRST},
        "Please ensure that function call turn comes immediately after a user turn or after "
        "a function response turn.",
    ),
    (
        "unknown_safety_category",
        body(safetySettings=[{"category": "HARM_CATEGORY_FOO", "threshold": "BLOCK_NONE"}]),
        "Invalid value at 'safety_settings[0].category'",
    ),
    (
        "unsupported_safety_category",
        body(safetySettings=[{"category": "HARM_CATEGORY_MEDICAL", "threshold": "BLOCK_NONE"}]),
        "* GenerateContentRequest.safety_settings[0]: element predicate failed:",
    ),
    (
        "non_base64_thought_signature",
        {"contents": SIGNED},
        "Invalid value at 'contents[1].parts[0].thought_signature' (TYPE_BYTES)",
    ),
    (
        "assistant_role",
        {"contents": [{"role": "assistant", "parts": [{"text": "hi"}]}]},
        "Please use a valid role: user, model.",
    ),
]


def _post(base: str, payload: dict[str, Any], stream: bool) -> httpx.Response:
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return httpx.post(f"{base}/v1beta/models/m:{method}", json=payload, timeout=20)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize(
    ("payload", "message"), [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED]
)
def test_what_google_rejects_is_a_400_in_googles_shape_and_never_sent(
    stack: Stack,
    fake: FakeUpstream,
    upstream: str,
    inner: bool,
    stream: bool,
    payload: dict[str, Any],
    message: str,
) -> None:
    fake.push(reply_from_capture(TEXT_REPLY[upstream, stream]))
    base = stack.proxy(fake, upstream, inner=inner)  # type: ignore[arg-type]
    r = _post(base, payload, stream)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT", error
    assert error["message"].startswith(message), error["message"]
    assert fake.seen == []


ACCEPTED = [
    (
        "snake_case_and_sdk_fields",
        {
            "contents": [
                {"role": "user", "parts": [{"text": "hi", "part_metadata": {"k": "v"}}]},
            ],
            "system_instruction": {"role": "user", "parts": [{"text": "Be brief."}]},
            "generation_config": {
                "temperature": 2,
                "max_output_tokens": 64,
                "candidate_count": 1,
                "response_mime_type": "text/plain",
                "thinking_config": {"include_thoughts": True, "thinking_level": "high"},
            },
            "tools": [
                {"function_declarations": [{"name": "f", "parameters_json_schema": {}}]},
            ],
            "tool_config": {"function_calling_config": {"mode": "AUTO"}},
            "safety_settings": [
                {"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"},
            ],
            "service_tier": "standard",
        },
    ),
    (
        "signed_history",
        {
            "contents": [
                USER,
                {
                    "role": "model",
                    "parts": [
                        {"text": "ok", "thoughtSignature": "c2lnbmVk"},
                        {
                            "functionCall": {"name": "f", "args": {}},
                            "thoughtSignature": "skip_thought_signature_validator",
                        },
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {"functionResponse": {"name": "f", "response": {"output": "x"}}},
                        {"inlineData": {"mimeType": "image/png", "data": PNG}},
                    ],
                },
            ],
            "generationConfig": {"thinkingConfig": {"thinkingBudget": 128}},
            "tools": [{"functionDeclarations": [{"name": "f"}]}],
        },
    ),
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("payload", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_what_google_accepts_still_goes_through(
    stack: Stack, fake: FakeUpstream, upstream: str, stream: bool, payload: dict[str, Any]
) -> None:
    fake.push(reply_from_capture(TEXT_REPLY[upstream, stream]))
    base = stack.proxy(fake, upstream)  # type: ignore[arg-type]
    r = _post(base, copy.deepcopy(payload), stream)
    assert r.status_code == 200, r.text
    assert len(fake.seen) == 1


def test_the_google_genai_sdk_gets_googles_error_for_a_bad_temperature(
    stack: Stack, fake: FakeUpstream
) -> None:
    fake.push(reply_from_capture("chat_json_text_basic"))
    base = stack.proxy(fake, "openai_chat_completions")
    g = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=base))
    with pytest.raises(genai.errors.ClientError) as caught:
        g.models.generate_content(
            model="m", contents="hi", config=types.GenerateContentConfig(temperature=5)
        )
    assert caught.value.code == 400 and caught.value.status == "INVALID_ARGUMENT"
    assert fake.seen == []
    json.dumps(caught.value.details)  # Google's shape, readable by the SDK
