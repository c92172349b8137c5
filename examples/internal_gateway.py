"""An internal gateway that serves only Chat Completions, now also serving Anthropic
Messages and OpenAI Responses clients: the wrapped app itself is the upstream, so
translated requests go down the ASGI chain with no network hop.

    uvicorn examples.internal_gateway:app
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route as StarletteRoute

from proxai_asgi import ProxaiMiddleware, Upstream


async def chat_completions(request: Request) -> Response:
    """Stands in for the gateway's real model call: answers in upper case."""
    body = await request.json()
    text = str(body["messages"][-1]["content"]).upper()
    base = {"id": "chatcmpl-gw1", "created": int(time.time()), "model": body["model"]}
    if not body.get("stream"):
        return JSONResponse(
            {
                **base,
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
            }
        )

    async def chunks() -> AsyncIterator[str]:
        def chunk(delta: dict[str, object], finish: str | None = None) -> str:
            data = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(data)}\n\n"

        yield chunk({"role": "assistant", "content": ""})
        for word in text.split(" "):
            yield chunk({"content": word + " "})
        yield chunk({}, "stop")
        usage = {
            **base,
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        }
        yield f"data: {json.dumps(usage)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(chunks(), media_type="text/event-stream")


gateway = Starlette(
    routes=[StarletteRoute("/v1/chat/completions", chat_completions, methods=["POST"])]
)
app = ProxaiMiddleware(gateway, upstream=Upstream.inner_app("openai_chat_completions"))
