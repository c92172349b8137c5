"""Same protocol on both sides: bytes in, bytes out, streamed as they arrive; served
by uvicorn on loopback, with an HTTP upstream and with the wrapped app as upstream."""

from __future__ import annotations

import json
import time

import anthropic
import httpx
import openai
import pytest

from tests.helpers.captures import load, request_body, response_body
from tests.helpers.servers import FakeUpstream, Reply, reply_from_capture

from .conftest import Stack

CLIENT_PATH = {
    "openai_chat_completions": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
    "anthropic_messages": "/v1/messages",
}
PROTOCOL_OF = {
    "chat": "openai_chat_completions",
    "responses": "openai_responses",
    "anthropic": "anthropic_messages",
}
OK_CAPTURES = [
    "chat_json_text_basic",
    "chat_json_parallel_tool_calls",
    "chat_sse_text_basic_include_usage",
    "chat_sse_parallel_tool_calls",
    "responses_json_text_basic",
    "responses_sse_text_basic",
    "responses_sse_reasoning_summary",
    "anthropic_json_text_basic",
    "anthropic_sse_text_basic",
    "anthropic_sse_thinking_signature_delta",
]


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize("name", OK_CAPTURES)
def test_pass_through_forwards_request_and_response_bytes_unchanged(
    stack: Stack, fake: FakeUpstream, name: str, inner: bool
) -> None:
    protocol = PROTOCOL_OF[name.split("_")[0]]
    fake.push(reply_from_capture(name))
    proxy = stack.proxy(fake, protocol, inner=inner)
    body = request_body(name)
    r = httpx.post(
        proxy + CLIENT_PATH[protocol], content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 200
    assert r.content == response_body(name)
    assert fake.seen[0].body == body


def test_pass_through_streams_each_event_before_the_upstream_finishes(
    stack: Stack, fake: FakeUpstream
) -> None:
    fake.push(reply_from_capture("anthropic_sse_text_basic", delay=0.25))
    proxy = stack.proxy(fake, "anthropic_messages")
    t0 = time.monotonic()
    first = None
    with httpx.stream(
        "POST", proxy + "/v1/messages", content=request_body("anthropic_sse_text_basic")
    ) as r:
        for chunk in r.iter_raw():
            if chunk and first is None:
                first = time.monotonic() - t0
    total = time.monotonic() - t0
    assert first is not None
    # Eight frames 0.25 s apart: the first must arrive long before the last. (The
    # frames before the first content block are held until it comes, at 0.5 s, so
    # that a failure before any content can go to another target unseen.)
    assert first < 1.0 < total


def test_model_rewrite_changes_only_the_model_bytes(stack: Stack, fake: FakeUpstream) -> None:
    fake.push(reply_from_capture("chat_json_text_basic"))
    proxy = stack.proxy(fake, "openai_chat_completions", model_rewrite="Qwen/Qwen3-8B")
    body = b'{"model": "gpt-4o",  "messages":[{"role":"user","content":"hi","model":"keep"}]}'
    httpx.post(proxy + "/v1/chat/completions", content=body)
    assert fake.seen[0].body == body.replace(b'"gpt-4o"', b'"Qwen/Qwen3-8B"', 1)


def test_openai_sdk_chat_pass_through(stack: Stack, fake: FakeUpstream) -> None:
    fake.push(reply_from_capture("chat_json_parallel_tool_calls"))
    proxy = stack.proxy(fake, "openai_chat_completions")
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="sk-client", max_retries=0)
    req = load("chat_json_parallel_tool_calls")["request"]["body"]
    out = client.chat.completions.create(**req)
    calls = out.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["secret_retrieval_tool"] * 2
    assert out.choices[0].finish_reason == "tool_calls"


def test_openai_sdk_chat_stream_pass_through(stack: Stack, fake: FakeUpstream) -> None:
    fake.push(reply_from_capture("chat_sse_text_basic_include_usage"))
    proxy = stack.proxy(fake, "openai_chat_completions")
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="sk-client", max_retries=0)
    req = load("chat_sse_text_basic_include_usage")["request"]["body"]
    with client.chat.completions.stream(**{k: v for k, v in req.items() if k != "stream"}) as s:
        final = s.get_final_completion()
    assert "4242" in (final.choices[0].message.content or "").replace(",", "")
    assert final.usage is not None and final.usage.total_tokens > 0


def test_openai_sdk_responses_stream_pass_through(stack: Stack, fake: FakeUpstream) -> None:
    fake.push(reply_from_capture("responses_sse_text_basic"))
    proxy = stack.proxy(fake, "openai_responses", inner=True)
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="sk-client", max_retries=0)
    req = load("responses_sse_text_basic")["request"]["body"]
    with client.responses.stream(**{k: v for k, v in req.items() if k != "stream"}) as s:
        final = s.get_final_response()
    assert "4242" in final.output_text.replace(",", "")


def test_anthropic_sdk_stream_pass_through(stack: Stack, fake: FakeUpstream) -> None:
    fake.push(reply_from_capture("anthropic_sse_thinking_signature_delta"))
    proxy = stack.proxy(fake, "anthropic_messages")
    client = anthropic.Anthropic(base_url=proxy, api_key="sk-ant-client", max_retries=0)
    req = load("anthropic_sse_thinking_signature_delta")["request"]["body"]
    with client.messages.stream(**{k: v for k, v in req.items() if k != "stream"}) as s:
        final = s.get_final_message()
    kinds = [b.type for b in final.content]
    assert kinds[0] == "thinking" and "text" in kinds
    assert final.content[0].signature  # type: ignore[union-attr]


