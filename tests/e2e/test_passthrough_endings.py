"""Pass-through relays the upstream's bytes, but the exchange around them is ours:
every case here runs for the three same-protocol pairs over both transports (an HTTP
upstream and the wrapped app)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.helpers.servers import FakeUpstream, Reply, reply_from_capture

from .conftest import Stack
from .test_errors import assert_shape

PROTOCOLS = ["openai_chat_completions", "openai_responses", "anthropic_messages"]
PATH = {
    "openai_chat_completions": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
    "anthropic_messages": "/v1/messages",
}
STREAM_CAPTURE = {
    "openai_chat_completions": "chat_sse_parallel_tool_calls",
    "openai_responses": "responses_sse_parallel_function_calls",
    "anthropic_messages": "anthropic_sse_parallel_tool_use",
}
JSON_CAPTURE = {
    "openai_chat_completions": "chat_json_text_basic",
    "openai_responses": "responses_json_text_basic",
    "anthropic_messages": "anthropic_json_text_basic",
}
NGINX_502 = b"<html><body><h1>502 Bad Gateway</h1>nginx</body></html>"
SCRIPTED_500 = b"<html><script>var x=1;</script><p>Internal failure</p></html>"
transports = pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
protocols = pytest.mark.parametrize("protocol", PROTOCOLS)


def request(protocol: str, stream: bool) -> dict[str, object]:
    if protocol == "anthropic_messages":
        body: dict[str, object] = {
            "model": "m",
            "max_tokens": 20,
            "messages": [{"role": "user", "content": "hi"}],
        }
    elif protocol == "openai_responses":
        body = {"model": "m", "input": "hi"}
    else:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        body["stream"] = True
    return body


def appended_frames(relayed: bytes, body: bytes) -> list[tuple[str | None, dict[str, object]]]:
    """The frames the proxy wrote after the upstream's bytes (which are the
    upstream's own and are not ours to validate)."""
    assert body.startswith(relayed)
    frames = []
    for block in body[len(relayed) :].replace(b"\r\n", b"\n").split(b"\n\n"):
        event, data = None, None
        for line in block.split(b"\n"):
            if line.startswith(b"event: "):
                event = line[7:].decode()
            elif line.startswith(b"data: "):
                data = line[6:]
        if data is not None:
            frames.append((event, json.loads(data) if data != b"[DONE]" else {"done": True}))
    return frames


def assert_ends_with_terminal_error(protocol: str, relayed: bytes, body: bytes) -> None:
    """After the relayed bytes comes exactly the protocol's own terminal error."""
    frames = appended_frames(relayed, body)
    if protocol == "anthropic_messages":
        assert len(frames) == 1 and frames[0][0] == "error"
        assert frames[0][1]["type"] == "error"
        validate_anthropic_error = frames[0][1]["error"]
        assert isinstance(validate_anthropic_error, dict) and validate_anthropic_error["message"]
    elif protocol == "openai_chat_completions":
        assert [f[1].get("done") for f in frames] == [None, True]
        assert set(frames[0][1]["error"]) == {"message", "type", "param", "code"}  # type: ignore[arg-type]
    else:
        assert [f[0] for f in frames] == ["error", "response.failed"]
        failed = frames[1][1]["response"]
        assert isinstance(failed, dict) and failed["status"] == "failed" and failed["error"]


