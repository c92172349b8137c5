"""Failure classes (``routing.failures``): every protocol's error answers, in-band
stream errors and transport exceptions, the waits they ask for, and the backoff."""

from __future__ import annotations

import asyncio
import errno
import json
import socket
import ssl
import time
from email.utils import formatdate
from typing import Any

import httpx
import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import Codec, ProtocolName
from proxai_asgi.errors import ProxyError
from proxai_asgi.protocols import get_codec
from proxai_asgi.routing.failures import (
    Failure,
    backoff,
    classify_exception,
    classify_status,
    classify_stream_error,
    retry_after_seconds,
    status_class,
)
from tests.helpers import captures as cap
from tests.protocols._codec import decode_stream

CHAT: ProtocolName = "openai_chat_completions"
RESPONSES: ProtocolName = "openai_responses"
ANTHROPIC: ProtocolName = "anthropic_messages"
GEMINI: ProtocolName = "gemini_generate_content"
OPENAI = (CHAT, RESPONSES)
NOW = 1_795_000_000.0  # an injected clock: epoch seconds

Headers = list[tuple[bytes, bytes]]


def _openai(code: str | None, message: str, etype: str = "invalid_request_error") -> bytes:
    return json.dumps(
        {"error": {"message": message, "type": etype, "param": None, "code": code}}
    ).encode()


def _anthropic(etype: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": etype, "message": message}}).encode()


def _google(code: int, status: str, message: str, *details: dict[str, Any]) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        err["details"] = list(details)
    return json.dumps({"error": err}).encode()


def _retry_info(delay: str) -> dict[str, Any]:
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}


def _quota_failure(quota_id: str) -> dict[str, Any]:
    return {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [{"quotaMetric": "generate_content_free_tier_requests", "quotaId": quota_id}],
    }


_API_KEY_INVALID = {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    "reason": "API_KEY_INVALID",
    "domain": "googleapis.com",
    "metadata": {"service": "generativelanguage.googleapis.com"},
}
_GEMINI_429 = _google(
    429,
    "RESOURCE_EXHAUSTED",
    "You exceeded your current quota, please check your plan and billing details.",
    _quota_failure("GenerateRequestsPerMinutePerProjectPerModel-FreeTier"),
    _retry_info("38s"),
)
_GEMINI_DAILY = _google(
    429,
    "RESOURCE_EXHAUSTED",
    "You exceeded your current quota, please check your plan and billing details.",
    _quota_failure("GenerateRequestsPerDayPerProjectPerModel-FreeTier"),
    _retry_info("18s"),
)


def _iso(epoch: float) -> bytes:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ").encode()


# (protocol, status, headers, body, class, reason, retry_after)
Case = tuple[ProtocolName, int, Headers, bytes, str, str, float | None]

