"""Request and response heads of the lean pool (``proxai_asgi.transport.http1_head``): the same
bytes, the same parse and the same refusals as h11, whatever the head; the usual head
never reaches h11; a head h11 refuses is a 502 in the client's own shape.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import h11
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.transport import http1_head
from proxai_asgi.transport.http1_head import Hangup, Head, Malformed, Sent, Unsendable
from tests.helpers.servers import serve
from tests.reliability._raw import Conn, RawServer
from tests.reliability._shapes import error_message

# Bytes chosen to hit every rule: token characters, separators, whitespace of each
# kind, NUL, obs-text, and the letters of the names h11 treats specially.
_BYTES = st.sampled_from(
    [
        *(b"a", b"Z", b"0", b"-", b"!", b"~", b":", b";", b",", b" ", b"\t", b"\r", b"\n"),
        *(b"\x00", b"\x0b", b"\x7f", b"\x80", b"\xff", b'"', b"/", b"=", b"5"),
    ]
)
_SOME = st.lists(_BYTES, max_size=6).map(b"".join)
_NAMES = st.one_of(
    st.sampled_from(
        [b"content-type", b"Host", b"Content-Length", b"transfer-encoding", b"x-a", b"upgrade"]
    ),
    _SOME,
)
_VALUES = st.one_of(st.sampled_from([b"", b"application/json", b"a b", b"chunked", b"12"]), _SOME)


def _h11_request(sent: Sent) -> bytes | str:
    conn = h11.Connection(h11.CLIENT)
    try:
        out = conn.send(
            h11.Request(method=sent.method, target=sent.target, headers=sent.h11_headers())
        )
        out = (out or b"") + ((conn.send(h11.Data(data=sent.body)) or b"") if sent.body else b"")
        return out + (conn.send(h11.EndOfMessage()) or b"")
    except h11.LocalProtocolError as exc:
        return str(exc)


def _ours(sent: Sent) -> bytes | str:
    try:
        return http1_head.write_request(sent)
    except Unsendable as exc:
        return str(exc)


@settings(max_examples=400, deadline=None)
@given(
    method=st.sampled_from([b"POST", b"GET", b"DELETE", b"P OST", b"", b"G\xe9T"]),
    target=st.one_of(st.sampled_from([b"/v1/chat", b"/a?b=c", b"/"]), _SOME),
    host=st.one_of(st.sampled_from([b"127.0.0.1:8000", b"api.example"]), _SOME),
    headers=st.lists(st.tuples(_NAMES, _VALUES), max_size=4),
    body=st.sampled_from([b"", b"{}", b'{"a":1}']),
    identity=st.booleans(),
)
def test_requests_are_written_and_refused_as_h11_writes_and_refuses_them(
    method: bytes, target: bytes, host: bytes, headers: Any, body: bytes, identity: bool
) -> None:
    sent = Sent(method, target, host, headers, body, identity)
    assert _ours(sent) == _h11_request(sent)


_SENT = Sent(
    b"POST", b"/v1/x", b"127.0.0.1:1", [(b"content-type", b"application/json")], b"{}", True
)


def _h11_head(received: bytes, eof: bool) -> Head | str | None:
    """The oracle: h11 fed the whole exchange, read to its first final answer."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=b"POST", target=b"/v1/x", headers=_SENT.h11_headers()))
    conn.send(h11.Data(data=b"{}"))
    conn.send(h11.EndOfMessage())
    for data in [received] * bool(received) + [b""] * eof:  # b"" is the close
        conn.receive_data(data)
    try:
        event = conn.next_event()
        while type(event) is h11.InformationalResponse:
            event = conn.next_event()
    except h11.RemoteProtocolError as exc:
        return f"malformed: {exc}"
    if type(event) is not h11.Response:
        return None if event is h11.NEED_DATA else "hangup"
    return Head(event.status_code, event.http_version, list(event.headers), conn.trailing_data[0])


def _read(received: bytes, eof: bool) -> Head | str | None:
    try:
        return http1_head.read_head(_SENT, received, eof)
    except Malformed as exc:
        return f"malformed: {exc}"
    except Hangup:
        return "hangup"


