"""A fake upstream for the end-to-end benches, speaking all four protocols on their own
paths: a long synthetic stream (``BENCH_DELTAS`` text deltas and two tool calls, one
frame per ASGI message) or a small non-streamed answer. A request whose model (in the
body or, for Gemini, the path) contains ``paced`` gets 0.2 ms between frames, so each
read downstream holds one frame, as a model's tokens arrive; one whose model contains
``short`` gets a stream of three deltas (for the time to a stream's first event).

    BENCH_DELTAS=4000 python -m uvicorn bench.servers.stream_upstream:app --port 9000
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from bench._common import frames, read_body, synthetic
from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from proxai_asgi.protocols import get_codec

_N = int(os.environ.get("BENCH_DELTAS", "4000"))
_PACED_N = int(os.environ.get("BENCH_PACED_DELTAS", "400"))
_PROTOCOLS: tuple[ProtocolName, ...] = (
    "openai_chat_completions",
    "openai_responses",
    "anthropic_messages",
    "gemini_generate_content",
)
_STREAMS = {p: frames(synthetic(p, _N)) for p in _PROTOCOLS}
_PACED = {p: frames(synthetic(p, _PACED_N)) for p in _PROTOCOLS}
_SHORT = {p: frames(synthetic(p, 3)) for p in _PROTOCOLS}
_ANSWER = c.Response(
    id="bench-1",
    model="bench",
    content=[c.Text(text="hi")],
    stop_reason="end_turn",
    usage=c.Usage(input_tokens=1, output_tokens=1),
)
_SMALL = {
    p: get_codec(p).encode_response(_ANSWER, c.Request(model="bench", messages=[]))
    for p in _PROTOCOLS
}


def protocol_of(path: str) -> ProtocolName:
    if path.endswith("/chat/completions"):
        return "openai_chat_completions"
    if path.endswith("/responses"):
        return "openai_responses"
    if path.endswith("/messages"):
        return "anthropic_messages"
    return "gemini_generate_content"


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = await read_body(receive)
    path: str = scope["path"]
    protocol = protocol_of(path)
    compact = body.replace(b" ", b"")
    stream = b'"stream":true' in compact or path.endswith(":streamGenerateContent")
    if not stream:
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": _SMALL[protocol]})
        return
    paced = b"paced" in compact or "paced" in path
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
    )
    short = b"short" in compact or "short" in path
    for frame in (_PACED if paced else _SHORT if short else _STREAMS)[protocol]:
        await send({"type": "http.response.body", "body": frame, "more_body": True})
        if paced:
            await asyncio.sleep(0.0002)
    await send({"type": "http.response.body", "body": b""})
