"""A scripted model behind the proxy for the proxy-run web search: it speaks one
protocol natively (Chat Completions by default) and, offered the proxy's search
function, calls it once, then answers citing the first result as ``[1]``.

``mode``: "search" (the above), "always" (calls the search every time: the loop's
bound), "client_tool" (calls the search and the client's first tool together),
"plain" (answers at once). Every decoded request is kept in ``requests``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName, unfold
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols import get_codec

QUERY = "python 3.14 release date"
ANSWER = "Python 3.14 came out in October 2025 [1]."
FAILED = "I could not search the web, so I cannot say."


@dataclass
class SearchModel:
    protocol: ProtocolName = "openai_chat_completions"
    mode: str = "search"
    requests: list[c.Request] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def answer(self, req: c.Request, n: int) -> c.Response:
        names = [t.name for t in req.tools]
        search = next((t for t in names if t.endswith("web_search")), None)
        results = [p for m in req.messages for p in m.content if isinstance(p, c.ToolResult)]
        content: list[c.Part]
        usage = c.Usage(input_tokens=100 * n, output_tokens=10)
        if search is not None and (self.mode == "always" or (self.mode != "plain" and not results)):
            content = [
                c.ToolCall(id=f"call_s{n}", name=search, arguments=json.dumps({"query": QUERY}))
            ]
            if self.mode == "client_tool":
                other = next(t for t in names if t != search)
                content.append(c.ToolCall(id=f"call_c{n}", name=other, arguments="{}"))
            return c.Response(
                id=f"chat{n}", model=req.model, content=content, stop_reason="tool_use", usage=usage
            )
        last = results[-1] if results else None
        failed = last is not None and (last.is_error or "unavailable" in _text(last))
        text = FAILED if failed else ANSWER
        return c.Response(
            id=f"chat{n}",
            model=req.model,
            content=[c.Text(text=text)],
            stop_reason="end_turn",
            usage=usage,
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        codec = get_codec(self.protocol)
        req = codec.decode_request(body, TranslationReport(lossy=True))
        self.requests.append(req)
        self.bodies.append(json.loads(body))
        response = self.answer(req, len(self.requests))
        if not req.stream:
            data = codec.encode_response(response, req)
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": data})
            return
        encoder = codec.stream_encoder(req)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for ev in unfold(response):
            if isinstance(ev, c.BlockDelta) and len(ev.text) > 8:
                for piece in re.findall(r".{1,8}", ev.text, re.S):
                    data = encoder.encode(c.BlockDelta(index=ev.index, text=piece))
                    await send({"type": "http.response.body", "body": data, "more_body": True})
                continue
            data = encoder.encode(ev)
            if data:
                await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def read_body(receive: Any) -> bytes:
    parts = []
    more = True
    while more:
        message = await receive()
        parts.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(parts)


def _text(result: c.ToolResult) -> str:
    return "".join(p.text for p in result.content if isinstance(p, c.Text))
