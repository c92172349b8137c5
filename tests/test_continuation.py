"""An answer cut after content reached the client, finished by a continuation
(``routing/continuation.py``): the client's bytes, read by its own protocol's stream
decoder and strict validator, hold the whole answer once, in one message with one
terminal event, for every client and upstream protocol."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import PROTOCOLS, UpstreamOptions, fold
from proxai_asgi.errors import ProxyError
from proxai_asgi.pipeline import StreamTranslator, answering
from proxai_asgi.protocols import get_codec
from proxai_asgi.routing.continuation import (
    Mode,
    Sent,
    Splice,
    continuable,
    continuation_body,
    continuation_mode,
    continuation_request,
    frames_end,
    resume_encoder,
)
from proxai_asgi.sse import SSEDecoder
from tests.helpers import captures
from tests.helpers.validate_anthropic import validate_anthropic_stream
from tests.helpers.validate_chat import validate_chat_stream
from tests.helpers.validate_gemini import validate_gemini_stream
from tests.helpers.validate_responses import validate_responses_stream

ANSWER = ["Hel", "lo, ", "wor", "ld. ", "How ", "are ", "you?"]
FULL = "".join(ANSWER)
ORIGINAL = ProxyError(503, "upstream connection reset", kind="overloaded")

VALIDATORS: dict[str, Callable[[bytes], Any]] = {
    "anthropic_messages": validate_anthropic_stream,
    "openai_chat_completions": validate_chat_stream,
    "gemini_generate_content": validate_gemini_stream,
    "openai_responses": validate_responses_stream,
}
PAIRS = [(client, upstream) for client in PROTOCOLS for upstream in PROTOCOLS]


def request() -> c.Request:
    return c.Request(
        model="m",
        messages=[c.Message(role="user", content=[c.Text(text="hi")])],
        stream=True,
        include_usage=True,
    )


def upstream_stream(protocol: str, events: list[c.StreamEvent]) -> bytes:
    """What an upstream of ``protocol`` sends for ``events`` (its codec's own writer)."""
    enc = get_codec(protocol).stream_encoder(request())  # type: ignore[arg-type]
    return b"".join(enc.encode(e) for e in events)


def answer_events(
    texts: list[str], *, ident: str = "up1", finish: bool = True, stop: bool = True
) -> list[c.StreamEvent]:
    events: list[c.StreamEvent] = [
        c.MessageStart(id=ident, model="served-model", created=1700000000),
        c.BlockStart(index=0, kind="text"),
    ]
    events += [c.BlockDelta(index=0, text=t) for t in texts]
    if stop:
        events.append(c.BlockStop(index=0))
    if finish:
        usage = c.Usage(input_tokens=11, output_tokens=7)
        events.append(c.Finish(stop_reason="end_turn", usage=usage))
    return events


def client_answer(client: str, body: bytes) -> c.Response:
    """The client's bytes as its protocol reads them: strict grammar, then folded."""
    VALIDATORS[client](body)
    return folded(client, body)


def folded(protocol: str, body: bytes) -> c.Response:
    """A stream's bytes folded by its protocol's own stream decoder."""
    decoder = get_codec(protocol).stream_decoder()  # type: ignore[arg-type]
    events: list[c.StreamEvent] = []
    for e in SSEDecoder().decode(body):
        events += decoder.feed(e)
    events += decoder.close()
    return fold(events)


def text_of(response: c.Response) -> str:
    return "".join(p.text for p in response.content if isinstance(p, c.Text))


def cut_stream(client: str, upstream: str, n: int) -> tuple[StreamTranslator, Sent, bytes]:
    """A translated stream that dies after ``n`` text deltas (the connection closed)."""
    sent = Sent()
    translator = StreamTranslator(
        answering(get_codec(client), get_codec(upstream), request()), sent.log
    )  # type: ignore[arg-type]
    cut = upstream_stream(upstream, answer_events(ANSWER[:n], finish=False, stop=False))
    out = translator.feed(cut) + translator.close()
    assert translator.done and translator.held is not None  # held back, not sent
    return translator, sent, out


def continue_with(
    client: str, target: str, translator: StreamTranslator, sent: Sent, mode: Mode, texts: list[str]
) -> tuple[Splice, bytes]:
    translation = answering(get_codec(client), get_codec(target), request())  # type: ignore[arg-type]
    _, cont = continuation_body(translation, sent, get_codec(target), UpstreamOptions(), mode)  # type: ignore[arg-type]
    splice = Splice(translator.encoder, sent, cont, mode, ORIGINAL)
    body = upstream_stream(target, answer_events(texts, ident="up2"))
    return splice, splice.feed(body) + splice.close()


# ------------------------------------------------------------- translated streams


@pytest.mark.parametrize(("client", "upstream"), PAIRS)
@pytest.mark.parametrize("mode", ["prefill", "restart"])
def test_cut_stream_continued_gives_the_whole_answer_once(
    client: str, upstream: str, mode: Mode
) -> None:
    translator, sent, head = cut_stream(client, upstream, 3)
    assert sent.text == "Hello, wor" and continuable(sent)
    rest = ANSWER[3:] if mode == "prefill" else ["He", "llo", ", w", "orl", "d. How are you?"]
    splice, tail = continue_with(client, upstream, translator, sent, mode, rest)
    assert splice.done and splice.failure is None and not splice.diverged
    answer = client_answer(client, head + tail)
    assert text_of(answer) == FULL
    assert sum(isinstance(p, c.Text) for p in answer.content) == 1
    assert answer.usage.output_tokens == 7  # the continuation's usage
    assert sent.finished and sent.text == FULL


@pytest.mark.parametrize("client", PROTOCOLS)
def test_prefill_drops_trailing_whitespace_the_continuation_sends_again(client: str) -> None:
    translator, sent, head = cut_stream(client, "anthropic_messages", 2)
    assert sent.text == "Hello, "
    prefill = continuation_request(request(), sent, "prefill")
    assert prefill.messages[-1].content == [c.Text(text="Hello,")]  # no trailing space
    _, tail = continue_with(
        client, "anthropic_messages", translator, sent, "prefill", [" world. How are you?"]
    )
    assert text_of(client_answer(client, head + tail)) == FULL


@pytest.mark.parametrize("client", PROTOCOLS)
@pytest.mark.parametrize("target", PROTOCOLS)
def test_restart_that_diverges_ends_with_the_original_failure(client: str, target: str) -> None:
    translator, sent, head = cut_stream(client, "openai_chat_completions", 3)
    splice, tail = continue_with(client, target, translator, sent, "restart", ["Hello, ", "there"])
    assert splice.diverged and splice.done
    assert b"there" not in tail
    VALIDATORS[client](head + tail)
    with pytest.raises(ProxyError) as caught:
        client_answer(client, head + tail)
    assert "upstream connection reset" in caught.value.message


@pytest.mark.parametrize("client", PROTOCOLS)
def test_restart_shorter_than_the_text_sent_ends_with_the_original_failure(client: str) -> None:
    translator, sent, head = cut_stream(client, "gemini_generate_content", 4)
    splice, tail = continue_with(
        client, "anthropic_messages", translator, sent, "restart", ["Hello"]
    )
    assert splice.diverged
    with pytest.raises(ProxyError, match="upstream connection reset"):
        client_answer(client, head + tail)


@pytest.mark.parametrize("client", PROTOCOLS)
def test_failed_continuation_is_held_and_a_second_one_finishes(client: str) -> None:
    translator, sent, head = cut_stream(client, "anthropic_messages", 2)
    translation = answering(get_codec(client), get_codec("openai_chat_completions"), request())
    _, cont = continuation_body(
        translation, sent, get_codec("openai_chat_completions"), UpstreamOptions(), "prefill"
    )
    first = Splice(translator.encoder, sent, cont, "prefill", ORIGINAL)
    cut = upstream_stream(
        "openai_chat_completions", answer_events(["world. "], finish=False, stop=False)
    )
    mid = first.feed(cut) + first.close()
    assert first.done and first.failure is not None
    assert sent.text == "Hello, world. "  # the released text is part of what was sent
    _, tail = continue_with(
        client, "gemini_generate_content", translator, sent, "prefill", ["How are you?"]
    )
    assert text_of(client_answer(client, head + mid + tail)) == FULL


@pytest.mark.parametrize("client", PROTOCOLS)
def test_nothing_continues_the_client_gets_the_original_failure(client: str) -> None:
    translator, _, head = cut_stream(client, "openai_responses", 3)
    tail = translator.fail(ORIGINAL)
    with pytest.raises(ProxyError, match="upstream connection reset"):
        client_answer(client, head + tail)


@pytest.mark.parametrize("upstream", PROTOCOLS)
def test_started_tool_call_is_not_continuable(upstream: str) -> None:
    sent = Sent()
    translator = StreamTranslator(
        answering(get_codec("anthropic_messages"), get_codec(upstream), request()), sent.log
    )  # type: ignore[arg-type]
    events = [
        *answer_events(["Let me look."], finish=False),
        c.BlockStart(index=1, kind="tool_call", call_id="call_1", name="read"),
        c.BlockDelta(index=1, text='{"path": "a"}'),
        c.BlockStop(index=1),  # (Gemini sends a call whole: here, at its stop)
    ]
    translator.feed(upstream_stream(upstream, events))
    translator.close()
    assert sent.text == "Let me look." and not continuable(sent)


def test_continuable_accepts_finished_thinking_not_half_sent_thinking() -> None:
    sent = Sent()
    sent.log += [
        c.MessageStart(id="a", model="m"),
        c.BlockStart(index=0, kind="reasoning"),
        c.BlockDelta(index=0, text="hmm"),
    ]
    assert not continuable(sent)
    sent.log += [
        c.BlockStop(index=0),
        c.BlockStart(index=1, kind="text"),
        c.BlockDelta(index=1, text="Hi"),
    ]
    assert continuable(sent) and sent.text == "Hi" and sent.open_text == 1
    sent.log.append(c.Finish(stop_reason="end_turn", usage=c.Usage()))
    assert not continuable(sent)


def test_continuation_request_modes() -> None:
    sent = Sent()
    sent.log += answer_events(["Hello, ", "wor"], finish=False, stop=False)
    original = request()
    assert continuation_request(original, sent, "restart") is original
    prefill = continuation_request(original, sent, "prefill")
    assert prefill.messages[:-1] == original.messages
    assert prefill.messages[-1] == c.Message(role="assistant", content=[c.Text(text="Hello, wor")])
    assert original.messages[-1].role == "user"  # the original is left as it was
    # A client that prefilled the answer itself: the text sent goes on after its prefill.
    own = request()
    own.messages.append(c.Message(role="assistant", content=[c.Text(text="{")]))
    joined = continuation_request(own, sent, "prefill")
    assert len(joined.messages) == 2 and [p.text for p in joined.messages[-1].content] == [
        "{",
        "Hello, wor",
    ]  # type: ignore[union-attr]


@pytest.mark.parametrize("target", PROTOCOLS)
def test_prefill_body_ends_with_the_text_sent(target: str) -> None:
    sent = Sent()
    sent.log += answer_events(["Hello, ", "wor"], finish=False, stop=False)
    translation = answering(get_codec("openai_chat_completions"), get_codec(target), request())  # type: ignore[arg-type]
    body, _ = continuation_body(translation, sent, get_codec(target), UpstreamOptions(), "prefill")  # type: ignore[arg-type]
    assert b"Hello, wor" in body


def test_continuation_mode_defaults_per_protocol_and_the_option_overrides() -> None:
    modes = {p: continuation_mode(get_codec(p), UpstreamOptions()) for p in PROTOCOLS}
    assert modes == {
        "openai_chat_completions": "restart",
        "openai_responses": "restart",
        "anthropic_messages": "prefill",
        "gemini_generate_content": "restart",
    }
    restart = UpstreamOptions(continuation="restart")
    assert continuation_mode(get_codec("anthropic_messages"), restart) == "restart"


def test_continuation_reasoning_is_not_shown() -> None:
    translator, sent, head = cut_stream("anthropic_messages", "anthropic_messages", 3)
    translation = answering(
        get_codec("anthropic_messages"), get_codec("anthropic_messages"), request()
    )
    _, cont = continuation_body(
        translation, sent, get_codec("anthropic_messages"), UpstreamOptions(), "restart"
    )
    splice = Splice(translator.encoder, sent, cont, "restart", ORIGINAL)
    events: list[c.StreamEvent] = [
        c.MessageStart(id="up2", model="served-model"),
        c.BlockStart(index=0, kind="reasoning"),
        c.BlockDelta(index=0, text="thinking again"),
        c.BlockSignature(index=0, signature="sig"),
        c.BlockStop(index=0),
        c.BlockStart(index=1, kind="text"),
        c.BlockDelta(index=1, text="Hello, world. How are you?"),
        c.BlockStop(index=1),
        c.Finish(stop_reason="end_turn", usage=c.Usage(output_tokens=7)),
    ]
    tail = splice.feed(upstream_stream("anthropic_messages", events)) + splice.close()
    answer = client_answer("anthropic_messages", head + tail)
    assert text_of(answer) == FULL and b"thinking again" not in tail
    assert [type(p) for p in answer.content] == [c.Text]


# ----------------------------------------------------------- pass-through streams

TEXT_CAPTURES = {
    "anthropic_messages": "anthropic_sse_text_basic",
    "openai_chat_completions": "chat_sse_text_basic_include_usage",
    "gemini_generate_content": "gemini_sse_text_basic",
    "openai_responses": "responses_sse_text_basic",
}


def _frames(body: bytes) -> list[bytes]:
    sep = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    parts = body.split(sep)
    return [p + sep for p in parts if p.strip()]


def relayed_prefix(protocol: str, body: bytes, n: int) -> bytes:
    """The recorded stream's bytes up to the frame that carried its ``n``-th text."""
    decoder = get_codec(protocol).stream_decoder()  # type: ignore[arg-type]
    out, seen = b"", 0
    for frame in _frames(body):
        out += frame
        for e in SSEDecoder().decode(frame):
            seen += sum(1 for ev in decoder.feed(e) if isinstance(ev, c.BlockDelta) and ev.text)
        if seen >= n:
            return out
    raise AssertionError("the recording has fewer text deltas")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("target", PROTOCOLS)
def test_relayed_stream_resumed_continues_its_own_ids_and_numbering(
    protocol: str, target: str
) -> None:
    capture = captures.load(TEXT_CAPTURES[protocol])
    # (OpenAI's ``"refusal": null``, which the strict validator of our own output refuses)
    body = captures.response_body(TEXT_CAPTURES[protocol]).replace(b',"refusal":null', b"")
    include_usage = bool(capture["request"]["body"].get("stream_options", {}).get("include_usage"))
    full = text_of(folded(protocol, body))
    codec = get_codec(protocol)  # type: ignore[arg-type]
    req = request()
    req.include_usage = include_usage
    relayed = relayed_prefix(protocol, body, 1)
    sent = Sent.from_relayed(codec, req, relayed)
    assert continuable(sent) and full.startswith(sent.text) and sent.text
    encoder = resume_encoder(codec, req, relayed)
    translation = answering(codec, get_codec(target), req)  # type: ignore[arg-type]
    _, cont = continuation_body(translation, sent, get_codec(target), UpstreamOptions(), "prefill")  # type: ignore[arg-type]
    splice = Splice(encoder, sent, cont, "prefill", ORIGINAL)
    rest = full[len(sent.text) :]
    tail = (
        splice.feed(upstream_stream(target, answer_events([rest[:3], rest[3:]], ident="other")))
        + splice.close()
    )
    whole = relayed + tail
    if protocol == "openai_chat_completions":
        validate_chat_stream(whole, include_usage)
    else:
        VALIDATORS[protocol](whole)
    assert text_of(folded(protocol, whole)) == full


@pytest.mark.parametrize("client", PROTOCOLS)
def test_continuation_may_end_with_a_tool_call_after_the_text(client: str) -> None:
    translator, sent, head = cut_stream(client, "anthropic_messages", 3)
    translation = answering(get_codec(client), get_codec("openai_chat_completions"), request())  # type: ignore[arg-type]
    _, cont = continuation_body(
        translation, sent, get_codec("openai_chat_completions"), UpstreamOptions(), "prefill"
    )
    splice = Splice(translator.encoder, sent, cont, "prefill", ORIGINAL)
    events = [
        *answer_events(ANSWER[3:], ident="up2", finish=False),
        c.BlockStart(index=1, kind="tool_call", call_id="call_9", name="read"),
        c.BlockDelta(index=1, text='{"path": "a"}'),
        c.BlockStop(index=1),
        c.Finish(stop_reason="tool_use", usage=c.Usage(output_tokens=9)),
    ]
    tail = splice.feed(upstream_stream("openai_chat_completions", events)) + splice.close()
    answer = client_answer(client, head + tail)
    assert text_of(answer) == FULL
    calls = [p for p in answer.content if isinstance(p, c.ToolCall)]
    assert len(calls) == 1 and calls[0].name == "read" and '"a"' in calls[0].arguments


@pytest.mark.parametrize("client", PROTOCOLS)
@pytest.mark.parametrize("mode", ["prefill", "restart"])
def test_cut_after_finished_thinking_before_text_is_continued(client: str, mode: Mode) -> None:
    sent = Sent()
    translation = answering(get_codec(client), get_codec("anthropic_messages"), request())  # type: ignore[arg-type]
    translator = StreamTranslator(translation, sent.log)
    events: list[c.StreamEvent] = [
        c.MessageStart(id="up1", model="served-model"),
        c.BlockStart(index=0, kind="reasoning"),
        c.BlockDelta(index=0, text="Let me think."),
        c.BlockSignature(index=0, signature="sig1"),
        c.BlockStop(index=0),
    ]
    head = translator.feed(upstream_stream("anthropic_messages", events)) + translator.close()
    assert translator.held is not None and continuable(sent) and sent.text == ""
    assert continuation_request(request(), sent, mode) == request()
    _, tail = continue_with(client, "gemini_generate_content", translator, sent, mode, ANSWER)
    answer = client_answer(client, head + tail)
    assert text_of(answer) == FULL
    assert [p.text for p in answer.content if isinstance(p, c.Reasoning)] in (["Let me think."], [])


def test_frames_end_is_where_the_last_complete_frame_ends() -> None:
    assert frames_end(b"data: a\n\ndata: b") == len(b"data: a\n\n")
    assert frames_end(b"data: a\r\n\r\ndata: b\r\n") == len(b"data: a\r\n\r\n")
    assert frames_end(b"data: a") == 0
