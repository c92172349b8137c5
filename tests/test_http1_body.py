"""Body framing of the lean pool (``proxai_asgi.transport.http1_body``): every split of the bytes
gives the same payload, bad framing is refused, and the end is found exactly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi.transport.http1_body import BodyError, Chunked, Framing, Length, UntilClose


def chunked(parts: list[bytes], ext: bytes = b"", trailers: bytes = b"") -> bytes:
    body = b"".join(b"%x%s\r\n%s\r\n" % (len(p), ext, p) for p in parts if p)
    return body + b"0\r\n" + trailers + b"\r\n"


def feed_split(framing: Framing, data: bytes, cuts: list[int]) -> bytes:
    out, prev = [], 0
    for cut in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
        out.append(framing.feed(data[prev:cut]))
        prev = max(prev, cut)
    return b"".join(out)


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.binary(max_size=40), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
    ext=st.sampled_from([b"", b";name=value", b" ;x"]),
    trailers=st.sampled_from([b"", b"x-checksum: abc\r\n", b"a: 1\r\nb: 2\r\n"]),
    after=st.sampled_from([b"", b"HTTP/1.1 200 OK\r\n"]),
)
def test_chunked_payload_is_the_same_for_every_split(
    parts: list[bytes], cuts: list[int], ext: bytes, trailers: bytes, after: bytes
) -> None:
    framing = Chunked()
    assert feed_split(framing, chunked(parts, ext, trailers) + after, cuts) == b"".join(parts)
    assert framing.done
    assert framing.leftover == after


def test_chunked_read_returns_all_complete_chunks_as_one_piece() -> None:
    framing = Chunked()
    frames = [b"data: %d\n\n" % i for i in range(20)]
    wire = chunked(frames)
    assert framing.feed(wire[:-5]) == b"".join(frames)
    assert not framing.done
    assert framing.feed(wire[-5:]) == b"" and framing.done


def test_chunked_data_is_passed_on_before_its_chunk_completes() -> None:
    framing = Chunked()
    assert framing.feed(b"a\r\n01234") == b"01234"  # no waiting for the other 5 bytes
    assert framing.feed(b"56789\r\n0\r\n\r\n") == b"56789"
    assert framing.done


@pytest.mark.parametrize(
    "wire",
    [
        b"zz\r\nhello\r\n",  # not hex
        b"-5\r\nhello\r\n",  # a sign
        b"\r\nhello\r\n",  # empty size
        b"5\r\nhelloXX",  # data not followed by CRLF
        b"1" * 17 + b"\r\n",  # a size no 64-bit length holds
        b"5" + b" " * 5000,  # a size line that never ends
    ],
)
def test_chunked_bad_framing_is_refused(wire: bytes) -> None:
    with pytest.raises(BodyError):
        Chunked().feed(wire)


def test_chunked_body_cut_by_the_server_is_an_error() -> None:
    framing = Chunked()
    framing.feed(b"10\r\nonly part")
    with pytest.raises(BodyError):
        framing.eof()


def test_length_body_ends_at_its_length_and_keeps_what_follows() -> None:
    framing = Length(5)
    assert framing.feed(b"he") == b"he"
    assert framing.feed(b"llo extra") == b"llo"
    assert framing.done and framing.leftover == b" extra"
    short = Length(5)
    short.feed(b"abc")
    with pytest.raises(BodyError):
        short.eof()
    assert Length(0).done


def test_close_delimited_body_ends_at_eof_and_cannot_be_reused() -> None:
    framing = UntilClose()
    assert framing.feed(b"abc") == b"abc" and not framing.done
    framing.eof()
    assert framing.done and not framing.reusable


def _outcome(pieces: list[bytes]) -> tuple[bytes, bool, bytes] | str:
    framing, out = Chunked(), []
    try:
        out = [framing.feed(piece) for piece in pieces]
    except BodyError:
        return "refused"
    return b"".join(out), framing.done, framing.leftover


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(st.binary(min_size=1, max_size=30), max_size=6),
    size_form=st.sampled_from([b"%x", b"%X", b"00%x", b"%x ", b" %x", b"%x;a=b", b"%x\t"]),
    inserts=st.lists(
        st.tuples(st.integers(min_value=0, max_value=400), st.sampled_from(list(b"\r\n 0aZ;"))),
        max_size=2,
    ),
)
def test_whole_reads_frame_as_byte_by_byte_reads_do(
    parts: list[bytes], size_form: bytes, inserts: list[tuple[int, int]]
) -> None:
    """A read of many whole chunks takes a faster path than a chunk cut by reads; both
    accept, refuse and end bodies alike (sizes written every way, bytes inserted)."""
    wire = bytearray(b"".join(size_form % len(p) + b"\r\n" + p + b"\r\n" for p in parts))
    wire += b"0\r\n\r\nnext"
    for at, byte in inserts:
        wire.insert(at % (len(wire) + 1), byte)
    data = bytes(wire)
    assert _outcome([data]) == _outcome([data[i : i + 1] for i in range(len(data))])
