"""Shared helpers of the Gemini codec tests."""

from __future__ import annotations

import json
from typing import Any

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols.gemini_generate_content import CODEC
from proxai_asgi.sse import SSEDecoder
from tests.helpers.captures import load

MODEL = "gemini-2.5-flash"


def decode_req(body: dict[str, Any], lossy: bool = False) -> tuple[c.Request, TranslationReport]:
    report = TranslationReport(lossy)
    req = CODEC.decode_request(json.dumps(body).encode(), report, MODEL, False)  # type: ignore[call-arg]
    return req, report


def encode_req(req: c.Request, lossy: bool = False) -> tuple[dict[str, Any], TranslationReport]:
    report = TranslationReport(lossy)
    out: dict[str, Any] = json.loads(CODEC.encode_request(req, report, UpstreamOptions()))
    return out, report


def stream_events(body: bytes, chunks: list[bytes] | None = None) -> list[c.StreamEvent]:
    dec = CODEC.stream_decoder()
    sse = SSEDecoder()
    out: list[c.StreamEvent] = []
    for ch in chunks if chunks is not None else [body]:
        for e in sse.decode(ch):
            out.extend(dec.feed(e))
    for e in sse.flush():
        out.extend(dec.feed(e))
    out.extend(dec.close())
    return out


def encode_stream(events: list[c.StreamEvent], request: c.Request | None = None) -> bytes:
    enc = CODEC.stream_encoder(request or c.Request(model=MODEL, messages=[], stream=True))
    return b"".join(enc.encode(e) for e in events)


def frames(body: bytes) -> list[dict[str, Any]]:
    """The JSON of each ``data:`` frame of a Gemini stream."""
    out = []
    for line in body.decode().replace("\r\n", "\n").split("\n"):
        if line.startswith("data: "):
            out.append(json.loads(line[6:]))
    return out


def merged(chunks: list[dict[str, Any]]) -> bytes:
    """A stream's frames as the one non-streamed answer they add up to."""
    parts: list[dict[str, Any]] = []
    last = chunks[-1]
    for ch in chunks:
        for cand in ch.get("candidates") or []:
            parts.extend((cand.get("content") or {}).get("parts") or [])
    body = dict(last)
    if last.get("candidates"):
        cand = dict(last["candidates"][0])
        cand["content"] = {"role": "model", "parts": parts}
        body["candidates"] = [cand]
    return json.dumps(body).encode()


def url_model(name: str) -> str:
    url: str = load(name)["request"]["url"]
    return url.split("/models/", 1)[1].split(":", 1)[0]
