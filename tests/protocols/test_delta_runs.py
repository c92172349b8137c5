"""A read's runs of text deltas (``delta_runs``) write exactly what the event-by-event
path writes, for every upstream stream and every way its bytes are cut into reads.

The reference is ``StreamTranslator`` with its run path replaced by the plain loop it
shortcuts (``feed`` then ``_emit`` per SSE event), fed one frame per read. The streams:
each upstream protocol's own encoder output (text, an empty fragment, a second text
block, interleaved tool calls), the recorded streams, and seeded mutations of both
(frames dropped, repeated, swapped, fields removed, nulled, emptied or changed in type,
foreign events and garbage inserted), so that runs meet every way a frame can stop
being a plain delta.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi import ids, pipeline
from proxai_asgi.codec import PROTOCOLS, ProtocolName
from proxai_asgi.protocols import get_codec
from proxai_asgi.sse import SSEEvent
from tests.helpers.captures import response_body

SSE_CAPTURES: dict[ProtocolName, tuple[str, ...]] = {
    "openai_chat_completions": (
        "chat_sse_text_basic_include_usage",
        "chat_sse_parallel_tool_calls",
        "chat_sse_max_tokens_length",
    ),
    "openai_responses": ("responses_sse_text_basic", "responses_sse_reasoning_summary"),
    "anthropic_messages": ("anthropic_sse_text_basic", "anthropic_sse_parallel_tool_use"),
    "gemini_generate_content": ("gemini_sse_text_basic", "gemini_sse_tools"),
}
REQUEST = c.Request(model="m", messages=[], stream=True, include_usage=True)
MUTANTS = 60


def own_stream(protocol: ProtocolName) -> bytes:
    """The protocol's encoder output for a stream with every shape a run meets."""
    events: list[c.StreamEvent] = [c.MessageStart(id="msg_1", model="m", created=1)]
    events.append(c.BlockStart(index=0, kind="text"))
    events += [c.BlockDelta(index=0, text=t) for t in ("a", "", "b\n", 'q"\\', "é€😀", "z")]
    events.append(c.BlockStop(index=0))
    events.append(c.BlockStart(index=1, kind="tool_call", call_id="call_a", name="f"))
    events.append(c.BlockStart(index=2, kind="tool_call", call_id="call_b", name="g"))
    for index, text in ((1, '{"a":'), (2, '{"b":'), (1, "1"), (2, "2"), (1, "}"), (2, "}")):
        events.append(c.BlockDelta(index=index, text=text))
    events += [c.BlockStop(index=1), c.BlockStop(index=2)]
    events.append(c.BlockStart(index=3, kind="text"))
    events += [c.BlockDelta(index=3, text=f"t{i} ") for i in range(8)]
    events.append(c.BlockStop(index=3))
    events.append(c.BlockStart(index=4, kind="refusal"))  # repeating the text's start
    events += [c.BlockDelta(index=4, text=t) for t in ("a", "b", "\n")]
    events.append(c.BlockStop(index=4))
    events.append(c.Finish(stop_reason="tool_use", usage=c.Usage(input_tokens=3, output_tokens=9)))
    encoder = get_codec(protocol).stream_encoder(REQUEST)
    return b"".join(encoder.encode(e) for e in events)


def split_frames(body: bytes) -> tuple[list[bytes], bytes]:
    sep = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    return [f for f in body.split(sep) if f], sep


def mutate(value: Any, rnd: random.Random) -> Any:
    """One random change somewhere in a decoded JSON payload."""
    if isinstance(value, dict) and value and rnd.random() < 0.7:
        key = rnd.choice(list(value))
        op = rnd.randrange(7)
        if op == 0:
            del value[key]
        elif op == 1:
            value[key] = None
        elif op == 2:
            value[key] = ""
        elif op == 3:
            value[key] = rnd.choice([0, 1, 2, -1, 3.5, True, [], {}, "x", "error"])
        elif op == 4:
            value[rnd.choice(["refusal", "reasoning_content", "finish_reason", "x"])] = "r"
        else:
            value[key] = mutate(value[key], rnd)
        return value
    if isinstance(value, list) and value:
        if rnd.random() < 0.3:
            value.append(value[0])
        else:
            i = rnd.randrange(len(value))
            value[i] = mutate(value[i], rnd)
        return value
    return rnd.choice([None, "", "x", 0, 1, [], {}])


