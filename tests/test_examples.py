"""Every example in examples/ works as documented: served by uvicorn on loopback,
called with the official SDKs, with the demo upstream as the HTTP upstream."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from proxai_asgi import Upstream
from proxai_asgi.server.demo import DemoUpstream
from tests.helpers.servers import serve


@pytest.fixture(scope="module")
def demo_url() -> Iterator[str]:
    with serve(DemoUpstream()) as url:
        yield url


def ask_anthropic(base: str, text: str, stream: bool = True) -> str:
    a = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
    args = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": text}]}
    if stream:
        with a.messages.stream(**args) as s:  # type: ignore[arg-type]
            return s.get_final_text()
    msg = a.messages.create(**args)  # type: ignore[arg-type]
    return "".join(b.text for b in msg.content if b.type == "text")


def ask_responses(base: str, text: str, model: str = "gpt-x") -> str:
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    with o.responses.stream(model=model, input=text) as s:
        return s.get_final_response().output_text


def ask_chat(base: str, text: str, model: str = "m") -> str:
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    out = o.chat.completions.create(model=model, messages=[{"role": "user", "content": text}])
    return out.choices[0].message.content or ""


def test_fastapi_example_keeps_its_routes_and_serves_anthropic_clients(demo_url: str) -> None:
    from examples.fastapi_app import create_app

    app = create_app(Upstream("openai_chat_completions", demo_url + "/v1"))
    with serve(app) as base:
        assert httpx.get(base + "/hello").json() == {"hello": "world"}
        assert ask_anthropic(base, "hi fastapi") == "You said: hi fastapi"
        assert ask_responses(base, "and responses") == "You said: and responses"


def test_starlette_example_serves_openai_clients_from_an_anthropic_upstream(demo_url: str) -> None:
    from examples.starlette_app import create_app

    app = create_app(Upstream("anthropic_messages", demo_url))
    with serve(app) as base:
        assert httpx.get(base + "/").text == "my app"
        assert ask_chat(base, "hi starlette") == "You said: hi starlette"
        assert ask_responses(base, "streamed") == "You said: streamed"


def test_django_example_wraps_get_asgi_application(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROXAI_UPSTREAM_URL", demo_url)
    monkeypatch.setenv("PROXAI_UPSTREAM_PROTOCOL", "anthropic_messages")
    module = importlib.import_module("examples.django_project.asgi")
    module = importlib.reload(module)
    with serve(module.application) as base:
        assert httpx.get(base + "/status/").json() == {"django": "ok"}
        assert ask_chat(base, "hi django") == "You said: hi django"
        assert ask_anthropic(base, "pass through", stream=False) == "You said: pass through"


def test_internal_gateway_example_serves_anthropic_and_responses_clients_in_process() -> None:
    from examples.internal_gateway import app

    with serve(app) as base:
        assert ask_chat(base, "native chat") == "NATIVE CHAT"
        assert ask_anthropic(base, "hello gateway") == "HELLO GATEWAY "
        assert ask_anthropic(base, "hello gateway", stream=False) == "HELLO GATEWAY"
        assert ask_responses(base, "from responses") == "FROM RESPONSES "


def test_multi_route_example_routes_by_model(demo_url: str) -> None:
    from examples.multi_route import create_app

    app = create_app(demo_url, demo_url + "/v1")
    with serve(app) as base:
        # claude-* -> Anthropic upstream (the demo), translated from Chat.
        assert ask_chat(base, "to claude", model="claude-3") == "You said: to claude"
        # gpt-* -> Responses upstream (the demo), translated from Anthropic.
        a = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
        msg = a.messages.create(
            model="gpt-5", max_tokens=32, messages=[{"role": "user", "content": "to gpt"}]
        )
        assert msg.content[0].text == "You said: to gpt"  # type: ignore[union-attr]
        # anything else -> the app's own Chat service, with the model rewritten.
        assert ask_responses(base, "local one", model="whatever") == "LOCAL ONE "
