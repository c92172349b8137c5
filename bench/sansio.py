"""Sans-IO cost per upstream event: SSE framing alone (the pass-through floor), and
each translated direction (SSE decode -> upstream stream decoder -> client stream
encoder), over real captures and a long synthetic stream. Ratios are against the
SSE-framing floor measured in the same run.

Bytes are cut into reads two ways: one frame per read (a paced stream, a model's
tokens as they come) and 8 KB reads (a saturated stream: tens of frames per read, cut
anywhere, where ``StreamTranslator`` takes runs of text deltas in one go).

    .venv/bin/python -m bench.sansio            # --repeat N for a quick look
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from bench._common import SHORT, capture_body, frames, reads, synthetic, translated
from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from proxai_asgi.protocols import get_codec
from proxai_asgi.sse import SSEDecoder


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, help="runs per cell (default 15 long, 300 short)")
    parser.add_argument(
        "--sent",
        action="store_true",
        help="translators note what the client was sent (as when continuation is possible)",
    )
    args = parser.parse_args()
    note = {"sent": True} if args.sent else {}
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
            repeat = args.repeat or (15 if len(chunks) > 500 else 300)
            floor = per_event(framing_only(chunks), repeat)
            big = reads(b"".join(chunks))
            big_floor = per_event(framing_only(big), repeat)
            for client in protocols:
                if client == up:
                    continue
                bare = per_event(codecs_only(chunks, up, client), repeat)
                cost = per_event(translated(chunks, up, client, **note), repeat)
                big_cost = per_event(translated(big, up, client, **note), repeat)
                print(
                    f"| {SHORT[up]} -> {SHORT[client]} | {label} | {floor:.2f} | {bare:.2f} "
                    f"| {cost:.2f} | {cost / floor:.1f}x | {big_floor:.2f} | {big_cost:.2f} |"
                )


if __name__ == "__main__":
    main()
