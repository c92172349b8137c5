"""A gateway that routes by model: Claude models to Anthropic, GPT models to OpenAI,
everything else to its own in-process Chat Completions service.

    ANTHROPIC_API_KEY=... OPENAI_API_KEY=... uvicorn examples.multi_route:app
"""

from __future__ import annotations

import os

from proxai_asgi import ProxaiMiddleware, Route, Upstream

from .internal_gateway import gateway


def create_app(anthropic_url: str, openai_url: str) -> ProxaiMiddleware:
    claude = Upstream(
        "anthropic_messages",
        anthropic_url,
        api_key=os.environ.get("ANTHROPIC_API_KEY"),
        name="claude",
    )
    gpt = Upstream(
        "openai_responses", openai_url, api_key=os.environ.get("OPENAI_API_KEY"), name="openai"
    )
    local = Upstream.inner_app("openai_chat_completions", name="local")
    return ProxaiMiddleware(
        gateway,
        routes=[
            Route(model="claude-*", upstream=claude),
            Route(model="gpt-*", upstream=gpt),
            Route(model="*", upstream=local, model_rewrite="house-model"),
        ],
    )


app = create_app("https://api.anthropic.com", "https://api.openai.com/v1")