def test_upstream_status_and_rate_limit_headers_are_preserved(
    stack: Stack, fake: FakeUpstream
) -> None:
    body = json.dumps(
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    ).encode()
    fake.push(
        Reply(
            429,
            [
                ("content-type", "application/json"),
                ("retry-after", "7"),
                ("request-id", "req_1"),
                ("anthropic-ratelimit-requests-remaining", "0"),
                ("connection", "close"),
            ],
            [body],
        )
    )
    proxy = stack.proxy(fake, "anthropic_messages", max_retries=0)
    r = httpx.post(proxy + "/v1/messages", content=request_body("anthropic_json_text_basic"))
    assert r.status_code == 429
    assert r.content == body
    assert r.headers["retry-after"] == "7"
    assert r.headers["request-id"] == "req_1"
    assert r.headers["anthropic-ratelimit-requests-remaining"] == "0"


def test_hop_by_hop_and_proxy_headers_are_not_forwarded(stack: Stack, fake: FakeUpstream) -> None:
    fake.push(reply_from_capture("chat_json_text_basic"))
    proxy = stack.proxy(fake, "openai_chat_completions")
    httpx.post(
        proxy + "/v1/chat/completions",
        content=request_body("chat_json_text_basic"),
        headers={
            "x-forwarded-for": "10.9.9.9",
            "proxy-authorization": "Basic abc",
            "te": "trailers",
            "x-custom": "kept",
        },
    )
    seen = fake.seen[0].headers
    assert "x-forwarded-for" not in seen and "proxy-authorization" not in seen and "te" not in seen
    assert seen["x-custom"] == "kept"


def test_configured_openai_key_replaces_client_credentials(
    stack: Stack, fake: FakeUpstream
) -> None:
    fake.push(reply_from_capture("chat_json_text_basic"))
    proxy = stack.proxy(fake, "openai_chat_completions", api_key="sk-upstream")
    httpx.post(
        proxy + "/v1/chat/completions",
        content=request_body("chat_json_text_basic"),
        headers={"authorization": "Bearer sk-client", "x-api-key": "sk-client2"},
    )
    seen = fake.seen[0].headers
    assert seen["authorization"] == "Bearer sk-upstream"
    assert "x-api-key" not in seen


def test_configured_anthropic_key_uses_x_api_key_and_default_version(
    stack: Stack, fake: FakeUpstream
) -> None:
    fake.push(reply_from_capture("anthropic_json_text_basic"))
    proxy = stack.proxy(fake, "anthropic_messages", api_key="sk-ant-upstream")
    httpx.post(
        proxy + "/v1/messages",
        content=request_body("anthropic_json_text_basic"),
        headers={"authorization": "Bearer sk-client"},
    )
    seen = fake.seen[0].headers
    assert seen["x-api-key"] == "sk-ant-upstream"
    assert "authorization" not in seen
    assert seen["anthropic-version"] == "2023-06-01"


def test_client_credential_and_anthropic_headers_forwarded_without_key(
    stack: Stack, fake: FakeUpstream
) -> None:
    fake.push(reply_from_capture("anthropic_json_text_basic"))
    proxy = stack.proxy(fake, "anthropic_messages")
    httpx.post(
        proxy + "/v1/messages?beta=true",
        content=request_body("anthropic_json_text_basic"),
        headers={
            "x-api-key": "sk-ant-client",
            "anthropic-version": "2024-01-01",
            "anthropic-beta": "context-management-2025-06-27",
        },
    )
    seen = fake.seen[0]
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == "sk-ant-client"
    assert seen.headers["anthropic-version"] == "2024-01-01"
    assert seen.headers["anthropic-beta"] == "context-management-2025-06-27"


@pytest.mark.parametrize("server", ["asyncio", "uvloop"])
def test_client_disconnect_mid_stream_closes_the_upstream_request(
    stack: Stack, fake: FakeUpstream, server: str
) -> None:
    fake.push(reply_from_capture("chat_sse_max_tokens_length", delay=0.2))
    proxy = stack.proxy(fake, "openai_chat_completions", server=server)
    with httpx.stream(
        "POST", proxy + "/v1/chat/completions", content=request_body("chat_sse_max_tokens_length")
    ) as r:
        for chunk in r.iter_raw():
            if chunk:
                break
    assert fake.cancelled.wait(5), "the upstream never saw the client go away"
    assert not fake.finished.is_set()


def test_client_disconnect_reaches_the_inner_app_upstream(stack: Stack, fake: FakeUpstream) -> None:
    fake.push(reply_from_capture("responses_sse_text_basic", delay=0.2))
    proxy = stack.proxy(fake, "openai_responses", inner=True)
    with httpx.stream(
        "POST", proxy + "/v1/responses", content=request_body("responses_sse_text_basic")
    ) as r:
        for chunk in r.iter_raw():
            if chunk:
                break
    assert fake.cancelled.wait(5)