_OPENAI_CASES: list[tuple[int, Headers, bytes, str, str, float | None]] = [
    (
        401,
        [],
        _openai("invalid_api_key", "Incorrect API key provided: sk-*****2345."),
        "key",
        "401 invalid_api_key",
        None,
    ),
    (
        429,
        [],
        _openai(
            "rate_limit_exceeded",
            "Rate limit reached for gpt-4 in organization org-x on tokens per min (TPM): "
            "Limit 10000, Used 9348, Requested 5086. Please try again in 26.604s. Visit "
            "https://platform.openai.com/account/rate-limits to learn more.",
            "tokens",
        ),
        "target",
        "429 rate_limit_exceeded",
        26.604,
    ),
    (
        429,
        [],
        _openai(
            "rate_limit_exceeded",
            "Request too large for gpt-4o in organization org-x on tokens per min (TPM): "
            "Limit 30000, Requested 30601. The input or output tokens must be reduced in "
            "order to run successfully.",
            "tokens",
        ),
        "context",
        "429 rate_limit_exceeded",
        None,
    ),
    (
        429,
        [],
        _openai(
            "insufficient_quota",
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
        ),
        "key",
        "429 insufficient_quota",
        None,
    ),
    (
        400,
        [],
        _openai(
            "context_length_exceeded",
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9631 tokens. Please reduce the length of the messages.",
        ),
        "context",
        "400 context_length_exceeded",
        None,
    ),
    (
        400,
        [],
        _openai("content_policy_violation", "Your request was rejected by our safety system."),
        "request",
        "400 content_policy_violation",
        None,
    ),
    (
        400,
        [],
        _openai("content_filter", "The response was filtered (Azure content management)."),
        "request",
        "400 content_filter",
        None,
    ),
    (
        400,  # vLLM's flat error names no code: the message says it
        [],
        json.dumps(
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. However, "
                "you requested 5000 tokens.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ).encode(),
        "context",
        "400 400",
        None,
    ),
    (
        500,
        [],
        _openai(None, "The server had an error while processing your request.", "server_error"),
        "target",
        "500 server_error",
        None,
    ),
    (
        503,
        [(b"retry-after", b"2")],
        _openai("overloaded", "The engine is currently overloaded.", "server_error"),
        "target",
        "503 overloaded",
        2.0,
    ),
    (
        429,  # no retry-after: the exhausted limit's reset says how long
        [
            (b"x-ratelimit-remaining-requests", b"59"),
            (b"x-ratelimit-reset-requests", b"1s"),
            (b"x-ratelimit-remaining-tokens", b"0"),
            (b"x-ratelimit-reset-tokens", b"6m0s"),
        ],
        _openai("rate_limit_exceeded", "Rate limit reached.", "requests"),
        "target",
        "429 rate_limit_exceeded",
        360.0,
    ),
    (
        404,
        [],
        _openai("model_not_found", "The model `gpt-9` does not exist"),
        "request",
        "404 model_not_found",
        None,
    ),
    (502, [], b"<html><body><h1>502 Bad Gateway</h1></body></html>", "target", "502", None),
    (504, [], b"", "target", "504", None),
    (408, [], b"", "target", "408", None),
    (409, [], b"", "target", "409", None),
    (413, [], b"", "context", "413", None),
    (402, [], b"", "key", "402", None),
    (
        403,
        [],
        _openai("unsupported_country_region_territory", "Country not supported"),
        "key",
        "403 unsupported_country_region_territory",
        None,
    ),
    (422, [], b'{"detail": "bad"}', "request", "422", None),
]

_ANTHROPIC_CASES: list[tuple[int, Headers, bytes, str, str, float | None]] = [
    (529, [], _anthropic("overloaded_error", "Overloaded"), "target", "529 overloaded_error", None),
    (
        429,
        [(b"retry-after", b"17")],
        _anthropic("rate_limit_error", "This request would exceed the rate limit."),
        "target",
        "429 rate_limit_error",
        17.0,
    ),
    (
        429,  # the exhausted limit's reset is an RFC 3339 time
        [
            (b"anthropic-ratelimit-requests-remaining", b"40"),
            (b"anthropic-ratelimit-requests-reset", _iso(NOW + 5)),
            (b"anthropic-ratelimit-input-tokens-remaining", b"0"),
            (b"anthropic-ratelimit-input-tokens-reset", _iso(NOW + 30)),
        ],
        _anthropic("rate_limit_error", "This request would exceed the rate limit."),
        "target",
        "429 rate_limit_error",
        30.0,
    ),
    (
        401,
        [],
        _anthropic("authentication_error", "invalid x-api-key"),
        "key",
        "401 authentication_error",
        None,
    ),
    (
        403,
        [],
        _anthropic("permission_error", "Your API key does not have permission."),
        "key",
        "403 permission_error",
        None,
    ),
    (402, [], _anthropic("billing_error", "Billing issue."), "key", "402 billing_error", None),
    (
        400,
        [],
        _anthropic("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
        "context",
        "400 invalid_request_error",
        None,
    ),
    (
        400,
        [],
        _anthropic(
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000",
        ),
        "context",
        "400 invalid_request_error",
        None,
    ),
    (
        400,
        [],
        _anthropic(
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans "
            "& Billing to upgrade or purchase credits.",
        ),
        "key",
        "400 invalid_request_error",
        None,
    ),
    (
        400,
        [],
        _anthropic("invalid_request_error", "messages: text content blocks must be non-empty"),
        "request",
        "400 invalid_request_error",
        None,
    ),
    (
        413,
        [],
        _anthropic("request_too_large", "Request exceeds the maximum allowed number of bytes."),
        "context",
        "413 request_too_large",
        None,
    ),
    (500, [], _anthropic("api_error", "Internal server error"), "target", "500 api_error", None),
    (
        504,
        [],
        _anthropic("timeout_error", "Request timed out"),
        "target",
        "504 timeout_error",
        None,
    ),
]

_GEMINI_CASES: list[tuple[int, Headers, bytes, str, str, float | None]] = [
    (429, [], _GEMINI_429, "target", "429 RESOURCE_EXHAUSTED", 38.0),
    (429, [], _GEMINI_DAILY, "key", "429 RESOURCE_EXHAUSTED", 18.0),
    (
        429,  # streamGenerateContent without alt=sse answers in an array
        [],
        b"[" + _GEMINI_429 + b"]",
        "target",
        "429 RESOURCE_EXHAUSTED",
        38.0,
    ),
    (
        429,  # a retry-after header wins over the body's RetryInfo
        [(b"retry-after", b"7")],
        _GEMINI_429,
        "target",
        "429 RESOURCE_EXHAUSTED",
        7.0,
    ),
    (
        400,
        [],
        _google(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            _API_KEY_INVALID,
        ),
        "key",
        "400 API_KEY_INVALID",
        None,
    ),
    (
        400,
        [],
        _google(
            400,
            "INVALID_ARGUMENT",
            "The input token count (1205828) exceeds the maximum number of tokens allowed "
            "(1048576).",
        ),
        "context",
        "400 INVALID_ARGUMENT",
        None,
    ),
    (
        400,
        [],
        _google(400, "INVALID_ARGUMENT", 'Invalid JSON payload received. Unknown name "x"'),
        "request",
        "400 INVALID_ARGUMENT",
        None,
    ),
    (
        400,
        [],
        _google(
            400,
            "FAILED_PRECONDITION",
            "Gemini API free tier is not available in your country. Please enable billing.",
        ),
        "key",
        "400 FAILED_PRECONDITION",
        None,
    ),
    (
        403,
        [],
        _google(403, "PERMISSION_DENIED", "Your API key was reported as leaked."),
        "key",
        "403 PERMISSION_DENIED",
        None,
    ),
    (
        503,
        [],
        _google(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
        "target",
        "503 UNAVAILABLE",
        None,
    ),
    (
        500,
        [],
        _google(500, "INTERNAL", "An internal error has occurred."),
        "target",
        "500 INTERNAL",
        None,
    ),
    (
        504,
        [],
        _google(504, "DEADLINE_EXCEEDED", "Deadline expired."),
        "target",
        "504 DEADLINE_EXCEEDED",
        None,
    ),
    (
        400,  # a Gemini-compatible server answering in OpenAI's shape
        [],
        _openai("context_length_exceeded", "too long"),
        "context",
        "400 context_length_exceeded",
        None,
    ),
]

CASES: list[Case] = (
    [(p, *case) for p in OPENAI for case in _OPENAI_CASES]
    + [(ANTHROPIC, *case) for case in _ANTHROPIC_CASES]
    + [(GEMINI, *case) for case in _GEMINI_CASES]
)


@pytest.mark.parametrize(
    ("protocol", "status", "headers", "body", "cls", "reason", "retry_after"),
    CASES,
    ids=[f"{p}-{s}-{r}-{i}" for i, (p, s, _, _, _, r, _) in enumerate(CASES)],
)
def test_an_error_answer_is_classed_by_its_status_and_its_providers_code(
    protocol: ProtocolName,
    status: int,
    headers: Headers,
    body: bytes,
    cls: str,
    reason: str,
    retry_after: float | None,
) -> None:
    failure = classify_status(get_codec(protocol), status, headers, body, NOW)
    assert failure == Failure(cls, status, reason, retry_after)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "protocol", "cls", "reason"),
    [
        ("chat_err_401_invalid_api_key", CHAT, "key", "401 invalid_api_key"),
        ("responses_err_400_invalid_request", RESPONSES, "request", "400 decimal_below_min_value"),
        ("anthropic_err_400_invalid_request", ANTHROPIC, "request", "400 invalid_request_error"),
        ("anthropic_err_404_not_found_stream_request", ANTHROPIC, "request", "404 not_found_error"),
        ("gemini_err_404_model_not_found", GEMINI, "request", "404 NOT_FOUND"),
    ],
)
def test_recorded_error_answers_are_classed(
    name: str, protocol: ProtocolName, cls: str, reason: str
) -> None:
    response = cap.load(name)["response"]
    headers = [(k.lower().encode(), v.encode()) for k, v in response["headers"].items()]
    failure = classify_status(
        get_codec(protocol), response["status"], headers, response["body"].encode(), NOW
    )
    assert (failure.cls, failure.reason, failure.retry_after) == (cls, reason, None)


def test_recorded_rate_limit_bodies_are_target_failures() -> None:
    fragments = cap.load("errors_from_issue_reports_FRAGMENTS")["fragments"]
    anthropic_429, openai_429 = fragments[1], fragments[2]
    a = classify_status(get_codec(ANTHROPIC), 429, [], anthropic_429["body"].encode(), NOW)
    o = classify_status(get_codec(CHAT), 429, [], openai_429["body"].encode(), NOW)
    assert (a.cls, a.reason) == ("target", "429 rate_limit_error")
    assert (o.cls, o.reason, o.retry_after) == ("target", "429 rate_limit_exceeded", 26.604)


@pytest.mark.parametrize("protocol", [CHAT, RESPONSES, ANTHROPIC, GEMINI])
def test_a_providers_code_is_escaped_in_the_reason(protocol: ProtocolName) -> None:
    forged = "forged\nINFO admin logged in"
    body = _openai(forged, "x", etype=forged)  # Anthropic's code is its type
    failure = classify_status(get_codec(protocol), 400, [], body, NOW)
    assert "\n" not in failure.reason
    assert failure.reason == "400 forged\\nINFO admin logged in"


def test_a_garbled_body_falls_back_to_the_status() -> None:
    for protocol in (CHAT, RESPONSES, ANTHROPIC, GEMINI):
        codec = get_codec(protocol)
        for body in (b"\xff\xfe", b"[1, 2]", b'{"error": 5}', b"null", b"[]", b'[{"error": 1}]'):
            assert classify_status(codec, 429, [], body, NOW) == Failure("target", 429, "429")
            assert classify_status(codec, 400, [], body, NOW) == Failure("request", 400, "400")


# ---------------------------------------------------------------- retry-after


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ([(b"retry-after", b"2")], 2.0),
        ([(b"retry-after", b"1.5")], 1.5),
        ([(b"retry-after", formatdate(NOW + 30, usegmt=True).encode())], 30.0),
        ([(b"retry-after", formatdate(NOW - 30, usegmt=True).encode())], 0.0),
        ([(b"retry-after-ms", b"1500")], 1.5),
        ([(b"retry-after", b"3"), (b"retry-after-ms", b"2500")], 2.5),
        ([(b"retry-after", b"soon")], None),
        ([(b"retry-after", b"-1")], None),
        ([(b"retry-after", b"nan")], None),
        ([(b"retry-after-ms", b"x"), (b"retry-after", b"4")], 4.0),
        ([], None),
    ],
)
def test_retry_after_reads_seconds_http_dates_and_milliseconds(
    headers: Headers, wait: float | None
) -> None:
    assert retry_after_seconds(headers, NOW) == wait


