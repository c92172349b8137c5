"""An upstream's non-2xx answer reaches the client with the same status and the
upstream's message, in the client's own error shape: the same over both transports
(HTTP upstream and the wrapped app), streamed and not, in every translated direction."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.helpers.servers import FakeUpstream, Reply

from .conftest import Stack
from .test_errors import assert_shape

PROTOCOLS = ["openai_chat_completions", "openai_responses", "anthropic_messages"]
PAIRS = [(c, u) for c in PROTOCOLS for u in PROTOCOLS if c != u]
GEMINI = "gemini_generate_content"
# Every translated direction, Gemini's included (for the error path).
ALL_PAIRS = PAIRS + [(GEMINI, u) for u in PROTOCOLS] + [(c, GEMINI) for c in PROTOCOLS]
GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
STATUSES = [400, 401, 403, 404, 413, 429, 500, 503]
ANTHROPIC_TYPE = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
}


def upstream_error(protocol: str, status: int) -> bytes:
    message = f"upstream refused with {status}"
    if protocol == GEMINI:
        err = {"code": status, "message": message, "status": GOOGLE_STATUS[status]}
        return json.dumps({"error": err}).encode()
    if protocol == "anthropic_messages":
        err = {"type": ANTHROPIC_TYPE[status], "message": message}
        return json.dumps({"type": "error", "error": err}).encode()
    err = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    return json.dumps({"error": err}).encode()


def client_request(client: str, stream: bool) -> tuple[str, dict[str, object]]:
    if client == GEMINI:  # the model and the stream are in the path
        call = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"/v1beta/models/m:{call}", {
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}]
        }
    if client == "anthropic_messages":
        body: dict[str, object] = {
            "model": "m",
            "max_tokens": 20,
            "messages": [{"role": "user", "content": "hi"}],
        }
        path = "/v1/messages"
    elif client == "openai_responses":
        body, path = {"model": "m", "input": "hi"}, "/v1/responses"
    else:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        path = "/v1/chat/completions"
    if stream:
        body["stream"] = True
    return path, body


def client_error_message(client: str, r: httpx.Response) -> str:
    """The error body in the client's shape (Google's for Gemini clients)."""
    if client != GEMINI:
        return assert_shape(client, r)
    err = r.json()["error"]
    assert err["code"] == r.status_code and isinstance(err["status"], str)
    return str(err["message"])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize(("client", "upstream"), ALL_PAIRS)
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_upstream_error_keeps_status_and_message_in_the_client_shape_on_both_transports(
    stack: Stack,
    fake: FakeUpstream,
    inner: bool,
    client: str,
    upstream: str,
    status: int,
    stream: bool,
) -> None:
    fake.push(
        Reply(status, [("content-type", "application/json")], [upstream_error(upstream, status)])
    )
    # No retries here (this is about the error's shape; tests/routing/ retries).
    proxy = stack.proxy(fake, upstream, inner=inner, max_retries=0)  # type: ignore[arg-type]
    path, body = client_request(client, stream)
    r = httpx.post(proxy + path, json=body, timeout=20)
    assert r.status_code == status
    assert r.headers["content-type"].startswith("application/json")
    assert f"upstream refused with {status}" in client_error_message(client, r)
    assert len(fake.seen) == 1


# A 2xx that is not an answer of the upstream's protocol: some other JSON (a list from
# a misrouted path, a gateway's default document) or another protocol's answer.
NOT_AN_ANSWER = {
    "openai_chat_completions": [b'{"object":"list","data":[]}', b'{"id":"x","object":"x"}'],
    "openai_responses": [
        b'{"object":"list","data":[]}',
        b'{"id":"chatcmpl-1","object":"chat.completion","choices":[]}',
    ],
    "anthropic_messages": [b'{"object":"list","data":[]}', b'{"id":"msg_1","type":"message"}'],
}
NOT_AN_ANSWER["gemini_generate_content"] = [b'{"object":"list","data":[]}', b'{"candidates":[]}']
WRONG_SHAPES = [(c, u, i) for c, u in PAIRS for i in range(2)] + [
    (c, "gemini_generate_content", i) for c in PROTOCOLS for i in range(2)
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("client", "upstream", "shape"), WRONG_SHAPES)
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_2xx_that_is_not_an_answer_of_the_upstreams_protocol_is_a_502_in_the_client_shape(
    stack: Stack,
    fake: FakeUpstream,
    inner: bool,
    client: str,
    upstream: str,
    shape: int,
    stream: bool,
) -> None:
    body = NOT_AN_ANSWER[upstream][shape]
    fake.push(Reply(200, [("content-type", "application/json")], [body]))
    proxy = stack.proxy(fake, upstream, inner=inner, max_retries=0)  # type: ignore[arg-type]
    path, request = client_request(client, stream)
    r = httpx.post(proxy + path, json=request, timeout=20)
    assert r.status_code == 502
    assert_shape(client, r)


@pytest.mark.parametrize("status", ["cancelled", "queued", "in_progress"])
@pytest.mark.parametrize("client", ["openai_chat_completions", "anthropic_messages"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_an_unfinished_responses_answer_is_never_a_normal_stop(
    stack: Stack, fake: FakeUpstream, inner: bool, client: str, status: str
) -> None:
    """RS-19 as the client sees it: a Responses answer that is cancelled, queued or in
    progress has no stop reason, so the client gets a 502, not ``end_turn``/``stop``."""
    item = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "in_progress",
        "content": [{"type": "output_text", "text": "Hel", "annotations": []}],
    }
    body = {"id": "resp_1", "object": "response", "status": status, "output": [item]}
    fake.push(Reply(200, [("content-type", "application/json")], [json.dumps(body).encode()]))
    proxy = stack.proxy(fake, "openai_responses", inner=inner, max_retries=0, continuation="off")
    path, request = client_request(client, False)
    r = httpx.post(proxy + path, json=request, timeout=20)
    assert r.status_code == 502
    assert status in assert_shape(client, r)
