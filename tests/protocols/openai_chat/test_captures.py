"""Every real Chat capture decodes to the canonical content it shows."""

from __future__ import annotations

import json

import pytest
from openai.types.chat import ChatCompletion

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions, fold
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.openai_chat import CODEC
from proxai_asgi.sse import SSEDecoder
from tests.helpers.captures import capture_names, load, request_body, response_body
from tests.helpers.validate_chat import validate_chat_stream

from ._util import decode_stream, encode_stream, req, sdk_accumulate, sdk_calls

CHAT = capture_names("chat_")
# Selected by name (error recordings are *_err_*; the n=3 one has no request body), so
# the ids are the same whether or not the recordings are present.
WITH_REQUEST = [n for n in CHAT if "n3_choices" not in n]
SSE = [n for n in CHAT if "_sse_" in n]
JSON_OK = [n for n in CHAT if "_json_" in n]


def test_the_chat_captures_are_all_covered() -> None:
    assert len(CHAT) == 9 and len(SSE) == 4 and len(JSON_OK) == 4


@pytest.mark.parametrize("name", WITH_REQUEST)
def test_capture_request_decodes_as_a_client_request_and_re_encodes_unchanged(name: str) -> None:
    original = load(name)["request"]["body"]
    report = TranslationReport()
    r = CODEC.decode_request(request_body(name), report)
    assert report.dropped == []
    assert r.model == original["model"]
    field = "max_tokens" if "max_tokens" in original else "max_completion_tokens"
    again = CODEC.encode_request(
        r, TranslationReport(), UpstreamOptions(chat_max_tokens_field=field)
    )
    assert json.loads(again) == original


def test_capture_requests_have_the_expected_canonical_shape() -> None:
    r = CODEC.decode_request(request_body("chat_json_parallel_tool_calls"), TranslationReport())
    assert [t.text for t in r.system] == ["Use parallel tool calling."]
    assert r.tools[0].name == "secret_retrieval_tool" and r.tools[0].strict is False
    r = CODEC.decode_request(request_body("chat_json_refusal"), TranslationReport())
    assert r.response_format is not None and r.response_format.name == "FentanylHandbook"
    assert r.response_format.strict is True
    r = CODEC.decode_request(request_body("chat_sse_max_tokens_length"), TranslationReport())
    assert (r.max_tokens, r.stream, r.include_usage) == (50, True, True)


def test_capture_json_text_basic() -> None:
    r = CODEC.decode_response(response_body("chat_json_text_basic"))
    assert r.content == [c.Text(text="\\(4200 + 42 = 4242\\).")]
    assert r.stop_reason == "end_turn"
    assert r.usage == c.Usage(input_tokens=16, output_tokens=12)
    assert (r.id, r.model, r.created) == (
        "chatcmpl-CRkJFgcA6BuMrBur38ZHUXgT6zRjg",
        "gpt-4o-2024-08-06",
        1760728905,
    )


def test_capture_json_cached_tokens() -> None:
    r = CODEC.decode_response(response_body("chat_json_cached_tokens"))
    assert r.usage == c.Usage(input_tokens=3663, output_tokens=117, cached_tokens=3584)
    assert isinstance(r.content[0], c.Text) and r.content[0].text.startswith(
        '"Ah, the most important meal'
    )


def test_capture_json_parallel_tool_calls() -> None:
    r = CODEC.decode_response(response_body("chat_json_parallel_tool_calls"))
    assert r.content == [
        c.ToolCall(
            id="call_v6LacIrChvs6ITVpIZqy5tFc",
            name="secret_retrieval_tool",
            arguments='{"password": "mellon"}',
        ),
        c.ToolCall(
            id="call_onyWzk4mLTGKzW9cthmf4Llq",
            name="secret_retrieval_tool",
            arguments='{"password": "radiance"}',
        ),
    ]
    assert r.stop_reason == "tool_use"
    assert r.usage == c.Usage(input_tokens=75, output_tokens=53)


def test_capture_json_refusal() -> None:
    r = CODEC.decode_response(response_body("chat_json_refusal"))
    assert r.content == [c.Refusal(text="I'm very sorry, but I can't assist with that request.")]
    assert r.stop_reason == "refusal"


EXPECTED_SSE = {
    "chat_sse_text_basic_include_usage": (
        [c.Text(text="4200 + 42 equals 4242.")],
        "end_turn",
        c.Usage(input_tokens=16, output_tokens=10),
    ),
    "chat_sse_parallel_tool_calls": (
        [
            c.ToolCall(
                id="call_M26z19sncd7b4LBgzKRRbaUE",
                name="secret_retrieval_tool",
                arguments='{"password": "mellon"}',
            ),
            c.ToolCall(
                id="call_KPXe5NX7IcKkaBUhc6dto2QV",
                name="secret_retrieval_tool",
                arguments='{"password": "radiance"}',
            ),
        ],
        "tool_use",
        c.Usage(input_tokens=75, output_tokens=53),
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_SSE))
def test_capture_sse_decodes_to_the_expected_content(name: str) -> None:
    content, stop, usage = EXPECTED_SSE[name]
    r = fold(decode_stream(response_body(name)))
    assert (r.content, r.stop_reason, r.usage) == (content, stop, usage)