def test_an_http_date_in_zone_minus_0000_is_gmt_whatever_the_local_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    date = formatdate(NOW + 30).encode()  # "Wed, 18 Nov 2026 11:07:10 -0000"
    assert date.endswith(b"-0000")
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        assert retry_after_seconds([(b"retry-after", date)], NOW) == 30.0
    finally:
        monkeypatch.undo()
        time.tzset()


def test_retry_after_adds_the_reset_of_the_codecs_exhausted_limit() -> None:
    openai_headers = [
        (b"x-ratelimit-remaining-requests", b"0"),
        (b"x-ratelimit-reset-requests", b"1.5s"),
        (b"x-ratelimit-remaining-tokens", b"0"),
        (b"x-ratelimit-reset-tokens", b"20ms"),
    ]
    assert retry_after_seconds(openai_headers, NOW) is None  # not without the codec
    assert retry_after_seconds(openai_headers, NOW, get_codec(CHAT)) == 1.5
    # A limit with room left says nothing about this failure.
    roomy = [(b"x-ratelimit-remaining-tokens", b"10"), (b"x-ratelimit-reset-tokens", b"6m0s")]
    assert retry_after_seconds(roomy, NOW, get_codec(RESPONSES)) is None
    anthropic = [
        (b"anthropic-ratelimit-tokens-remaining", b"0"),
        (b"anthropic-ratelimit-tokens-reset", _iso(NOW + 12)),
    ]
    assert retry_after_seconds(anthropic, NOW, get_codec(ANTHROPIC)) == 12.0
    assert retry_after_seconds(anthropic, NOW, get_codec(GEMINI)) is None  # Google has none
    assert retry_after_seconds(openai_headers, NOW, get_codec(ANTHROPIC)) is None


