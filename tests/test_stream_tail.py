"""StreamTail keeps a stream's first frame and last frames, whatever the chunking."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi.stream_tail import TAIL_BYTES, StreamTail


def stream(n: int) -> bytes:
    frames = [b'event: first\ndata: {"i": -1}\n\n']
    frames += [b'event: mid\ndata: {"i": %d, "pad": "%s"}\n\n' % (i, b"x" * 40) for i in range(n)]
    frames.append(b"event: last\ndata: {}\n\n")
    return b"".join(frames)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 2000), cuts=st.lists(st.integers(1, 997), max_size=40))
def test_first_and_last_frames_survive_any_chunking(n: int, cuts: list[int]) -> None:
    data = stream(n)
    tail = StreamTail()
    pos, sizes = 0, cuts or [len(data)]
    i = 0
    while pos < len(data):
        size = sizes[i % len(sizes)]
        tail.feed(data[pos : pos + size])
        pos += size
        i += 1
    first = tail.first_frame()
    assert first is not None and first.event == "first"
    frames = tail.last_frames()
    assert frames[-1].event == "last"
    assert all(f.event in ("first", "mid", "last") for f in frames)  # no half frame read
    # bounded: the tail keeps whole chunks, at most one beyond TAIL_BYTES
    assert sum(len(f.data) for f in frames) <= TAIL_BYTES + max(sizes)


def test_a_frame_cut_short_is_not_read_and_the_separator_closes_it() -> None:
    tail = StreamTail()
    tail.feed(b"event: a\ndata: {}\n\nevent: b\ndata: {")
    assert [f.event for f in tail.last_frames()] == ["a"]
    assert tail.separator() == b"\n\n"
    tail.feed(b"}\n\n")
    assert tail.separator() == b""


def test_crlf_streams_are_read_too() -> None:
    tail = StreamTail()
    tail.feed(b'data: {"a": 1}\r\n\r\ndata: [DONE]\r\n\r\n')
    assert tail.last_frames()[-1].is_done
    assert tail.separator() == b""


@pytest.mark.parametrize("end", [b"\n\n", b"\r\n\r\n"], ids=["lf", "crlf"])
def test_the_head_stops_at_the_first_frame_whatever_the_line_ends(end: bytes) -> None:
    """A Gemini stream ends its frames with CRLF CRLF: its head must stop at the first
    frame too, not grow (and be copied) with every chunk up to HEAD_BYTES."""
    tail = StreamTail()
    for n in range(2000):
        tail.feed(b'data: {"n": %d}' % n + end)
    first = tail.first_frame()
    assert first is not None and first.data == b'{"n": 0}'
    assert len(tail._head) < 100


def test_the_last_frames_are_decoded_once_until_the_next_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A relayed stream's end reads them twice (complete, then the epilogue)."""
    import proxai_asgi.stream_tail as module

    decoders: list[object] = []

    class Counting(module.SSEDecoder):
        def __init__(self) -> None:
            super().__init__()
            decoders.append(self)

    monkeypatch.setattr(module, "SSEDecoder", Counting)
    tail = StreamTail()
    tail.feed(b"event: a\ndata: {}\n\n")
    assert [f.event for f in tail.last_frames()] == ["a"]
    assert [f.event for f in tail.last_frames()] == ["a"]
    assert len(decoders) == 1
    tail.feed(b"event: b\ndata: {}\n\n")
    assert [f.event for f in tail.last_frames()] == ["a", "b"]
    assert len(decoders) == 2
