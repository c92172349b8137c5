"""The faulty provider the routing tests rely on: its healthy answers and in-band
errors pass the strict wire validators of each protocol, and each fault is what it
says (prefill, a revoked key, overloaded, a reset, a cut, a stall, the log's times)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers.faulty_upstream import (
    ANSWER,
    REVOKED_KEY,
    WORDS,
    FaultyUpstream,
    faulty_upstream,
)
from tests.helpers.validate_anthropic import validate_anthropic_stream
from tests.helpers.validate_chat import validate_chat_stream
from tests.helpers.validate_gemini import gist_of, validate_gemini_stream
from tests.helpers.validate_responses import validate_responses_stream

PROTOCOLS = ["chat", "responses", "anthropic", "gemini"]


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FaultyUpstream, str]]:
    with faulty_upstream(scale=0.01) as served:
        yield served


def request(protocol: str, model: str, stream: bool, prefill: str | None = None,
            key: str = "sk-good") -> tuple[str, dict[str, Any], dict[str, str]]:  # fmt: skip
    """(path, body, headers) of one request in ``protocol``'s own shape."""
    user = "Say the sixty words."
    if protocol == "gemini":
        contents = [{"role": "user", "parts": [{"text": user}]}]
        if prefill is not None:
            contents.append({"role": "model", "parts": [{"text": prefill}]})
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"/v1beta/models/{model}:{method}", {"contents": contents}, {"x-goog-api-key": key}
    turns: list[dict[str, Any]] = [{"role": "user", "content": user}]
    if prefill is not None:
        turns.append({"role": "assistant", "content": prefill})
    if protocol == "responses":
        return "/v1/responses", {"model": model, "input": turns, "stream": stream}, {
            "authorization": f"Bearer {key}"}  # fmt: skip
    if protocol == "anthropic":
        body = {"model": model, "max_tokens": 100, "messages": turns, "stream": stream}
        return "/v1/messages", body, {"x-api-key": key}
    body = {"model": model, "messages": turns, "stream": stream,
            **({"stream_options": {"include_usage": True}} if stream else {})}  # fmt: skip
    return "/v1/chat/completions", body, {"authorization": f"Bearer {key}"}


def post(base: str, protocol: str, model: str, stream: bool, **kw: Any) -> httpx.Response:
    path, body, headers = request(protocol, model, stream, **kw)
    return httpx.post(base + path, json=body, headers=headers, timeout=5)


def text_of(protocol: str, stream: bool, body: bytes) -> str:
    """The answer's text, the stream checked by the protocol's strict validator."""
    if protocol == "chat":
        if stream:
            got = validate_chat_stream(body, include_usage=True)
            assert got.finish_reason == "stop" and got.usage is not None
            return got.content or ""
        return str(json.loads(body)["choices"][0]["message"]["content"])
    if protocol == "responses":
        if stream:
            snap = validate_responses_stream(body).response
            assert snap is not None and snap["status"] == "completed"
        else:
            snap = json.loads(body)
        return "".join(c["text"] for item in snap["output"] for c in item["content"])
    if protocol == "anthropic":
        if stream:
            a = validate_anthropic_stream(body)
            assert a.stop_reason == "end_turn"
            return "".join(b.text for b in a.blocks)
        return str(json.loads(body)["content"][0]["text"])
    gist = validate_gemini_stream(body).gist if stream else gist_of([json.loads(body)])
    assert gist["finish"] == "STOP" and gist["usage"]["candidatesTokenCount"] > 0
    return str(gist["text"])


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_healthy_answer_is_the_fixed_text_in_each_protocols_shape(
    fake: tuple[FaultyUpstream, str], protocol: str, stream: bool
) -> None:
    up, base = fake
    up.reset()
    r = post(base, protocol, "fb-ok", stream)
    assert r.status_code == 200
    assert text_of(protocol, stream, r.content) == ANSWER
    (attempt,) = up.log
    assert (attempt.protocol, attempt.stream, attempt.key) == (protocol, stream, "sk-good")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_prefill_gets_the_remainder_and_noprefill_rejects_it(
    fake: tuple[FaultyUpstream, str], protocol: str
) -> None:
    up, base = fake
    up.reset()
    done = " ".join(WORDS[:40])
    r = post(base, protocol, "fb-ok", True, prefill=done)
    assert done + text_of(protocol, True, r.content) == ANSWER
    assert up.log[0].prefill == done
    r = post(base, protocol, "fb-ok-noprefill", True, prefill=done)
    assert r.status_code == 400 and "prefill" in r.text


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_revoked_key_is_refused_as_each_provider_refuses_it(
    fake: tuple[FaultyUpstream, str], protocol: str
) -> None:
    _, base = fake
    r = post(base, protocol, "fb-ok", False, key=REVOKED_KEY)
    if protocol == "gemini":
        assert r.status_code == 400 and "API_KEY_INVALID" in r.text
    else:
        assert r.status_code == 401
    assert post(base, protocol, "fb-ok", False).status_code == 200  # other keys work


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_overloaded_is_529_on_anthropic_and_503_elsewhere(
    fake: tuple[FaultyUpstream, str], protocol: str
) -> None:
    r = post(fake[1], protocol, "fb-overloaded", False)
    if protocol == "anthropic":
        assert r.status_code == 529 and r.json()["error"]["type"] == "overloaded_error"
    else:
        assert r.status_code == 503