# ------------------------------------------------------------ in-band errors


def _sse(*frames: tuple[str | None, Any]) -> bytes:
    out = b""
    for event, data in frames:
        if event is not None:
            out += b"event: " + event.encode() + b"\n"
        out += b"data: " + (data if isinstance(data, bytes) else json.dumps(data).encode())
        out += b"\n\n"
    return out


_ANTHROPIC_START = (
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 1, "output_tokens": 0},
        },
    },
)
_RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1700000000,
    "status": "in_progress",
    "model": "gpt-x",
    "output": [],
    "usage": None,
}
_CREATED = ("response.created", {"type": "response.created", "response": _RESPONSE})
_CHAT_ROLE = (
    None,
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-x",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
    },
)


def _failed(code: str, message: str) -> tuple[str, Any]:
    response = dict(_RESPONSE, status="failed", error={"code": code, "message": message})
    return ("response.failed", {"type": "response.failed", "response": response})


def _anthropic_error(etype: str, message: str) -> tuple[str, Any]:
    return (
        "error",
        {"type": "error", "error": {"details": None, "type": etype, "message": message}},
    )


_STREAM_CASES: list[tuple[ProtocolName, bytes, Failure]] = [
    (
        ANTHROPIC,
        _sse(_ANTHROPIC_START, _anthropic_error("overloaded_error", "Overloaded")),
        Failure("target", 529, "529 overloaded_error"),
    ),
    (
        ANTHROPIC,
        _sse(_anthropic_error("rate_limit_error", "Rate limited")),
        Failure("target", 429, "429 rate_limit_error"),
    ),
    (
        ANTHROPIC,
        _sse(_anthropic_error("api_error", "Internal server error")),
        Failure("target", 500, "500 api_error"),
    ),
    (
        ANTHROPIC,
        _sse(_anthropic_error("invalid_request_error", "prompt is too long: 3 > 2 maximum")),
        Failure("context", 400, "400 invalid_request_error"),
    ),
    (
        ANTHROPIC,
        _sse(_anthropic_error("authentication_error", "invalid x-api-key")),
        Failure("key", 401, "401 authentication_error"),
    ),
    (
        RESPONSES,
        _sse(_CREATED, _failed("server_error", "The server had an error.")),
        Failure("target", 500, "500 server_error"),
    ),
    (
        RESPONSES,
        _sse(
            _CREATED,
            _failed(
                "rate_limit_exceeded",
                "Rate limit reached for gpt-5 on tokens per min (TPM). Please try again in 1.898s.",
            ),
        ),
        Failure("target", 429, "429 rate_limit_exceeded", 1.898),
    ),
    (
        RESPONSES,
        _sse(
            _CREATED,
            _failed("context_length_exceeded", "Your input exceeds the context window."),
        ),
        Failure("context", 500, "500 context_length_exceeded"),
    ),
    (
        RESPONSES,
        _sse(_CREATED, _failed("insufficient_quota", "You exceeded your current quota.")),
        Failure("key", 500, "500 insufficient_quota"),
    ),
    (
        RESPONSES,
        _sse(_CREATED, _failed("image_parse_error", "The image could not be parsed.")),
        Failure("request", 500, "500 image_parse_error"),
    ),
    (
        RESPONSES,
        _sse(("error", {"type": "error", "code": "server_error", "message": "down"})),
        Failure("target", 500, "500 server_error"),
    ),
    (
        CHAT,
        _sse(
            _CHAT_ROLE,
            (None, {"error": {"message": "busy", "type": "overloaded_error"}}),
        ),
        Failure("target", 529, "529 overloaded_error"),
    ),
    (
        CHAT,
        _sse(
            _CHAT_ROLE,
            (
                None,
                {
                    "error": {
                        "message": "This model's maximum context length is 4096 tokens.",
                        "type": "invalid_request_error",
                        "code": "context_length_exceeded",
                    }
                },
            ),
        ),
        Failure("context", 400, "400 context_length_exceeded"),
    ),
    (
        CHAT,
        _sse((None, {"error": {"message": "quota", "type": "x", "code": "insufficient_quota"}})),
        Failure("key", 429, "429 insufficient_quota"),
    ),
    (
        CHAT,
        _sse(("error", {"type": "error", "error": {"type": "overloaded_error", "message": "O"}})),
        Failure("target", 529, "529 overloaded_error"),
    ),
    (
        GEMINI,
        _sse((None, {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}})),
        Failure("target", 503, "503 UNAVAILABLE"),
    ),
    (
        GEMINI,
        _sse((None, {"error": {"code": 429, "message": "q", "status": "RESOURCE_EXHAUSTED"}})),
        Failure("target", 429, "429 RESOURCE_EXHAUSTED"),
    ),
    (
        GEMINI,
        _sse((None, json.loads(_GEMINI_429))),
        Failure("target", 429, "429 RESOURCE_EXHAUSTED"),
    ),
    (
        GEMINI,
        _sse(
            (
                None,
                {
                    "error": {
                        "code": 400,
                        "message": "The input token count (9) exceeds the maximum number of "
                        "tokens allowed (8).",
                        "status": "INVALID_ARGUMENT",
                    }
                },
            )
        ),
        Failure("context", 400, "400 INVALID_ARGUMENT"),
    ),
    (
        GEMINI,
        _sse((None, json.loads(_google(400, "INVALID_ARGUMENT", "bad key", _API_KEY_INVALID)))),
        Failure("key", 400, "400 API_KEY_INVALID"),
    ),
    (
        GEMINI,
        _sse((None, {"error": {"code": 500, "message": "boom", "status": "INTERNAL"}})),
        Failure("target", 500, "500 INTERNAL"),
    ),
]


