"""A plain Starlette app; the middleware goes in the ``middleware`` list.

uvicorn examples.starlette_app:app
"""

from __future__ import annotations

import os

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route as StarletteRoute

from proxai_asgi import ProxaiMiddleware, Upstream


async def home(request: Request) -> PlainTextResponse:
    return PlainTextResponse("my app")


def create_app(upstream: Upstream) -> Starlette:
    return Starlette(
        routes=[StarletteRoute("/", home)],
        middleware=[Middleware(ProxaiMiddleware, upstream=upstream)],
    )


app = create_app(
    Upstream(
        "anthropic_messages",
        os.environ.get("PROXAI_UPSTREAM_URL", "https://api.anthropic.com"),
        api_key=os.environ.get("ANTHROPIC_API_KEY"),
    )
)
