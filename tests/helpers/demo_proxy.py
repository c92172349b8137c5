"""The middleware before the demo model, for tests of what happens before any
translation (admission, origins, the WebSocket's limits): the request each client
protocol sends, and the middleware over HTTP or with the demo as the wrapped app."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.transport.upstream import ASGIApp

from .servers import serve

CHAT = "openai_chat_completions"
RESPONSES = "openai_responses"
ANTHROPIC = "anthropic_messages"
GEMINI = "gemini_generate_content"
CLIENTS = (CHAT, RESPONSES, ANTHROPIC, GEMINI)


def path_for(client: str, stream: bool) -> str:
    """Where ``client`` posts (a Gemini client names the model and the stream there)."""
    if client == GEMINI:
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"/v1beta/models/m:{method}"
    return {CHAT: "/v1/chat/completions", RESPONSES: "/v1/responses"}.get(client, "/v1/messages")


def body_for(client: str, stream: bool) -> dict[str, Any]:
    """A one-turn "hi" in ``client``'s protocol."""
    if client == GEMINI:
        return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    if client == RESPONSES:
        body: dict[str, Any] = {"model": "m", "input": "hi"}
    else:
        body = {"model": "m", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
    return body | {"stream": True} if stream else body


def middleware(
    model: ASGIApp, transport: str, stack: ExitStack, **options: Any
) -> ProxaiMiddleware:
    """The middleware wrapping ``model`` (a Chat upstream): reached over HTTP on its
    own loopback server (``http``, started in ``stack``) or as the wrapped app."""
    if transport == "inner":
        return ProxaiMiddleware(model, upstream=Upstream.inner_app(CHAT), **options)
    url = stack.enter_context(serve(model))
    return ProxaiMiddleware(model, upstream=Upstream(CHAT, url + "/v1"), **options)
