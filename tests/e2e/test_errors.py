"""Errors reach the client in its own protocol's shape, with the right status."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Upstream
from tests.helpers.captures import request_body
from tests.helpers.servers import FakeUpstream, Reply, serve

from .conftest import Stack

PATH = {
    "openai_chat_completions": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
    "anthropic_messages": "/v1/messages",
}
ALL = list(PATH)


def assert_shape(protocol: str, r: httpx.Response) -> str:
    """The error body is in ``protocol``'s shape; returns its message."""
    body = r.json()
    if protocol == "anthropic_messages":
        assert body["type"] == "error"
        assert set(body["error"]) >= {"type", "message"}
        assert body["error"]["type"] in {
            "invalid_request_error",
            "authentication_error",
            "permission_error",
            "not_found_error",
            "request_too_large",
            "rate_limit_error",
            "api_error",
            "overloaded_error",
        }
        return str(body["error"]["message"])
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return str(body["error"]["message"])


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize("protocol", ALL)
@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1,2]", "object"),
        (b'{"messages": []}', "model"),
        (b'{"model": 42}', "model"),
    ],
    ids=["invalid-json", "not-an-object", "missing-model", "model-wrong-type"],
)
def test_bad_request_body_is_a_400_in_the_client_shape(
    stack: Stack,
    fake: FakeUpstream,
    protocol: str,
    body: bytes,
    needle: str,
    inner: bool,
) -> None:
    proxy = stack.proxy(fake, protocol, inner=inner)  # type: ignore[arg-type]
    r = httpx.post(proxy + PATH[protocol], content=body)
    assert r.status_code == 400
    assert needle in assert_shape(protocol, r)
    assert fake.seen == []


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize("protocol", ALL)
def test_body_over_the_limit_is_a_413(
    stack: Stack, fake: FakeUpstream, protocol: str, inner: bool
) -> None:
    proxy = stack.proxy(fake, protocol, max_body_size=1000, inner=inner)  # type: ignore[arg-type]
    big = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]})
    r = httpx.post(proxy + PATH[protocol], content=big)
    assert r.status_code == 413
    assert_shape(protocol, r)


@pytest.mark.parametrize("protocol", ALL)
def test_unreachable_upstream_is_a_502(protocol: str) -> None:
    base = f"http://127.0.0.1:{_closed_port()}" + (
        "" if protocol == "anthropic_messages" else "/v1"
    )
    app = ProxaiMiddleware(_inner, upstream=Upstream(protocol, base))  # type: ignore[arg-type]
    with serve(app) as proxy:
        r = httpx.post(proxy + PATH[protocol], content=_body(protocol))
    assert r.status_code == 502
    assert "unreachable" in assert_shape(protocol, r)


@pytest.mark.parametrize("protocol", ALL)
def test_upstream_timeout_is_a_504(protocol: str) -> None:
    async def slow(scope: Any, receive: Any, send: Any) -> None:
        # never answers; ends when the proxy gives up and closes the connection
        while (await receive())["type"] != "http.disconnect":
            pass

    with serve(slow) as base:
        up = Upstream(protocol, base, read_timeout=0.3)  # type: ignore[arg-type]
        with serve(ProxaiMiddleware(_inner, upstream=up)) as proxy:
            r = httpx.post(proxy + PATH[protocol], content=_body(protocol), timeout=10)
    assert r.status_code == 504
    assert_shape(protocol, r)


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize("protocol", ALL)
def test_upstream_html_error_keeps_status_and_is_rendered_in_client_shape(
    stack: Stack,
    fake: FakeUpstream,
    protocol: str,
    inner: bool,
) -> None:
    other = (
        "openai_chat_completions" if protocol != "openai_chat_completions" else "anthropic_messages"
    )
    fake.push(
        Reply(
            503, [("content-type", "text/html")], [b"<html><body>Service Unavailable</body></html>"]
        )
    )
    proxy = stack.proxy(fake, other, inner=inner)  # type: ignore[arg-type]
    r = httpx.post(proxy + PATH[protocol], content=_body(protocol))
    assert r.status_code == 503
    assert "Service Unavailable" in assert_shape(protocol, r)
    assert "<" not in assert_shape(protocol, r)


def test_no_route_for_model_is_a_404_in_client_shape(fake: FakeUpstream) -> None:
    from proxai_asgi import Route

    app = ProxaiMiddleware(
        fake, routes=[Route("claude-*", Upstream.inner_app("anthropic_messages"))]
    )
    with serve(app) as proxy:
        r = httpx.post(proxy + "/v1/chat/completions", content=_body("openai_chat_completions"))
    assert r.status_code == 404
    assert "gpt-4o" in assert_shape("openai_chat_completions", r)


def test_other_paths_methods_reach_the_inner_app_untouched(fake: FakeUpstream) -> None:
    fake.push(Reply(200, [("content-type", "text/plain")], [b"inner says hi"]))
    app = ProxaiMiddleware(fake, upstream=Upstream.inner_app("anthropic_messages"), prefix="/llm")
    with serve(app) as proxy:
        assert httpx.get(proxy + "/anything").text == "inner says hi"
        assert httpx.get(proxy + "/llm/v1/messages").text == "inner says hi"
        # Without the prefix the LLM path is not ours either.
        assert httpx.post(proxy + "/v1/messages", content=b"{}").text == "inner says hi"
    assert [s.path for s in fake.seen] == ["/anything", "/llm/v1/messages", "/v1/messages"]


async def _inner(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _body(protocol: str) -> bytes:
    return request_body(
        {
            "openai_chat_completions": "chat_json_text_basic",
            "openai_responses": "responses_json_text_basic",
            "anthropic_messages": "anthropic_json_text_basic",
        }[protocol]
    )
