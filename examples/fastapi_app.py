"""A FastAPI app with its own routes, plus the LLM paths served by proxai_asgi.

PROXAI_UPSTREAM_URL=http://127.0.0.1:8000/v1 uvicorn examples.fastapi_app:app
"""

from __future__ import annotations

import os

from fastapi import FastAPI

from proxai_asgi import ProxaiMiddleware, Upstream


def create_app(upstream: Upstream) -> FastAPI:
    app = FastAPI()

    @app.get("/hello")
    def hello() -> dict[str, str]:
        return {"hello": "world"}

    app.add_middleware(ProxaiMiddleware, upstream=upstream)
    return app


app = create_app(
    Upstream(
        "openai_chat_completions",
        os.environ.get("PROXAI_UPSTREAM_URL", "http://127.0.0.1:8000/v1"),
        api_key=os.environ.get("PROXAI_API_KEY"),
    )
)