@pytest.mark.parametrize(
    ("protocol", "body", "expected"),
    _STREAM_CASES,
    ids=[f"{p}-{f.reason}-{i}" for i, (p, _, f) in enumerate(_STREAM_CASES)],
)
def test_an_in_band_error_is_classed_from_what_the_decoder_kept(
    protocol: ProtocolName, body: bytes, expected: Failure
) -> None:
    codec = get_codec(protocol)
    events = decode_stream(codec, body)
    error = events[-1]
    assert isinstance(error, c.StreamError)
    assert classify_stream_error(codec, error) == expected


@pytest.mark.parametrize("protocol", [CHAT, RESPONSES, ANTHROPIC, GEMINI])
def test_a_stream_that_ends_before_its_terminal_event_is_a_target_failure(
    protocol: ProtocolName,
) -> None:
    codec = get_codec(protocol)
    error = decode_stream(codec, b"")[-1]
    assert isinstance(error, c.StreamError)
    assert classify_stream_error(codec, error) == Failure("target", 502, "502 bad_gateway")


# -------------------------------------------------------------- exceptions


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            ProxyError(502, "upstream unreachable", kind="bad_gateway"),
            Failure("target", 502, "502 bad_gateway"),
        ),
        (
            ProxyError(504, "upstream timed out", kind="timeout"),
            Failure("target", 504, "504 timeout"),
        ),
        (
            ProxyError.invalid("cannot translate"),
            Failure("request", 400, "400 invalid_request"),
        ),
        (httpx.ConnectError("refused"), Failure("target", 502, "502 ConnectError")),
        (httpx.ReadError("reset"), Failure("target", 502, "502 ReadError")),
        (
            httpx.RemoteProtocolError("peer closed connection"),
            Failure("target", 502, "502 RemoteProtocolError"),
        ),
        (httpx.ReadTimeout("slow"), Failure("target", 504, "504 ReadTimeout")),
        (httpx.ConnectTimeout("slow"), Failure("target", 504, "504 ConnectTimeout")),
        (httpx.PoolTimeout("full"), Failure("target", 504, "504 PoolTimeout")),
        (
            ConnectionResetError(errno.ECONNRESET, "reset"),
            Failure("target", 502, "502 ConnectionResetError"),
        ),
        (
            ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
            Failure("target", 502, "502 ConnectionRefusedError"),
        ),
        (BrokenPipeError(errno.EPIPE, "pipe"), Failure("target", 502, "502 BrokenPipeError")),
        (OSError(errno.EHOSTUNREACH, "no route"), Failure("target", 502, "502 OSError")),
        (TimeoutError(), Failure("target", 504, "504 TimeoutError")),
        (asyncio.IncompleteReadError(b"", 10), Failure("target", 502, "502 IncompleteReadError")),
        (ssl.SSLError(1, "handshake"), Failure("target", 502, "502 SSLError")),
        (socket.gaierror(socket.EAI_NONAME, "unknown"), Failure("target", 502, "502 gaierror")),
        (
            ExceptionGroup("g", [httpx.ReadError("x"), ConnectionResetError()]),
            Failure("target", 502, "502 ReadError"),
        ),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else "",
)
def test_a_transport_failure_is_a_target_failure(exc: BaseException, expected: Failure) -> None:
    assert classify_exception(exc) == expected


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("a bug"),
        KeyError("k"),
        AssertionError(),
        FileNotFoundError(errno.ENOENT, "no file"),
        PermissionError(errno.EACCES, "denied"),
        asyncio.CancelledError(),
        KeyboardInterrupt(),
        httpx.LocalProtocolError("we built it wrong"),
        httpx.UnsupportedProtocol("ftp"),
        ExceptionGroup("g", [httpx.ReadError("x"), ValueError("bug")]),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_bug_is_no_routing_failure(exc: BaseException) -> None:
    assert classify_exception(exc) is None


