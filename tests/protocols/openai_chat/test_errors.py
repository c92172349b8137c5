"""OpenAI error bodies: rendering ProxyError and parsing upstream error bodies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxai_asgi.errors import ErrorKind, ProxyError
from proxai_asgi.protocols.openai_chat import CODEC
from proxai_asgi.protocols.openai_chat.errors import decode_openai_error, encode_openai_error
from tests.helpers.captures import load


@pytest.mark.parametrize(
    ("kind", "etype", "code"),
    [
        ("invalid_request", "invalid_request_error", None),
        ("authentication", "authentication_error", None),
        ("permission", "permission_error", None),
        ("not_found", "not_found_error", None),
        ("rate_limit", "rate_limit_error", None),
        ("request_too_large", "invalid_request_error", None),
        ("overloaded", "server_error", "overloaded"),
        ("api_error", "server_error", None),
        ("timeout", "timeout_error", None),
        ("bad_gateway", "server_error", "bad_gateway"),
        ("not_implemented", "invalid_request_error", "not_implemented"),
    ],
)
def test_encode_error_has_all_four_keys_with_type_and_code_from_kind(
    kind: ErrorKind, etype: str, code: str | None
) -> None:
    body = json.loads(CODEC.encode_error(ProxyError(500, "msg", kind=kind)))
    assert body == {"error": {"message": "msg", "type": etype, "param": None, "code": code}}


def test_encode_error_uses_the_errors_own_param_and_code() -> None:
    body = json.loads(
        encode_openai_error(ProxyError.invalid("bad field", param="messages[0].content"))
    )
    assert body["error"]["param"] == "messages[0].content"
    body = json.loads(encode_openai_error(ProxyError(429, "slow", code="rate_limit_exceeded")))
    assert body["error"] == {
        "message": "slow",
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limit_exceeded",
    }


def test_decode_openai_shape_keeps_message_type_code_and_param() -> None:
    body = (
        b'{"error":{"message":"context too long","type":"invalid_request_error",'
        b'"param":"messages","code":"context_length_exceeded"}}'
    )
    err = decode_openai_error(400, body)
    assert (err.status, err.kind, err.message, err.param, err.code) == (
        400,
        "invalid_request",
        "context too long",
        "messages",
        "context_length_exceeded",
    )


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            500,
            {"error": {"message": "m", "type": "server_error", "code": "overloaded"}},
            "overloaded",
        ),
        (500, {"error": {"message": "m", "type": "server_error", "code": None}}, "api_error"),
        (400, {"error": {"message": "m", "type": "not_found_error"}}, "not_found"),
        (
            429,
            {"error": {"message": "m", "type": "tokens", "code": "rate_limit_exceeded"}},
            "rate_limit",
        ),
        (418, {"error": {"message": "m", "type": "teapot"}}, "invalid_request"),
        (503, {"error": {"message": "m", "type": "invalid_request_error"}}, "overloaded"),
    ],
)
def test_decode_error_kind_from_type_where_it_maps_else_from_status(
    status: int, body: dict[str, Any], kind: str
) -> None:
    err = decode_openai_error(status, json.dumps(body).encode())
    assert (err.status, err.kind, err.message) == (status, kind, "m")


def test_decode_anthropic_shape_is_understood() -> None:
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    err = decode_openai_error(529, body)
    assert (err.status, err.kind, err.message) == (529, "overloaded", "Overloaded")
    err = decode_openai_error(
        500, b'{"type":"error","error":{"type":"overloaded_error","message":"busy"}}'
    )
    assert err.kind == "overloaded"


@pytest.mark.parametrize("index", [1, 2, 3], ids=lambda i: f"fragment{i - 1}")
def test_decode_error_bodies_quoted_in_real_issue_reports(index: int) -> None:
    fragment = load("errors_from_issue_reports_FRAGMENTS")["fragments"][index]
    err = decode_openai_error(fragment["status"], fragment["body"].encode())
    inner = json.loads(fragment["body"])["error"]
    assert err.status == 429 and err.kind == "rate_limit"
    assert err.message == inner["message"]


def test_decode_vllm_and_fastapi_shapes() -> None:
    err = decode_openai_error(
        400,
        b'{"object":"error","message":"bad model","type":"BadRequestError",'
        b'"param":null,"code":400}',
    )
    assert (err.kind, err.message, err.code) == ("invalid_request", "bad model", "400")
    err = decode_openai_error(422, b'{"detail":"field required"}')
    assert err.message == "field required"
    err = decode_openai_error(422, b'{"detail":[{"loc":["body"],"msg":"x"}]}')
    assert '"msg":"x"' in err.message
    err = decode_openai_error(500, b'{"error":"plain string"}')
    assert err.message == "plain string"


def test_decode_html_plain_and_empty_bodies_become_a_short_message() -> None:
    html = (
        b"<html><head><style>p{}</style><title>502 Bad Gateway</title></head>"
        b"<body>\n<h1>502   Bad\nGateway</h1>" + b"x" * 1000 + b"</body></html>"
    )
    err = decode_openai_error(502, html)
    assert err.message.startswith("upstream returned HTTP 502: 502 Bad Gateway 502 Bad Gateway x")
    assert len(err.message) <= len("upstream returned HTTP 502: ") + 300
    assert (err.status, err.kind) == (502, "bad_gateway")
    assert (
        decode_openai_error(503, b"Service Unavailable").message
        == "upstream returned HTTP 503: Service Unavailable"
    )
    assert decode_openai_error(504, b"").message == "upstream returned HTTP 504"
    assert decode_openai_error(404, b"   ").kind == "not_found"
    assert decode_openai_error(500, b"\xff\xfe garbage").status == 500


def test_encode_decode_round_trip_keeps_kind_message_and_code() -> None:
    kinds: list[ErrorKind] = [
        "invalid_request",
        "authentication",
        "rate_limit",
        "overloaded",
        "bad_gateway",
        "timeout",
    ]
    for kind in kinds:
        original = ProxyError(400, "m", kind=kind)
        back = decode_openai_error(400, encode_openai_error(original))
        assert (back.kind, back.message) == (kind, "m")
