"""The wrapped app as the upstream (``Upstream.inner_app``): what the middleware costs in
process, with no network and no server around it, per small non-streamed request and
per streamed upstream event, pass-through against translated.

The app answers every protocol from the codecs' own encoders; the middleware is called
as an ASGI server would call it; the client side only counts messages. Rounds are
interleaved (every pair once per round), medians of ``--rounds``.

    .venv/bin/python bench/inner_app.py          # --rounds 7 --requests 1000 --deltas 4000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._common import read_body  # noqa: E402
from proxai_asgi import ProxaiMiddleware, Upstream  # noqa: E402
from proxai_asgi import canonical as c  # noqa: E402
from proxai_asgi.codec import unfold  # noqa: E402
from proxai_asgi.protocols import get_codec  # noqa: E402

SHORT = {
    "chat": "openai_chat_completions",
    "responses": "openai_responses",
    "anthropic": "anthropic_messages",
    "gemini": "gemini_generate_content",
}
PATH = {
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/m:generateContent",
}
REQUEST = c.Request(model="m", messages=[c.Message(role="user", content=[c.Text(text="hi")])])
Message = dict[str, Any]


def client_body(client: str, stream: bool) -> bytes:
    if client == "gemini":
        return json.dumps({"contents": [{"role": "user", "parts": [{"text": "Say hi"}]}]}).encode()
    body: dict[str, Any] = {"model": "m", "stream": stream}
    if client == "responses":
        body.update(input="Say hi", max_output_tokens=50)
    else:
        body.update(messages=[{"role": "user", "content": "Say hi"}], max_tokens=50)
    return json.dumps(body).encode()


def client_path(client: str, stream: bool) -> str:
    if client == "gemini" and stream:
        return "/v1beta/models/m:streamGenerateContent?alt=sse"
    return PATH[client]


def answer(upstream: str, deltas: int) -> tuple[bytes, list[bytes]]:
    """The upstream's non-streamed answer, and its stream as one frame per event."""
    codec = get_codec(SHORT[upstream])  # type: ignore[arg-type]
    text = [f"w{i} " for i in range(deltas)]
    whole = c.Response(
        id="r1",
        model="m",
        content=[c.Text(text="".join(text[:3]))],
        stop_reason="end_turn",
        usage=c.Usage(input_tokens=3, output_tokens=3),
    )
    events = unfold(whole)
    head, tail = events[:2], events[3:]  # MessageStart, BlockStart | BlockStop, Finish
    events = [*head, *(c.BlockDelta(index=0, text=t) for t in text), *tail]
    enc = codec.stream_encoder(REQUEST)
    frames = [f for f in (enc.encode(e) for e in events) if f]
    return codec.encode_response(whole, REQUEST), frames


def wrapped(upstream: str, deltas: int) -> Callable[..., Awaitable[None]]:
    whole, frames = answer(upstream, deltas)
    sse = [(b"content-type", b"text/event-stream")]
    js = [(b"content-type", b"application/json"), (b"content-length", str(len(whole)).encode())]

    async def app(scope: Message, receive: Any, send: Any) -> None:
        body = await read_body(receive)
        asked = json.loads(body).get("stream") is True
        streamed = asked or scope["path"].endswith(":streamGenerateContent")
        if not streamed:
            await send({"type": "http.response.start", "status": 200, "headers": js})
            await send({"type": "http.response.body", "body": whole})
            return
        await send({"type": "http.response.start", "status": 200, "headers": sse})
        for f in frames:
            await send({"type": "http.response.body", "body": f, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


async def call(app: Any, client: str, stream: bool) -> int:
    raw = client_body(client, stream)
    path, _, query = client_path(client, stream).partition("?")
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": [(b"content-type", b"application/json")],
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 5),
        "root_path": "",
        "state": {},
    }
    given = False
    never = asyncio.Event()

    async def receive() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await never.wait()
        return {"type": "http.disconnect"}

    status = 0
    sent = 0

    async def send(m: Message) -> None:
        nonlocal status, sent
        if m["type"] == "http.response.start":
            status = m["status"]
        else:
            sent += len(m.get("body", b""))

    await app(scope, receive, send)
    return status if sent else -1


async def main(rounds: int, requests: int, deltas: int) -> None:
    apps = {
        up: ProxaiMiddleware(wrapped(up, deltas), upstream=Upstream.inner_app(SHORT[up]))  # type: ignore[arg-type]
        for up in SHORT
    }
    per_request: dict[tuple[str, str], list[float]] = {}
    per_event: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for up, app in apps.items():
            for client in SHORT:
                assert await call(app, client, False) == 200
                t = time.perf_counter()
                for _ in range(requests):
                    await call(app, client, False)
                per_request.setdefault((client, up), []).append(
                    (time.perf_counter() - t) / requests * 1e6
                )
                t = time.perf_counter()
                assert await call(app, client, True) == 200
                per_event.setdefault((client, up), []).append(
                    (time.perf_counter() - t) / deltas * 1e6
                )
    print("| client <- upstream | µs per request | µs per streamed event |")
    print("|---|---:|---:|")
    for (client, up), times in per_request.items():
        tag = " (pass-through)" if client == up else ""
        req, ev = statistics.median(times), statistics.median(per_event[(client, up)])
        print(f"| {client} <- {up}{tag} | {req:.1f} | {ev:.2f} |")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--deltas", type=int, default=4000)
    a = p.parse_args()
    asyncio.run(main(a.rounds, a.requests, a.deltas))
