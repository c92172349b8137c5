"""What every registered codec must satisfy; a new codec joins by being registered.

The cross-direction suite (``tests/test_directions.py``) runs every recording through
every pair; this file checks each codec against itself: its declared identity is
coherent, and what its client side writes its upstream side reads back.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

from proxai_asgi import canonical as c
from proxai_asgi import pipeline
from proxai_asgi.codec import PROTOCOLS, Codec, PathCall, fold, unfold
from proxai_asgi.errors import ProxyError
from proxai_asgi.protocols import all_codecs, get_codec, model_listing

CODECS = all_codecs()
IDS = [codec.name for codec in CODECS]


def test_the_registry_lists_every_public_protocol_once() -> None:
    assert sorted(IDS) == sorted(PROTOCOLS)
    assert [get_codec(name) for name in PROTOCOLS] == [get_codec(n) for n in PROTOCOLS]


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_an_in_process_upstream_is_called_on_a_path_the_codec_serves(codec: Codec) -> None:
    for stream in (False, True):
        call = PathCall(model="some-model", stream=stream)
        parts = urlsplit(codec.inner_path(call))
        found = codec.serves(parts.path)
        assert found is not None and found.action == "generate"
        if codec.model_in_path:
            assert found.call == call  # the URL names the model and the stream flag
        else:
            assert found.call is None  # they are in the body


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_a_served_path_belongs_to_exactly_one_codec(codec: Codec) -> None:
    path = urlsplit(codec.inner_path(PathCall(model="m", stream=False))).path
    owners = [other.name for other in CODECS if other.serves(path) is not None]
    assert owners == [codec.name]


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_identity_declarations_are_well_formed(codec: Codec) -> None:
    assert codec.system and codec.system == codec.system.lower()
    assert codec.header_family and all(p == p.lower() for p in codec.header_family)
    assert codec.auth_header == codec.auth_header.lower()
    # Families are disjoint: a prefix belongs to one provider family.
    for other in CODECS:
        if other.header_family != codec.header_family:
            assert not set(other.header_family) & set(codec.header_family)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
@pytest.mark.parametrize("status", [400, 401, 404, 429, 500, 503])
def test_an_error_the_client_side_writes_the_upstream_side_reads_back(
    codec: Codec, status: int
) -> None:
    body = codec.encode_error(ProxyError(status, "the words of the error"))
    json.loads(body)
    back = codec.decode_error(status, body)
    assert back.status == status
    assert "the words of the error" in back.message


def _answer() -> c.Response:
    return c.Response(
        id="resp-conformance",
        model="m",
        content=[
            c.Text(text="Hello there."),
            c.ToolCall(id="call_1", name="lookup", arguments='{"q":"x"}'),
        ],
        stop_reason="tool_use",
        usage=c.Usage(input_tokens=11, output_tokens=7),
    )


def _essence(response: c.Response) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for part in response.content:
        if isinstance(part, c.Text):
            out.append(("text", part.text))
        elif isinstance(part, c.ToolCall):
            out.append((part.name, json.dumps(json.loads(part.arguments or "{}"))))
    return out


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_a_stream_the_encoder_writes_the_decoder_reads_back(codec: Codec) -> None:
    request = c.Request(model="m", messages=[], stream=True, include_usage=True)
    translation = pipeline.answering(codec, codec, request)
    encoder = codec.stream_encoder(request)
    raw = b"".join(encoder.encode(ev) for ev in unfold(_answer()))
    stream = pipeline.StreamCollector(translation)
    # Any byte split reads the same.
    for cut in range(0, len(raw), max(1, len(raw) // 7)):
        one = pipeline.StreamCollector(translation)
        one.feed(raw[:cut])
        one.feed(raw[cut:])
        assert _essence(one.close()) == _essence(_answer())
    stream.feed(raw)
    back = stream.close()
    assert _essence(back) == _essence(_answer())
    assert back.stop_reason == "tool_use"


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_an_answer_the_encoder_writes_the_decoder_reads_back_as_its_stream_does(
    codec: Codec,
) -> None:
    request = c.Request(model="m", messages=[])
    whole = codec.decode_response(codec.encode_response(_answer(), request))
    assert _essence(whole) == _essence(_answer())
    assert _essence(fold(unfold(whole))) == _essence(whole)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_a_models_listing_the_client_side_writes_the_upstream_side_reads(codec: Codec) -> None:
    names = ["alpha", "beta-2"]
    assert codec.model_ids(codec.encode_model_list(names, b"")) == names


def test_a_listing_is_answered_in_the_shape_the_request_asks_for() -> None:
    assert model_listing("/v1/models", [], b"").name == "openai_chat_completions"
    version = [(b"anthropic-version", b"2023-06-01")]
    assert model_listing("/v1/models", version, b"").name == "anthropic_messages"
    assert model_listing("/v1beta/models", [], b"").name == "gemini_generate_content"
    google_key = [(b"x-goog-api-key", b"k")]
    assert model_listing("/v1/models", google_key, b"").name == "gemini_generate_content"