# ------------------------------------------------------------------ status


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, "request"),
        (404, "request"),
        (422, "request"),
        (401, "key"),
        (402, "key"),
        (403, "key"),
        (408, "target"),
        (409, "target"),
        (413, "context"),
        (429, "target"),
        (500, "target"),
        (502, "target"),
        (503, "target"),
        (504, "target"),
        (529, "target"),
    ],
)
def test_a_bare_status_implies_a_class(status: int, cls: str) -> None:
    assert status_class(status) == cls


# ----------------------------------------------------------------- backoff


@pytest.mark.parametrize("attempt", [1, 2, 3, 4, 5, 8, 30])
def test_backoff_is_jittered_exponential_between_half_and_all_of_its_step(attempt: int) -> None:
    step = min(8.0, 0.5 * 2 ** (attempt - 1))
    assert backoff(attempt, None, lambda: 0.0) == step / 2
    assert backoff(attempt, None, lambda: 0.999999) == pytest.approx(step, rel=1e-5)
    assert step / 2 <= backoff(attempt, None, lambda: 0.5) < step


def test_backoff_grows_until_its_cap() -> None:
    waits = [backoff(a, None, lambda: 0.0) for a in range(1, 8)]
    assert waits == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert backoff(6, None, lambda: 0.0, base=1.0, factor=3.0, cap=20.0) == 10.0


def test_backoff_is_never_shorter_than_retry_after() -> None:
    assert backoff(1, 2.0, lambda: 0.0) == 2.0
    assert backoff(1, 2.0, lambda: 0.999999) == pytest.approx(2.2, rel=1e-5)
    assert backoff(5, 30.0, lambda: 0.5) == 31.5  # not capped: the caller weighs it
    assert backoff(4, 0.1, lambda: 0.0) == 2.0  # a short retry-after leaves the backoff
    assert backoff(1, 0.0, lambda: 0.0) == 0.25


def test_backoff_spreads_with_the_default_random() -> None:
    waits = {backoff(3) for _ in range(50)}
    assert len(waits) > 1 and all(1.0 <= w < 2.0 for w in waits)


def test_every_codec_implements_the_failure_hooks() -> None:
    for protocol in (CHAT, RESPONSES, ANTHROPIC, GEMINI):
        codec: Codec = get_codec(protocol)
        assert codec.failure_hint(500, b"").cls is None
        assert codec.stream_failure_hint(c.StreamError(status=500, kind="api_error", message="x"))
        assert codec.rate_limit_wait([], NOW) is None