STATUS_LINES = [
    *(
        b"HTTP/1.1 200 OK",
        b"HTTP/1.0 204 No Content",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK",
    ),
    *(b"HTTP/1.1 404", b"HTTP/1.1 200 ", b"HTTP/2.0 999 x", b"HTTP/1.1 099 x", b"SMTP ready"),
    *(b"HTTP/1.1 20 OK", b"http/1.1 200 OK", b"HTTP/1.1  200 OK", b" HTTP/1.1 200 OK"),
    *(
        b"HTTP/1.1 101 Switching",
        b"HTTP/1.1 200 \x80\t",
        b"HTTP/1.1 200 O\x00K",
        b"\r\nHTTP/1.1 200 OK",
    ),
]
FIELDS = [
    *(b"Content-Type: text/event-stream", b"content-length: 2", b"Content-Length:  2 ", b"X-A:"),
    *(b"Transfer-Encoding: chunked", b"transfer-encoding: CHUNKED", b"Transfer-Encoding: gzip"),
    *(b"Content-Length: 2, 2", b"Content-Length: 3", b"Content-Length: x", b" folded"),
    *(b"Connection: close", b"X: a\tb", b"Content-Length: " + b"9" * 21, b"Content-Length: +2"),
    *(
        b"Content-Length: " + b"9" * 20,
        b"X : y",
        b"X:\x00",
        b"\xffX: y",
        b"X: \x80\xff",
        b"X: a\x0bb",
    ),
]
_STATUS = st.one_of(st.sampled_from(STATUS_LINES), _SOME.map(lambda junk: b"HTTP/1.1 200 " + junk))
_FIELD = st.one_of(
    st.sampled_from(FIELDS),
    st.tuples(_NAMES, st.sampled_from([b":", b": ", b" :", b""]), _VALUES).map(b"".join),
)
_EOL = st.sampled_from([b"\r\n", b"\r\n", b"\r\n", b"\n"])


@settings(max_examples=600, deadline=None)
@given(
    status=_STATUS,
    fields=st.lists(st.tuples(_FIELD, _EOL), max_size=5),
    ends=st.tuples(_EOL, _EOL),
    rest=st.sampled_from([b"", b"{}", b"2\r\n{}\r\n0\r\n\r\n"]),
    cut=st.integers(min_value=0, max_value=400),
    eof=st.booleans(),
)
def test_answer_heads_are_parsed_and_refused_as_h11_parses_and_refuses_them(
    status: bytes, fields: list[tuple[bytes, bytes]], ends: Any, rest: bytes, cut: int, eof: bool
) -> None:
    whole = status + ends[0] + b"".join(f + eol for f, eol in fields) + ends[1] + rest
    for received in (whole, whole[:cut]):  # whole, and cut where a read may end
        assert _read(received, eof) == _h11_head(received, eof)


@pytest.mark.parametrize("status", STATUS_LINES)
@pytest.mark.parametrize("field", FIELDS)
def test_each_rule_of_a_head_is_h11s(status: bytes, field: bytes) -> None:
    for fields in ([field], [b"content-length: 2", field], [field, field]):
        whole = status + b"\r\n" + b"\r\n".join(fields) + b"\r\n\r\n{}"
        for eof in (False, True):
            assert _read(whole, eof) == _h11_head(whole, eof)
            assert _read(whole[:-6], eof) == _h11_head(whole[:-6], eof)


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        b"date: Wed, 25 Nov 2026 00:00:00 GMT\r\nserver: uvicorn\r\n\r\n5\r\nhello\r\n",
        b"HTTP/1.0 429 Too Many Requests\r\nRetry-After:  3 \r\nX-Empty:\r\n\r\n",
    ],
)
def test_usual_heads_are_written_and_parsed_without_h11(
    answer: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_h11(*_: object) -> None:
        raise AssertionError("h11 was asked")

    expected = _h11_head(answer, False)
    request = _h11_request(_SENT)
    monkeypatch.setattr(http1_head, "_h11_client", no_h11)
    monkeypatch.setattr(http1_head, "_h11_head", no_h11)
    assert http1_head.write_request(_SENT) == request
    assert http1_head.read_head(_SENT, answer, False) == expected
    assert http1_head.read_head(_SENT, answer[:20], False) is None  # a head still arriving


_MALFORMED = {
    "status-line": b"HTTP/1.1 OK\r\nContent-Length: 2\r\n\r\n{}",
    "header-bytes": b"HTTP/1.1 200 OK\r\nContent-Type: a\x00b\r\nContent-Length: 2\r\n\r\n{}",
    "conflicting-length": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    "unsupported-coding": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    "two-transfer-encodings": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
    ),
}


async def _malformed(conn: Conn) -> None:
    model = conn.request.json().get("model", "")
    await conn.raw(_MALFORMED[model])


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    with RawServer(_malformed).running() as raw:
        up = Upstream("openai_chat_completions", raw.url + "/v1", "sk-secret", max_retries=0)
        with serve(ProxaiMiddleware(_no_app, upstream=up)) as base:
            yield base


async def _no_app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


@pytest.mark.parametrize("fault", sorted(_MALFORMED))
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_a_head_h11_refuses_is_a_502_in_each_clients_shape(
    proxy: str, fault: str, stream: bool
) -> None:
    messages = [{"role": "user", "content": "hi"}]
    chat = openai.OpenAI(base_url=proxy + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.APIStatusError) as chat_error:
        chat.chat.completions.create(model=fault, messages=messages, stream=stream)  # type: ignore[arg-type]
    claude = anthropic.Anthropic(base_url=proxy, api_key="x", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as claude_error:
        claude.messages.create(model=fault, max_tokens=5, messages=messages, stream=stream)  # type: ignore[arg-type]
    for err, protocol in (
        (chat_error.value, "openai_chat_completions"),
        (claude_error.value, "anthropic_messages"),
    ):
        assert err.status_code == 502
        assert "not well-formed" in error_message(protocol, err.response.json())
        assert "sk-secret" not in err.response.text