def test_capture_sse_max_tokens_length() -> None:
    r = fold(decode_stream(response_body("chat_sse_max_tokens_length")))
    assert r.stop_reason == "max_tokens"
    assert r.usage == c.Usage(input_tokens=14, output_tokens=50)
    assert len(r.content) == 1 and isinstance(r.content[0], c.Text)
    assert r.content[0].text.startswith("Here is a list of all 50 U.S. states:") and r.content[
        0
    ].text.endswith("10")


def test_capture_sse_with_three_choices_is_rejected_not_merged() -> None:
    with pytest.raises(ProxyError) as ei:
        decode_stream(response_body("chat_sse_n3_choices"))
    assert ei.value.status == 502 and "choice index 1" in ei.value.message


def _decode_in_pieces(body: bytes, cut: int) -> list[c.StreamEvent]:
    dec, sse = CODEC.stream_decoder(), SSEDecoder()
    evs: list[c.StreamEvent] = []
    for piece in (body[:cut], body[cut:]):
        for e in sse.decode(piece):
            evs += dec.feed(e)
    for e in sse.flush():
        evs += dec.feed(e)
    return evs + dec.close()


@pytest.mark.parametrize("name", [n for n in SSE if n != "chat_sse_n3_choices"])
def test_capture_sse_split_at_every_byte_gives_the_same_canonical_events(name: str) -> None:
    body = response_body(name)
    whole = decode_stream(body)
    assert decode_stream(body, step=1) == whole
    assert decode_stream(body.replace(b"\n", b"\r\n"), step=1) == whole
    for cut in range(len(body) + 1):
        assert _decode_in_pieces(body, cut) == whole, cut


@pytest.mark.parametrize("name", JSON_OK)
def test_capture_json_reencoded_for_a_chat_client_matches_the_upstream_answer(name: str) -> None:
    r = CODEC.decode_response(response_body(name))
    out = CODEC.encode_response(r, req())
    mine = ChatCompletion.model_validate_json(out)
    theirs = ChatCompletion.model_validate_json(response_body(name))
    assert (mine.id, mine.created, mine.model) == (theirs.id, theirs.created, theirs.model)
    a, b = mine.choices[0], theirs.choices[0]
    assert (a.message.content, a.message.refusal, a.finish_reason) == (
        b.message.content,
        b.message.refusal,
        b.finish_reason,
    )
    assert a.message.tool_calls == b.message.tool_calls
    assert mine.usage is not None and theirs.usage is not None
    assert (mine.usage.prompt_tokens, mine.usage.completion_tokens, mine.usage.total_tokens) == (
        theirs.usage.prompt_tokens,
        theirs.usage.completion_tokens,
        theirs.usage.total_tokens,
    )


@pytest.mark.parametrize("name", [n for n in SSE if n != "chat_sse_n3_choices"])
def test_capture_sse_reencoded_for_a_chat_client_accumulates_like_the_original(name: str) -> None:
    events = decode_stream(response_body(name))
    out = encode_stream(events, req(stream=True, include_usage=True))
    validate_chat_stream(out, include_usage=True)
    mine, theirs = sdk_accumulate(out), sdk_accumulate(response_body(name))
    assert (mine.id, mine.created, mine.model) == (theirs.id, theirs.created, theirs.model)
    a, b = mine.choices[0], theirs.choices[0]
    assert (a.message.content or None, a.message.refusal, a.finish_reason) == (
        b.message.content or None,
        b.message.refusal,
        b.finish_reason,
    )
    assert sdk_calls(a.message.tool_calls) == sdk_calls(b.message.tool_calls)
    assert mine.usage is not None and theirs.usage is not None
    assert mine.usage.total_tokens == theirs.usage.total_tokens


def test_capture_stream_decode_encode_decode_is_stable() -> None:
    for name in [n for n in SSE if n != "chat_sse_n3_choices"]:
        once = decode_stream(response_body(name))
        twice = decode_stream(encode_stream(once, req(stream=True, include_usage=True)))
        assert fold(twice) == fold(once)


def test_capture_401_error_keeps_status_message_and_code() -> None:
    err = CODEC.decode_error(401, response_body("chat_err_401_invalid_api_key"))
    assert err.status == 401 and err.kind == "authentication"
    assert err.message.startswith("Incorrect API key provided: invalid-*****2345.")
    assert err.code == "invalid_api_key" and err.param is None
    body = json.loads(CODEC.encode_error(err))
    assert body["error"]["message"] == err.message and body["error"]["code"] == "invalid_api_key"