def test_in_band_errors_come_before_any_content_in_each_protocols_shape(
    fake: tuple[FaultyUpstream, str],
) -> None:
    base = fake[1]
    chat = validate_chat_stream(post(base, "chat", "fb-inband", True).content)
    assert chat.error is not None and not chat.content
    responses = validate_responses_stream(post(base, "responses", "fb-inband", True).content)
    assert responses.status == "failed"
    anthropic = validate_anthropic_stream(post(base, "anthropic", "fb-inband", True).content)
    assert anthropic.error is not None and anthropic.error["type"] == "overloaded_error"
    gemini = validate_gemini_stream(post(base, "gemini", "fb-inband", True).content)
    assert gemini.error is not None and gemini.error["status"] == "UNAVAILABLE"


def test_faults_are_chosen_by_model_and_counted_per_model(
    fake: tuple[FaultyUpstream, str],
) -> None:
    up, base = fake
    up.reset()
    first = post(base, "chat", "openai/fb-s01-429-retry-after", False)
    assert first.status_code == 429 and first.headers["retry-after-ms"] == "20"
    assert post(base, "chat", "fb-s01-429-retry-after", False).status_code == 200
    assert post(base, "chat", "fb-s03-500-then-200", False).status_code == 500
    assert post(base, "chat", "fb-s12-context-length", False).json()["error"]["code"] == (
        "context_length_exceeded"
    )
    assert [a.action for a in up.attempts("fb-s01-429-retry-after")] == [
        "429 rate_limit_exceeded", "200"]  # fmt: skip
    assert post(base, "chat", "gpt-4o", False).status_code == 404


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cut_stream_ends_without_its_last_chunk_after_forty_words(
    fake: tuple[FaultyUpstream, str], protocol: str
) -> None:
    path, body, headers = request(protocol, "fb-s08-stream-cut", True)
    got = b""
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", fake[1] + path, json=body, headers=headers) as r,
    ):
        for chunk in r.iter_bytes():
            got += chunk
    assert ANSWER.split()[39] in got.decode() and ANSWER.split()[40] not in got.decode()


def test_a_reset_comes_before_any_byte_and_only_once(fake: tuple[FaultyUpstream, str]) -> None:
    up, base = fake
    up.reset()
    with pytest.raises(httpx.TransportError):
        post(base, "chat", "fb-s05-reset", True)
    assert post(base, "chat", "fb-s05-reset", True).status_code == 200


def test_a_stall_keeps_the_socket_open_for_the_scaled_time() -> None:
    with faulty_upstream(scale=0.1) as (up, base):  # a 3 s stall
        path, body, headers = request("anthropic", "fb-s09-stream-stall", True)
        timeout = httpx.Timeout(5, read=0.3)
        with (
            pytest.raises(httpx.ReadTimeout),  # open and silent, not closed
            httpx.stream("POST", base + path, json=body, headers=headers, timeout=timeout) as r,
        ):
            for _ in r.iter_bytes():
                pass
        (attempt,) = up.log
        assert attempt.action == "200 stall after 20" and attempt.ended is None