def mutant(frames: list[bytes], rnd: random.Random) -> list[bytes]:
    out = list(frames)
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randrange(len(out))
        op = rnd.randrange(6)
        if op == 0:
            del out[i]
        elif op == 1:
            out.insert(i, out[i])
        elif op == 2 and i + 1 < len(out):
            out[i], out[i + 1] = out[i + 1], out[i]
        elif op == 3:
            extra = [
                b"data: [DONE]",
                b": keep-alive",
                b"data: ",
                b"data: {not json",
                b'event: error\ndata: {"error":{"message":"boom","type":"api_error"}}',
                b'event: ping\ndata: {"type": "ping"}',
                b"event: other\n" + out[i].split(b"\n")[-1],
            ]
            out.insert(i, rnd.choice(extra))
        else:
            head, _, data = out[i].rpartition(b"data: ")
            try:
                payload = json.loads(data)
            except ValueError:
                continue
            new = json.dumps(mutate(payload, rnd), separators=(",", ":"), ensure_ascii=False)
            out[i] = head + b"data: " + new.encode()
        if not out:
            break
    return out


class OneByOne(pipeline.StreamTranslator):
    """The translator without its runs: each event through ``feed`` and ``_emit``."""

    __slots__ = ()

    def _runs(self, events: list[SSEEvent], out: bytearray) -> None:
        for e in events:
            if self._emit(self._decoder.feed(e), out):
                return


def reference(translation: pipeline.Translation, reads: list[bytes]) -> tuple[object, ...]:
    return outcome(OneByOne(translation), reads)


def outcome(stream: pipeline.StreamTranslator, reads: list[bytes]) -> tuple[object, ...]:
    body = b"".join(stream.feed(r) for r in reads) + stream.close()
    error = stream.error and (stream.error.status, stream.error.message)
    return body, stream.usage, stream.model, stream.done, error


def cuts(body: bytes, rnd: random.Random) -> list[list[bytes]]:
    """The whole body in one read, and a few random cuttings of it."""
    ways = [[body]]
    for _ in range(3):
        points = sorted(rnd.sample(range(1, len(body)), min(len(body) - 1, rnd.randint(1, 12))))
        ways.append([body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)])
    return ways


def check(upstream: ProtocolName, body: bytes, rnd: random.Random) -> int:
    frames, sep = split_frames(body)
    checked = 0
    variants = [frames] + [mutant(frames, rnd) for _ in range(MUTANTS)]
    for variant in variants:
        raw = b"".join(f + sep for f in variant)
        if not raw:
            continue
        for client in PROTOCOLS:
            if client == upstream:
                continue
            translation = pipeline.answering(get_codec(client), get_codec(upstream), REQUEST)
            expected = reference(translation, [f + sep for f in variant])
            for reads in cuts(raw, rnd):
                got = outcome(pipeline.StreamTranslator(translation), reads)
                assert got == expected, (client, variant, reads)
                checked += 1
    return checked


@pytest.fixture(autouse=True)
def _fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids and timestamps the encoders make up when the upstream has none: fixed, so
    that two translations of one stream compare byte for byte."""
    monkeypatch.setattr(ids, "random_hex", lambda n: "0" * (2 * n))
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)


@pytest.mark.parametrize("upstream", PROTOCOLS)
def test_runs_write_what_event_by_event_writes_for_the_encoders_own_streams(
    upstream: ProtocolName,
) -> None:
    assert check(upstream, own_stream(upstream), random.Random(upstream)) > 3 * MUTANTS


@pytest.mark.parametrize(
    ("upstream", "name"), [(p, n) for p, names in SSE_CAPTURES.items() for n in names]
)
def test_runs_write_what_event_by_event_writes_for_recorded_streams(
    upstream: ProtocolName, name: str
) -> None:
    assert check(upstream, response_body(name), random.Random(name)) > 3 * MUTANTS


def test_a_read_of_many_deltas_goes_through_one_run() -> None:
    """The run path is taken (not only equal): a read of twenty deltas is one call of
    the encoder's ``encode_deltas`` and none of ``encode`` for them."""
    body = own_stream("anthropic_messages")
    frames, sep = split_frames(body)
    start = [f + sep for f in frames[:3]]  # message_start, block start, first delta
    more = frames[3:4] * 20  # the delta "b\n" (the empty one wrote no frame), again and again
    translation = pipeline.answering(
        get_codec("openai_chat_completions"), get_codec("anthropic_messages"), REQUEST
    )
    stream = pipeline.StreamTranslator(translation)
    stream.feed(b"".join(start))
    calls: list[str] = []
    real = stream._encoder

    class Spy:
        def encode(self, ev: c.StreamEvent) -> bytes:
            calls.append(type(ev).__name__)
            return real.encode(ev)

        def encode_deltas(self, index: int, texts: list[str]) -> bytes:
            calls.append(f"run {len(texts)}")
            return real.encode_deltas(index, texts)

    stream._encoder = Spy()
    out = stream.feed(b"".join(f + sep for f in more))
    assert calls == ["run 20"]
    assert out.count(b'{"content":"b\\n"}') == 20
