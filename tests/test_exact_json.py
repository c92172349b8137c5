"""``exact_json.encode_made``: the same bytes as ``Encoder.encode``, held at their size."""

from __future__ import annotations

import threading
import tracemalloc
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName, UpstreamOptions
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols import get_codec
from proxai_asgi.protocols._kit import exact_json

PROTOCOLS: list[ProtocolName] = [
    "anthropic_messages",
    "openai_chat_completions",
    "openai_responses",
    "gemini_generate_content",
]

ENCODER = msgspec.json.Encoder()
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


def encode(encoder: msgspec.json.Encoder, value: object) -> bytes:
    """A value the caller still holds, encoded through the thread's buffer."""
    return exact_json.encode_made(encoder, lambda v: v, value)


@given(JSON)
def test_same_bytes_as_the_encoder(value: object) -> None:
    assert encode(ENCODER, value) == ENCODER.encode(value)


def test_a_short_body_after_a_long_one_is_not_padded_by_it() -> None:
    long, short = {"x": "y" * 100_000}, {"x": 1}
    assert encode(ENCODER, long) == ENCODER.encode(long)
    assert encode(ENCODER, short) == b'{"x":1}'


def test_a_body_past_the_kept_size_is_encoded_and_its_buffer_let_go() -> None:
    huge = ["z" * 1000] * 5000  # ~5 MB, past what a thread keeps
    assert encode(ENCODER, huge) == ENCODER.encode(huge)
    assert len(exact_json._local.data) <= exact_json._FIRST


def test_an_error_leaves_the_buffer_usable() -> None:
    try:
        encode(ENCODER, {"x": object()})
    except TypeError:
        pass
    else:
        raise AssertionError("an object msgspec cannot encode was encoded")
    assert encode(ENCODER, {"ok": True}) == b'{"ok":true}'


def test_each_thread_encodes_into_its_own_buffer() -> None:
    bodies = {k: {"thread": k, "text": str(k) * (1000 + k * 37)} for k in range(8)}
    seen: dict[int, list[bytes]] = {k: [] for k in bodies}
    barrier = threading.Barrier(len(bodies))

    def run(k: int) -> None:
        barrier.wait(timeout=10)
        for _ in range(200):
            seen[k].append(encode(ENCODER, bodies[k]))

    threads = [threading.Thread(target=run, args=(k,)) for k in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for k, outs in seen.items():
        assert outs and set(outs) == {ENCODER.encode(bodies[k])}


def test_the_body_is_held_at_its_own_size() -> None:
    value = {"messages": [{"content": "line of code\n" * 40} for _ in range(30)]}
    for _ in range(3):  # the thread's buffer grows to what the body needs, then is kept
        encode(ENCODER, value)
    size = len(ENCODER.encode(value))
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        encode(ENCODER, value)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        ENCODER.encode(value)
        grown = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert size <= peak <= size + 256
    assert grown > peak  # what the plain encoder holds for the same body


def _made(size: int) -> dict[str, list[str]]:
    # many small strings: objects that go back to the allocator when let go
    return {"lines": [f"{k:08d}" for k in range(size)]}


def test_a_made_value_is_let_go_before_the_body_is_copied() -> None:
    """The peak holds the body or the value, whichever is larger, not both."""
    size = len(ENCODER.encode(_made(400)))
    for _ in range(3):
        exact_json.encode_made(ENCODER, _made, 400)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        value = _made(400)
        held = tracemalloc.get_traced_memory()[0] - base
        del value
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        exact_json.encode_made(ENCODER, _made, 400)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        encode(ENCODER, _made(400))
        both = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert held > size  # (so that holding both would show)
    assert peak <= held + 512
    assert both >= held + size


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_request_encoder_writes_its_body_at_its_exact_size_from_a_made_value(
    protocol: ProtocolName, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A translated request is the largest body the proxy makes: each codec's request
    encoder goes through ``exact_json.encode_made`` (a plain ``Encoder.encode`` would
    hold up to 1.5x the body while it is made, and a wire tree still referred to by the
    encoder's own frame would be held beside the copied body)."""
    calls: list[tuple[str, bytes]] = []
    encode_made = exact_json.encode_made

    def counted_made(encoder: msgspec.json.Encoder, make: Any, *args: Any) -> bytes:
        calls.append(("made", out := encode_made(encoder, make, *args)))
        return out

    monkeypatch.setattr(exact_json, "encode_made", counted_made)
    request = c.Request(
        model="m", messages=[c.Message(role="user", content=[c.Text(text="hi")])], max_tokens=8
    )
    body = get_codec(protocol).encode_request(request, TranslationReport(), UpstreamOptions())
    assert calls == [("made", body)]
