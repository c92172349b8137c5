"""Error bodies: ProxyError -> Anthropic error shape; any upstream body -> ProxyError."""

from __future__ import annotations

import json

import pytest
from anthropic.types.shared import ErrorResponse

from proxai_asgi.errors import ErrorKind, ProxyError
from proxai_asgi.protocols.anthropic_messages import CODEC
from tests.helpers import captures as cap


@pytest.mark.parametrize(
    ("kind", "etype"),
    [
        ("invalid_request", "invalid_request_error"),
        ("authentication", "authentication_error"),
        ("permission", "permission_error"),
        ("not_found", "not_found_error"),
        ("request_too_large", "request_too_large"),
        ("rate_limit", "rate_limit_error"),
        ("overloaded", "overloaded_error"),
        ("api_error", "api_error"),
        ("timeout", "api_error"),
        ("bad_gateway", "api_error"),
        ("not_implemented", "invalid_request_error"),
    ],
)
def test_errors_render_in_the_anthropic_shape_with_anthropic_types(
    kind: ErrorKind, etype: str
) -> None:
    raw = CODEC.encode_error(ProxyError(418, "msg", kind=kind))
    assert json.loads(raw) == {"type": "error", "error": {"type": etype, "message": "msg"}}
    if etype != "request_too_large":  # a documented API type the SDK's union lacks
        ErrorResponse.model_validate_json(raw)


@pytest.mark.parametrize(
    ("name", "status", "kind", "message"),
    [
        (
            "anthropic_err_400_invalid_request",
            400,
            "invalid_request",
            "This model does not support effort level 'xhigh'. Supported levels: high, low, "
            "max, medium.",
        ),
        (
            "anthropic_err_404_not_found_stream_request",
            404,
            "not_found",
            "model: this-model-does-not-exist-12345",
        ),
    ],
)
def test_upstream_error_captures_keep_status_and_message(
    name: str, status: int, kind: str, message: str
) -> None:
    err = CODEC.decode_error(status, cap.response_body(name))
    assert (err.status, err.kind, err.message) == (status, kind, message)


def test_rate_limit_and_overloaded_bodies_keep_their_kind() -> None:
    body = cap.load("errors_from_issue_reports_FRAGMENTS")["fragments"][1]["body"]
    err = CODEC.decode_error(429, body.encode())
    assert (err.status, err.kind) == (429, "rate_limit")
    assert err.message.startswith("This request would exceed the rate limit")
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    err = CODEC.decode_error(529, body)
    assert (err.status, err.kind, err.message) == (529, "overloaded", "Overloaded")


def test_openai_shaped_error_bodies_are_understood() -> None:
    body = cap.load("errors_from_issue_reports_FRAGMENTS")["fragments"][2]["body"]
    err = CODEC.decode_error(429, body.encode())
    assert err.kind == "rate_limit"
    assert err.message.startswith("Rate limit reached for gpt-4")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"error": "no such model"}', "no such model"),
        (b'{"message": "bad thing"}', "bad thing"),
        (b'{"detail": "Not Found"}', "Not Found"),
        (b'{"detail": [{"loc": ["body"], "msg": "x"}]}', '[{"loc":["body"],"msg":"x"}]'),
    ],
)
def test_loose_json_error_bodies_keep_their_message(body: bytes, message: str) -> None:
    assert CODEC.decode_error(422, body).message == message


@pytest.mark.parametrize(
    ("status", "body", "message", "kind"),
    [
        (
            503,
            b"<html><head><title>503</title></head>\n"
            b"<body><h1>Service   Unavailable</h1></body></html>",
            "upstream returned HTTP 503: 503 Service Unavailable",
            "overloaded",
        ),
        (502, b"Bad Gateway\n", "upstream returned HTTP 502: Bad Gateway", "bad_gateway"),
        (500, b"", "upstream returned HTTP 500", "api_error"),
        (401, b"\xff\xfe", "upstream returned HTTP 401: \ufffd\ufffd", "authentication"),
        (404, b"[1, 2]", "upstream returned HTTP 404: [1, 2]", "not_found"),
    ],
)
def test_non_json_error_bodies_become_a_short_message_and_a_kind_from_status(
    status: int, body: bytes, message: str, kind: str
) -> None:
    err = CODEC.decode_error(status, body)
    assert (err.status, err.message, err.kind) == (status, message, kind)


def test_long_text_bodies_are_cut_to_300_characters() -> None:
    err = CODEC.decode_error(500, b"x" * 5000)
    assert err.message == "upstream returned HTTP 500: " + "x" * 300
