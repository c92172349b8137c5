"""The Gemini recordings through the Gemini codec alone, both sides.

- every recorded request decodes, and decode -> encode -> decode gives the same request;
- every recorded answer decodes, and what a Gemini client gets decodes back to it;
- a recorded stream folds to the answer its frames add up to, whatever the chunking;
- a recorded stream re-encoded for a Gemini client passes the strict validator and
  decodes back to the same events' answer;
- the recorded error keeps Google's status and message.
"""

from __future__ import annotations

import json

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions, fold
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols.gemini_generate_content import CODEC
from tests.helpers.captures import capture_names, load, request_body, response_body
from tests.helpers.validate_gemini import gist_of, validate_gemini_stream

from ._util import encode_stream, frames, merged, stream_events, url_model

ALL = capture_names("gemini_")
OK = [n for n in ALL if "_err_" not in n]
SSE = [n for n in OK if "_sse_" in n]
JSON = [n for n in OK if "_json_" in n]


def _decode(body: bytes, name: str) -> c.Request:
    return CODEC.decode_request(body, TranslationReport(), url_model(name), "_sse_" in name)  # type: ignore[call-arg]


@pytest.mark.parametrize("name", ALL)
def test_every_recorded_request_decodes_and_survives_a_round_trip(name: str) -> None:
    first = _decode(request_body(name), name)
    assert first.model == url_model(name) and first.messages
    again = _decode(CODEC.encode_request(first, TranslationReport(), UpstreamOptions()), name)
    assert again == first


def _client_view(r: c.Response) -> c.Response:
    """What re-decoding a Gemini client's answer gives: a blocked answer with no text
    shows its explanation as text."""
    if r.stop_reason in ("refusal", "content_filter") and not any(
        isinstance(p, c.Text) for p in r.content
    ):
        r.content.append(c.Text(text=r.refusal_explanation or ""))
    return r


@pytest.mark.parametrize("name", JSON)
def test_every_recorded_answer_decodes_and_a_gemini_clients_copy_decodes_back(name: str) -> None:
    r = CODEC.decode_response(response_body(name))
    assert r.id and r.model and r.stop_reason is not None
    client = CODEC.encode_response(r, c.Request(model="m", messages=[]))
    assert CODEC.decode_response(client) == _client_view(r)


@pytest.mark.parametrize("name", SSE)
def test_a_recorded_stream_folds_to_the_answer_its_frames_add_up_to(name: str) -> None:
    body = response_body(name)
    assert fold(stream_events(body)) == CODEC.decode_response(merged(frames(body)))


@pytest.mark.parametrize("name", SSE)
def test_stream_events_are_the_same_whatever_the_chunk_boundaries(name: str) -> None:
    body = response_body(name)
    whole = stream_events(body)
    step = 1 if len(body) < 6_000 else 7
    for i in range(1, len(body), step):
        assert stream_events(body, [body[:i], body[i:]]) == whole, i
    assert stream_events(body, [bytes([b]) for b in body]) == whole


@pytest.mark.parametrize("name", SSE)
def test_a_recorded_stream_re_encoded_for_a_gemini_client_decodes_back(name: str) -> None:
    events = stream_events(response_body(name))
    out = encode_stream(events)
    assert validate_gemini_stream(out).error is None
    assert fold(stream_events(out)) == _client_view(fold(events))


@pytest.mark.parametrize("name", SSE)
def test_streamed_and_whole_answers_agree_for_a_gemini_client(name: str) -> None:
    events = stream_events(response_body(name))
    streamed = validate_gemini_stream(encode_stream(events)).gist
    whole = json.loads(CODEC.encode_response(fold(events), c.Request(model="m", messages=[])))
    assert streamed == gist_of([whole])


def test_the_recorded_404_keeps_googles_status_and_message() -> None:
    name = "gemini_err_404_model_not_found"
    err = CODEC.decode_error(load(name)["response"]["status"], response_body(name))
    assert (err.status, err.kind) == (404, "not_found")
    assert err.message.startswith("models/this-model-does-not-exist-12345 is not found")
    assert json.loads(CODEC.encode_error(err)) == {
        "error": {"code": 404, "message": err.message, "status": "NOT_FOUND"}
    }
