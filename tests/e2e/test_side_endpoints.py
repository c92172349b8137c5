"""count_tokens and models: what Claude Code and the SDKs call besides generation."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from proxai_asgi import ProxaiMiddleware, Route, Upstream
from tests.helpers.servers import FakeUpstream, Reply, serve

JSON = [("content-type", "application/json")]
COUNT_ARGS = {
    "model": "claude-x",
    "system": "You are terse.",
    "messages": [{"role": "user", "content": "How many tokens is this sentence, roughly?"}],
    "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}],
}


def test_count_tokens_toward_a_non_anthropic_upstream_is_a_marked_local_estimate() -> None:
    fake = FakeUpstream()
    app = ProxaiMiddleware(fake, upstream=Upstream.inner_app("openai_chat_completions"))
    with serve(app) as base:
        a = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
        raw = a.messages.with_raw_response.count_tokens(**COUNT_ARGS)  # type: ignore[arg-type]
        assert raw.headers["x-proxai-token-count"] == "estimate"
        n = raw.parse().input_tokens
    text = "You are terse." + COUNT_ARGS["messages"][0]["content"] + "BashRun a command"  # type: ignore[index]
    assert len(text) // 8 < n < len(text)  # about four characters a token
    assert fake.seen == []  # the inner Chat service was never asked


def test_count_tokens_is_forwarded_to_an_anthropic_upstream_with_its_key() -> None:
    fake = FakeUpstream().push(Reply(200, JSON, [b'{"input_tokens":42}']))
    with serve(fake) as up_url:
        up = Upstream("anthropic_messages", up_url, api_key="sk-ant-up")
        with serve(ProxaiMiddleware(fake, routes=[Route("*", up, "claude-real")])) as base:
            a = anthropic.Anthropic(base_url=base, api_key="sk-client", max_retries=0)
            assert a.messages.count_tokens(**COUNT_ARGS).input_tokens == 42  # type: ignore[arg-type]
    seen = fake.seen[0]
    assert seen.path == "/v1/messages/count_tokens"
    assert seen.headers["x-api-key"] == "sk-ant-up"
    assert seen.json()["model"] == "claude-real"


def test_models_are_listed_in_the_openai_and_anthropic_shapes() -> None:
    listing = {"data": [{"id": "claude-opus-9"}, {"id": "gpt-4o"}, {"id": "claude-haiku-9"}]}
    fake = FakeUpstream().push(Reply(200, JSON, [json.dumps(listing).encode()]))
    with serve(fake) as up_url:
        claude = Upstream("anthropic_messages", up_url, api_key="sk-ant-up")
        local = Upstream.inner_app("openai_chat_completions")
        app = ProxaiMiddleware(fake, routes=[Route("claude-*", claude), Route("house", local)])
        with serve(app) as base:
            o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
            assert [m.id for m in o.models.list()] == ["claude-opus-9", "claude-haiku-9", "house"]
            a = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
            page = a.models.list()
            assert [m.id for m in page.data] == ["claude-opus-9", "claude-haiku-9", "house"]
            assert page.data[0].type == "model"
            # Other GET paths still reach the wrapped app.
            fake.push(Reply(200, [("content-type", "text/plain")], [b"inner"]))
            assert httpx.get(base + "/v1/other").text == "inner"
    assert fake.seen[0].path == "/v1/models"
    assert fake.seen[0].headers["x-api-key"] == "sk-ant-up"


def test_codex_asking_with_client_version_gets_the_models_key() -> None:
    fake = FakeUpstream()
    app = ProxaiMiddleware(fake, routes=[Route("house", Upstream.inner_app("anthropic_messages"))])
    with serve(app) as base:
        body = httpx.get(base + "/v1/models?client_version=0.169.0").json()
        plain = httpx.get(base + "/v1/models").json()
    assert [m["slug"] for m in body["models"]] == ["house"]
    assert [m["id"] for m in body["data"]] == ["house"]
    assert "models" not in plain


@pytest.mark.parametrize("lean", [True, False], ids=["default", "httpx"])
def test_a_glob_routes_listing_takes_the_same_transport_as_generation(lean: bool) -> None:
    """Issue 12: the side endpoints get their upstream through the one transport
    choice; by default that is the lean pool, which keeps the connection for later."""
    listing = {"data": [{"id": "gpt-9"}, {"id": "o9"}]}
    fake = FakeUpstream().push(Reply(200, JSON, [json.dumps(listing).encode()]))
    with serve(fake) as up_url:
        up = Upstream("openai_chat_completions", up_url + "/v1", api_key="sk-up")
        app = ProxaiMiddleware(fake, routes=[Route("gpt-*", up)], lean_http=lean)
        with serve(app) as base:
            o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
            assert [m.id for m in o.models.list()] == ["gpt-9"]
            if lean:
                assert app.lean is not None and app.lean.idle == 1
    seen = fake.seen[0]
    assert (seen.path, seen.body) == ("/v1/models", b"")
    assert seen.headers["authorization"] == "Bearer sk-up"


@pytest.mark.parametrize(
    "reply",
    [
        Reply(500, JSON, [b'{"error": {"message": "down"}}']),
        Reply(200, JSON, [b"<html>not json</html>"]),
        Reply(200, JSON, [b'{"data": "not a list"}']),
    ],
    ids=["500", "not-json", "wrong-shape"],
)
def test_a_listing_the_upstream_cannot_give_leaves_the_exact_routes(reply: Reply) -> None:
    fake = FakeUpstream().push(reply)
    with serve(fake) as up_url:
        up = Upstream("openai_chat_completions", up_url + "/v1")
        app = ProxaiMiddleware(fake, routes=[Route("gpt-*", up), Route("house", up)])
        with serve(app) as base:
            body = httpx.get(base + "/v1/models").json()
    assert [m["id"] for m in body["data"]] == ["house"]