@transports
@protocols
def test_a_cut_non_streamed_body_is_a_502_in_the_client_shape_never_half_a_body(
    stack: Stack, fake: FakeUpstream, protocol: str, inner: bool
) -> None:
    whole = reply_from_capture(JSON_CAPTURE[protocol]).chunks[0]
    headers = [("content-type", "application/json"), ("content-length", str(len(whole)))]
    fake.push(Reply(200, headers, [whole[: len(whole) // 2]], crash_after=1))
    proxy = stack.proxy(fake, protocol, inner=inner, max_retries=0)  # type: ignore[arg-type]
    if inner:
        # The wrapped app alone in the client's protocol is relayed as it sends: a
        # cut body closes the client's connection at once (a protocol error, not a
        # ReadTimeout after one second).
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(proxy + PATH[protocol], json=request(protocol, False), timeout=1.0)
        return
    # An HTTP upstream's body is read whole before anything is sent (so a cut one
    # can be retried): with nothing sent, a clean error at once, not half a body.
    r = httpx.post(proxy + PATH[protocol], json=request(protocol, False), timeout=1.0)
    assert r.status_code == 502
    assert assert_shape(protocol, r)


@protocols
def test_a_wrapped_app_body_shorter_than_its_content_length_closes_the_client_connection(
    stack: Stack, fake: FakeUpstream, protocol: str
) -> None:
    # (Over HTTP the upstream's server cannot end a response short: it drops the
    # connection, which is the crash case above.)
    inner = True
    whole = reply_from_capture(JSON_CAPTURE[protocol]).chunks[0]
    headers = [("content-type", "application/json"), ("content-length", str(len(whole)))]
    fake.push(Reply(200, headers, [whole[:10]]))
    proxy = stack.proxy(fake, protocol, inner=inner)  # type: ignore[arg-type]
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(proxy + PATH[protocol], json=request(protocol, False), timeout=1.0)


@transports
@protocols
@pytest.mark.parametrize(
    ("status", "ctype", "page", "needle"),
    [
        (502, "text/html", NGINX_502, "Bad Gateway"),
        (500, "text/html", SCRIPTED_500, "Internal failure"),
        (503, "text/plain", b"", ""),
    ],
    ids=["nginx-502", "html-500-script", "empty-503"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_non_json_error_page_becomes_an_error_in_the_client_shape_with_its_status(
    stack: Stack,
    fake: FakeUpstream,
    protocol: str,
    inner: bool,
    status: int,
    ctype: str,
    page: bytes,
    needle: str,
    stream: bool,
) -> None:
    fake.push(Reply(status, [("content-type", ctype), ("retry-after", "7")], [page]))
    # Not retried here: the page is the answer (tests/routing/ retries).
    proxy = stack.proxy(fake, protocol, inner=inner, max_retries=0)  # type: ignore[arg-type]
    r = httpx.post(proxy + PATH[protocol], json=request(protocol, stream), timeout=10)
    assert r.status_code == status
    assert r.headers["content-type"].startswith("application/json")
    assert r.headers["retry-after"] == "7"
    message = assert_shape(protocol, r)
    assert needle in message and "<" not in message and "var x" not in message
    assert message  # an empty page still says what happened


@transports
@protocols
def test_a_json_error_passes_through_untouched(
    stack: Stack, fake: FakeUpstream, protocol: str, inner: bool
) -> None:
    body = b'{"error": {"message": "quota", "type": "insufficient_quota", "extra": [1, 2]}}'
    fake.push(Reply(429, [("content-type", "application/json"), ("retry-after", "3")], [body]))
    proxy = stack.proxy(fake, protocol, inner=inner)  # type: ignore[arg-type]
    r = httpx.post(proxy + PATH[protocol], json=request(protocol, False), timeout=10)
    assert (r.status_code, r.content, r.headers["retry-after"]) == (429, body, "3")


@transports
@protocols
@pytest.mark.parametrize("how", ["ends-early", "breaks"])
def test_a_stream_without_its_terminal_event_ends_with_the_protocols_terminal_error(
    stack: Stack, fake: FakeUpstream, protocol: str, inner: bool, how: str
) -> None:
    reply = reply_from_capture(STREAM_CAPTURE[protocol])
    keep = len(reply.chunks) // 2
    if how == "ends-early":
        reply.chunks = reply.chunks[:keep]
    else:
        reply.crash_after = keep
    fake.push(reply)
    proxy = stack.proxy(fake, protocol, inner=inner)  # type: ignore[arg-type]
    r = httpx.post(proxy + PATH[protocol], json=request(protocol, True), timeout=10)
    assert r.status_code == 200
    relayed = b"".join(reply.chunks[:keep])  # the upstream's bytes, untouched
    assert_ends_with_terminal_error(protocol, relayed, r.content)


@transports
def test_a_responses_error_continues_the_upstreams_sequence_numbers_and_response(
    stack: Stack, fake: FakeUpstream, inner: bool
) -> None:
    reply = reply_from_capture("responses_sse_parallel_function_calls")
    reply.chunks = reply.chunks[:7]
    fake.push(reply)
    proxy = stack.proxy(fake, "openai_responses", inner=inner)
    r = httpx.post(proxy + "/v1/responses", json=request("openai_responses", True), timeout=10)
    events = [
        json.loads(line[6:])
        for line in r.content.decode().splitlines()
        if line.startswith("data: ")
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert events[-1]["response"]["id"] == events[0]["response"]["id"]


@transports
@protocols
def test_a_complete_stream_is_relayed_byte_for_byte_with_nothing_appended(
    stack: Stack, fake: FakeUpstream, protocol: str, inner: bool
) -> None:
    reply = reply_from_capture(STREAM_CAPTURE[protocol])
    fake.push(reply)
    proxy = stack.proxy(fake, protocol, inner=inner)  # type: ignore[arg-type]
    r = httpx.post(proxy + PATH[protocol], json=request(protocol, True), timeout=10)
    assert r.content == b"".join(reply.chunks)
