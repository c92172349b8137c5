"""Sans-IO cost per upstream event: SSE framing alone (the pass-through floor), and
each translated direction (SSE decode -> upstream stream decoder -> client stream
encoder), over real captures and a long synthetic stream. Ratios are against the
SSE-framing floor measured in the same run.

Bytes are cut into reads two ways: one frame per read (a paced stream, a model's
tokens as they come) and 8 KB reads (a saturated stream: tens of frames per read, cut
anywhere, where ``StreamTranslator`` takes runs of text deltas in one go).

    .venv/bin/python bench/sansio.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxai_asgi import canonical as c  # noqa: E402
from proxai_asgi import pipeline  # noqa: E402
from proxai_asgi.codec import ProtocolName  # noqa: E402
from proxai_asgi.protocols import get_codec  # noqa: E402
from proxai_asgi.sse import SSEDecoder  # noqa: E402
from tests.helpers.captures import captures_dir  # noqa: E402

CAPTURES = captures_dir()  # recorded traffic lives outside the repository
SHORT = {
    "openai_chat_completions": "chat",
    "openai_responses": "responses",
    "anthropic_messages": "anthropic",
    "gemini_generate_content": "gemini",
}


def capture_body(name: str) -> bytes:
    return str(json.loads((CAPTURES / f"{name}.json").read_text())["response"]["body"]).encode()


def synthetic(protocol: ProtocolName, n: int = 2000) -> bytes:
    """A long stream in ``protocol``'s wire format: n text deltas, then two tool
    calls whose argument fragments interleave. Written by our own encoder from
    canonical events, so it is valid by construction."""
    events: list[c.StreamEvent] = [c.MessageStart(id="msg_bench", model="bench", created=1)]
    events.append(c.BlockStart(index=0, kind="text"))
    events += [c.BlockDelta(index=0, text=f"tok{i} ") for i in range(n)]
    events.append(c.BlockStop(index=0))
    events.append(c.BlockStart(index=1, kind="tool_call", call_id="call_a", name="f"))
    events.append(c.BlockStart(index=2, kind="tool_call", call_id="call_b", name="g"))
    for i in range(20):
        events.append(c.BlockDelta(index=1, text='{"a":' if i == 0 else "1" if i < 19 else "}"))
        events.append(c.BlockDelta(index=2, text='{"b":' if i == 0 else "2" if i < 19 else "}"))
    events += [c.BlockStop(index=1), c.BlockStop(index=2)]
    events.append(c.Finish(stop_reason="tool_use", usage=c.Usage(input_tokens=10, output_tokens=n)))
    enc = get_codec(protocol).stream_encoder(
        c.Request(model="bench", messages=[], stream=True, include_usage=True)
    )
    return b"".join(enc.encode(e) for e in events)


def frames(body: bytes) -> list[bytes]:
    """Cut the body where a network read would: after each SSE frame (Gemini ends its
    frames with CRLF CRLF)."""
    sep = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    parts = body.split(sep)
    return [p + sep for p in parts if p]


def reads(body: bytes, size: int = 8192) -> list[bytes]:
    """Cut the body every ``size`` bytes, wherever that falls (a saturated stream)."""
    return [body[i : i + size] for i in range(0, len(body), size)]


def per_event(fn: Callable[[], int], repeat: int) -> float:
    """Median microseconds per upstream event over ``repeat`` runs."""
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        n = fn()
        samples.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(samples)


def framing_only(chunks: list[bytes]) -> Callable[[], int]:
    def run() -> int:
        d = SSEDecoder()
        n = 0
        for ch in chunks:
            n += len(d.decode(ch))
        return n

    return run


def translated(chunks: list[bytes], up: ProtocolName, client: ProtocolName) -> Callable[[], int]:
    """The production pipeline's ``StreamTranslator`` (what the middleware runs)."""
    request = c.Request(model="bench", messages=[], stream=True, include_usage=True)
    translation = pipeline.answering(get_codec(client), get_codec(up), request)
    framing = SSEDecoder()
    events = sum(len(framing.decode(ch)) for ch in chunks)  # counted once, outside the timing

    def run() -> int:
        stream = pipeline.StreamTranslator(translation)
        for ch in chunks:
            stream.feed(ch)
        stream.close()
        return events

    return run


def codecs_only(chunks: list[bytes], up: ProtocolName, client: ProtocolName) -> Callable[[], int]:
    """The two codecs composed by hand, without the pipeline: its overhead's floor."""
    upstream, downstream = get_codec(up), get_codec(client)
    request = c.Request(model="bench", messages=[], stream=True, include_usage=True)

    def run() -> int:
        d = SSEDecoder()
        dec = upstream.stream_decoder()
        enc = downstream.stream_encoder(request)
        n = 0
        for ch in chunks:
            for ev in d.decode(ch):
                n += 1
                for ce in dec.feed(ev):
                    enc.encode(ce)
        for ce in dec.close():
            enc.encode(ce)
        return n

    return run


def main() -> None:
    protocols: list[ProtocolName] = list(SHORT)  # type: ignore[arg-type]
    inputs: dict[ProtocolName, list[tuple[str, list[bytes]]]] = {
        "openai_chat_completions": [
            (
                "capture chat_sse_parallel_tool_calls",
                frames(capture_body("chat_sse_parallel_tool_calls")),
            ),
        ],
        "openai_responses": [
            (
                "capture responses_sse_reasoning_summary",
                frames(capture_body("responses_sse_reasoning_summary")),
            ),
        ],
        "anthropic_messages": [
            (
                "capture anthropic_sse_thinking_signature_delta",
                frames(capture_body("anthropic_sse_thinking_signature_delta")),
            ),
        ],
        "gemini_generate_content": [
            ("capture gemini_sse_thinking", frames(capture_body("gemini_sse_thinking"))),
        ],
    }
    for p in protocols:
        inputs[p].append(("synthetic 2000 deltas + 2 interleaved tools", frames(synthetic(p))))

    print(
        "| upstream -> client | input | framing µs/ev | codecs alone µs/ev "
        "| pipeline µs/ev | pipeline / framing | framing, 8 KB reads | pipeline, 8 KB reads |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for up in protocols:
        for label, chunks in inputs[up]:
            repeat = 15 if len(chunks) > 500 else 300
            floor = per_event(framing_only(chunks), repeat)
            big = reads(b"".join(chunks))
            big_floor = per_event(framing_only(big), repeat)
            for client in protocols:
                if client == up:
                    continue
                bare = per_event(codecs_only(chunks, up, client), repeat)
                cost = per_event(translated(chunks, up, client), repeat)
                big_cost = per_event(translated(big, up, client), repeat)
                print(
                    f"| {SHORT[up]} -> {SHORT[client]} | {label} | {floor:.2f} | {bare:.2f} "
                    f"| {cost:.2f} | {cost / floor:.1f}x | {big_floor:.2f} | {big_cost:.2f} |"
                )


if __name__ == "__main__":
    main()
