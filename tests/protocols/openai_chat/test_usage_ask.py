"""A Chat stream request asked for its usage by the proxy (``ask_usage``) with every
other byte kept, and its answer stripped of what the client did not ask for
(``UsageStrip``): the usage-only chunk and OpenAI's ``"usage":null`` members, however
the stream is cut into chunks."""

from __future__ import annotations

import json
import random

import pytest

from proxai_asgi.protocols import get_codec
from proxai_asgi.protocols.openai_chat.usage_ask import UsageStrip, ask_usage
from tests.helpers.captures import response_body

CHAT = get_codec("openai_chat_completions")


def asked(body: bytes) -> bytes:
    got = ask_usage(body)
    assert got is not None
    assert json.loads(got.body)["stream_options"]["include_usage"] is True
    return got.body


def test_a_body_without_stream_options_gets_them_as_its_first_member() -> None:
    body = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'
    assert asked(body) == b'{"stream_options":{"include_usage":true},' + body[1:]


def test_null_stream_options_are_replaced_and_nothing_else_changes() -> None:
    body = b'{ "model" : "m", "stream_options" : null , "stream": true }'
    want = b'{ "model" : "m", "stream_options" : {"include_usage":true} , "stream": true }'
    assert asked(body) == want


def test_the_clients_other_stream_options_are_kept() -> None:
    body = b'{"stream":true,"stream_options":{"continuous_usage_stats":true},"model":"m"}'
    want = (
        b'{"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true},'
        b'"model":"m"}'
    )
    assert asked(body) == want


def test_an_empty_options_object_gets_the_one_member() -> None:
    body = b'{"stream":true,"stream_options":{ },"model":"m"}'
    assert asked(body) == b'{"stream":true,"stream_options":{"include_usage":true },"model":"m"}'


@pytest.mark.parametrize("value", [b"false", b"null", b'"yes"', b"0"])
def test_include_usage_other_than_true_is_made_true_in_place(value: bytes) -> None:
    body = b'{"stream":true,"stream_options":{"include_usage": ' + value + b', "x": 1}}'
    assert asked(body) == b'{"stream":true,"stream_options":{"include_usage": true, "x": 1}}'


def test_a_client_that_asked_for_usage_is_left_alone() -> None:
    body = b'{"stream":true,"stream_options":{"x":1, "include_usage" : true}}'
    assert ask_usage(body) is None
    assert CHAT.ask_usage(body) is None


def test_of_repeated_keys_the_last_one_decides_as_the_providers_read_it() -> None:
    body = b'{"stream_options":{"include_usage":true},"stream_options":{"include_usage":false}}'
    assert asked(body) == (
        b'{"stream_options":{"include_usage":true},"stream_options":{"include_usage":true}}'
    )
    escaped = b'{"stream\\u005foptions":{"include_usage":false}}'
    assert asked(escaped) == b'{"stream\\u005foptions":{"include_usage":true}}'


def test_nested_stream_options_are_not_the_requests() -> None:
    body = b'{"metadata":{"stream_options":{"include_usage":true}},"stream":true}'
    assert asked(body).startswith(b'{"stream_options":{"include_usage":true},"metadata"')


def test_options_that_are_no_object_are_sent_as_they_came() -> None:
    assert ask_usage(b'{"stream":true,"stream_options":"x"}') is None


def test_the_other_protocols_always_report_usage() -> None:
    for name in ("openai_responses", "anthropic_messages", "gemini_generate_content"):
        assert get_codec(name).ask_usage(b'{"stream":true}') is None  # type: ignore[arg-type]


# ---------------------------------------------------------------- the answer

@pytest.fixture
def asked_stream() -> bytes:
    return response_body("chat_sse_text_basic_include_usage")  # OpenAI, asked for usage


def unasked(stream: bytes) -> bytes:
    """The stream OpenAI sends a request without ``include_usage``."""
    frames = stream.split(b"\n\n")
    kept = [f for f in frames if b'"choices":[],"usage":{' not in f]
    return b"\n\n".join(kept).replace(b',"usage":null', b"")


def strip_all(pieces: list[bytes]) -> tuple[bytes, UsageStrip]:
    strip = UsageStrip()
    out = b"".join(strip.feed(p) for p in pieces[:-1]) + strip.feed(pieces[-1], last=True)
    return out, strip


def cut(data: bytes, seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    points = sorted(rnd.sample(range(1, len(data)), min(40, len(data) - 1)))
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@pytest.mark.parametrize("seed", range(20))
def test_the_client_gets_the_stream_it_asked_for_however_it_is_cut(
    asked_stream: bytes, seed: int
) -> None:
    out, strip = strip_all(cut(asked_stream, seed))
    assert out == unasked(asked_stream)
    assert len(out) < len(asked_stream) - 200  # (a usage chunk is ~300 bytes)
    assert b'"usage"' not in out and out.endswith(b"data: [DONE]\n\n")
    assert strip.usage is not None
    usage = strip.usage.usage
    assert (strip.usage.model, usage.input_tokens, usage.output_tokens) == recorded(asked_stream)


def recorded(stream: bytes) -> tuple[str, int, int]:
    """The model and token counts the recording's usage chunk says (read with json)."""
    (frame,) = [f for f in stream.split(b"\n\n") if b'"choices":[]' in f]
    chunk = json.loads(frame[len(b"data: ") :])
    u = chunk["usage"]
    return chunk["model"], u["prompt_tokens"], u["completion_tokens"]



def test_one_byte_at_a_time_and_crlf_frames_too(asked_stream: bytes) -> None:
    crlf = asked_stream.replace(b"\n", b"\r\n")
    out, strip = strip_all([crlf[i : i + 1] for i in range(len(crlf))])
    assert out == unasked(asked_stream).replace(b"\n", b"\r\n")
    assert strip.usage is not None


def test_a_whole_frame_chunk_is_released_at_once_and_a_half_frame_held(
    asked_stream: bytes,
) -> None:
    strip = UsageStrip()
    first, _ = asked_stream.split(b"\n\n", 1)
    assert strip.feed(first + b"\n\n") == unasked(first + b"\n\n")
    assert strip.feed(b"data: {\"id\"") == b""
    assert strip.feed(b":1}\n\ndata: [DONE]", last=True) == b'data: {"id":1}\n\ndata: [DONE]'


def test_usage_on_content_chunks_stays_and_only_the_usage_only_chunk_goes() -> None:
    # vLLM with continuous_usage_stats: usage on every chunk, then the usage chunk.
    content = (
        b'data: {"model":"v","choices":[{"index":0,"delta":{"content":"a"}}],'
        b'"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n'
    )
    final = (
        b'data: {"model":"v","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
    )
    out, strip = strip_all([content, final, b"data: [DONE]\n\n"])
    assert out == content + b"data: [DONE]\n\n"
    assert strip.usage is not None and strip.usage.usage.output_tokens == 2


def test_a_text_that_says_usage_is_not_touched() -> None:
    text = b'"\\"usage\\":null, \\"choices\\":[]"'
    frame = b'data: {"choices":[{"index":0,"delta":{"content":' + text + b"}}]}\n\n"
    out, strip = strip_all([frame, b"data: [DONE]\n\n"])
    assert out == frame + b"data: [DONE]\n\n" and strip.usage is None
