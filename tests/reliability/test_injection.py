"""Client values never steer the upstream request, our headers or our logs (issue 26).

- A model that goes into a path-addressed (Gemini) upstream URL is one path segment:
  ``../``, ``?``, ``#``, percent forms and ``:`` are a 400 in the client's own shape
  naming ``model``, before anything is sent -- also when they made a route glob match --
  over the lean pool, httpx and the wrapped app; so is a Gemini client's own path model.
- A control character in any model is a 400 in the client's shape (under httpx it was an
  unhandled 500), whatever the upstream.
- A Gemini ``?key=`` whose decoded value holds CR/LF adds no header upstream (400).
- Keys and configured headers with control characters are refused at configuration, the
  key never shown; no HTTP library's refusal text reaches a client.
- The upstream key is masked when it arrives split across two reads.
- Model names and dropped field names cannot forge log lines, span attributes or break
  the ``x-proxai-dropped-fields`` header.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Route, Upstream
from proxai_asgi.server.cli import build_app, build_parser, main
from proxai_asgi.server.config import ConfigError
from tests.helpers.captures import path_of
from tests.helpers.otel import span_exporter
from tests.helpers.servers import reply_from_capture

from ._raw import Conn, LoopServer, RawServer
from ._shapes import error_message
from .corpus import ANTHROPIC, CHAT, CLIENTS, GEMINI, PATH, PROTOCOLS, RESPONSES
from .test_security import JSON_CAPTURE, SSE_CAPTURE  # the recordings each protocol answers with

KEY = "sk-upstream-S3CRET-7e1f0a92c4"
TRANSPORTS = ("lean", "httpx", "inner")
BODY_PATHS = {"/v1/chat/completions": CHAT, "/v1/responses": RESPONSES, "/v1/messages": ANTHROPIC}


@pytest.fixture(autouse=True)
def _recordings() -> None:
    for name in (*JSON_CAPTURE.values(), *SSE_CAPTURE.values()):
        path_of(name)


def _protocol_of(path: str) -> tuple[str, bool | None]:
    """The upstream protocol a path is for, and (Gemini) whether it streams."""
    path = path.removeprefix("/gw")
    if path.startswith("/v1beta/models/"):
        return GEMINI, path.endswith(":streamGenerateContent")
    return BODY_PATHS[path], None


def _split_key_json() -> bytes:
    doc = json.loads(reply_from_capture(JSON_CAPTURE[CHAT]).chunks[0])
    doc["choices"][0]["message"]["content"] = f"your key is {KEY}, isn't it"
    return json.dumps(doc).encode()


def _split_key_frames() -> list[bytes]:
    frames = reply_from_capture(SSE_CAPTURE[CHAT]).chunks
    delta = {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": f"key {KEY}"}, "finish_reason": None}],
    }
    return [frames[0], b"data: " + json.dumps(delta).encode() + b"\n\n", *frames[1:]]


def _halves(data: bytes) -> tuple[bytes, bytes]:
    """``data`` cut in the middle of the key."""
    cut = data.index(KEY.encode()) + len(KEY) // 2
    return data[:cut], data[cut:]


async def answer(conn: Conn) -> None:
    """A protocol-correct answer from the recordings; model ``split_key`` (Chat) answers
    with the credential it got, cut into two writes in the middle of the key."""
    path = conn.request.target.split("?")[0]
    protocol, stream = _protocol_of(path)
    body = conn.request.json()
    if stream is None:
        stream = bool(body.get("stream"))
    if body.get("model") == "split_key":
        if stream:
            await conn.head(200, [("Content-Type", "text/event-stream")], chunked=True)
            for frame in _split_key_frames():
                if KEY.encode() in frame:
                    first, second = _halves(frame)
                    await conn.chunk(first)
                    await asyncio.sleep(0.05)  # two reads on the proxy's side
                    await conn.chunk(second)
                else:
                    await conn.chunk(frame)
            await conn.end_chunks()
        else:
            whole = _split_key_json()
            first, second = _halves(whole)
            headers = [("Content-Type", "application/json"), ("Content-Length", str(len(whole)))]
            await conn.head(200, headers, chunked=False)
            await conn.raw(first)
            await asyncio.sleep(0.05)
            await conn.raw(second)
        return
    if stream:
        await conn.head(200, [("Content-Type", "text/event-stream")], chunked=True)
        for frame in reply_from_capture(SSE_CAPTURE[protocol]).chunks:
            await conn.chunk(frame)
        await conn.end_chunks()
        return
    await conn.json_reply(200, reply_from_capture(JSON_CAPTURE[protocol]).chunks[0])


class InnerApp:
    """The wrapped app as upstream: answers every LLM path from the recordings and
    records the scopes it was called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes, list[tuple[bytes, bytes]]]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.calls.append((scope["path"], scope["query_string"], list(scope["headers"])))
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            protocol, stream = _protocol_of(scope["path"])
        except KeyError:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"inner app"})
            return
        if stream is None:
            stream = bool(json.loads(body).get("stream"))
        reply = reply_from_capture((SSE_CAPTURE if stream else JSON_CAPTURE)[protocol])
        ctype = b"text/event-stream" if stream else b"application/json"
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", ctype)]}
        )
        for chunk in reply.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


def _base(url: str, protocol: str) -> str:
    if protocol in (CHAT, RESPONSES):
        return url + "/v1"
    return url + "/gw" if protocol == GEMINI else url  # a base path the model must not leave


class Rig:
    def __init__(self, es: ExitStack) -> None:
        self.es = es
        self.raw = es.enter_context(RawServer(answer).running())
        self.inner = InnerApp()
        self._proxies: dict[tuple[str, str, str, bool], str] = {}

    def proxy(self, transport: str, target: str, glob: str = "*", key: bool = True) -> str:
        """The URL of a proxy whose route ``glob`` goes to a ``target`` upstream."""
        at = (transport, target, glob, key)
        if at not in self._proxies:
            if transport == "inner":
                up = Upstream.inner_app(target)  # type: ignore[arg-type]
            else:
                up = Upstream(target, _base(self.raw.url, target), KEY if key else None)  # type: ignore[arg-type]
            app = ProxaiMiddleware(
                self.inner, routes=[Route(glob, up)], lean_http=transport != "httpx"
            )
            self._proxies[at] = self.es.enter_context(LoopServer(app)).url
        return self._proxies[at]

    def seen(self) -> int:
        """Requests any upstream (HTTP or the wrapped app) has been sent so far."""
        return len(self.raw.requests) + len(self.inner.calls)


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    with ExitStack() as es:
        yield Rig(es)


def body_for(client: str, model: str, stream: bool, **extra: Any) -> dict[str, Any]:
    if client == GEMINI:
        b: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    elif client == CHAT:
        b = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    elif client == RESPONSES:
        b = {"model": model, "input": "hi"}
    else:
        b = {"model": model, "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
    if stream and client != GEMINI:
        b["stream"] = True
    b.update(extra)
    return b


def gemini_path(model: str, stream: bool) -> str:
    """A Gemini client's path, the model percent-encoded as an SDK would send it."""
    quoted = "".join(ch if ch.isalnum() or ch in "._-" else f"%{ord(ch):02X}" for ch in model)
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/v1beta/models/{quoted}:{method}"


def post(url: str, client: str, model: str, stream: bool, **extra: Any) -> httpx.Response:
    path = gemini_path(model, stream) if client == GEMINI else PATH[client]
    return httpx.post(url + path, json=body_for(client, model, stream, **extra), timeout=10)


def assert_refused(r: httpx.Response, client: str, param: str = "model") -> str:
    """A 400 in ``client``'s error shape naming ``param``; returns the message."""
    assert r.status_code == 400, (r.status_code, r.text[:300])
    body = r.json()
    message = error_message(client, body)
    assert param in message.lower(), message
    if client in (CHAT, RESPONSES):
        assert body["error"]["param"] == param, body
    return message


# ------------------------------------------------------------------ URLs (defect 2)

# Each starts with "gemini-", so the route glob "gemini-*" matches it.
STEERING_MODELS = [
    "gemini-flash/../gemini-ultra",
    "gemini-x/../../../v1/evil",
    "gemini-x?alt=evil&key=x",
    "gemini-x#fragment",
    "gemini-x%2f..%2fgemini-ultra",
    "gemini-x%3Fq=1",
    "gemini-x\\..\\evil",
    "gemini-x y",
]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("client", PROTOCOLS)
def test_a_model_cannot_steer_a_path_addressed_upstream_url(
    rig: Rig, client: str, transport: str
) -> None:
    url = rig.proxy(transport, GEMINI, glob="gemini-*")
    before = rig.seen()
    for model in STEERING_MODELS:
        for stream in (False, True):
            assert_refused(post(url, client, model, stream), client)
    assert rig.seen() == before, "a steering model reached the upstream"
    for stream in (False, True):
        r = post(url, client, "gemini-2.5-flash", stream)
        assert r.status_code == 200, r.text[:300]
    if transport == "inner":
        paths = [(p, q) for p, q, _ in rig.inner.calls[-2:]]
        assert paths == [
            ("/v1beta/models/gemini-2.5-flash:generateContent", b""),
            ("/v1beta/models/gemini-2.5-flash:streamGenerateContent", b"alt=sse"),
        ]
    else:
        assert [r.target for r in rig.raw.requests[-2:]] == [
            "/gw/v1beta/models/gemini-2.5-flash:generateContent",
            "/gw/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        ]


PATH_MODELS = ["..", ".", "m?key=stolen", "m#frag", "a/../b", "m%2e", "m\r\nx", "m\x00"]


@pytest.mark.parametrize("target", [GEMINI, CHAT])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_gemini_clients_path_model_is_one_segment(rig: Rig, transport: str, target: str) -> None:
    url = rig.proxy(transport, target)
    before = rig.seen()
    for model in PATH_MODELS:
        for stream in (False, True):
            r = post(url, GEMINI, model, stream)
            assert_refused(r, GEMINI)
            assert r.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert rig.seen() == before, "an unsafe path model was forwarded"
    assert post(url, GEMINI, "gemini-2.5-flash", False).status_code == 200


def test_a_route_cannot_rewrite_to_a_model_that_leaves_the_url_segment() -> None:
    gemini = Upstream("gemini_generate_content", "http://127.0.0.1:9")
    with pytest.raises(ValueError, match="model_rewrite"):
        Route("*", gemini, model_rewrite="../gemini-ultra")
    Route("*", Upstream("openai_chat_completions", "http://h/v1"), model_rewrite="Qwen/Qwen3-8B")


# ------------------------------------------- control characters (defects 14, 17)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("target", CLIENTS)
def test_a_model_with_a_line_break_is_a_400_in_the_clients_shape(
    rig: Rig, target: str, transport: str
) -> None:
    """Under httpx a CR/LF model toward a Gemini upstream was an unhandled 500 with a
    traceback; toward the others it was sent, and logged as two lines."""
    url = rig.proxy(transport, target)
    before = rig.seen()
    for client in PROTOCOLS:
        for model in ("m\r\nX-Evil: 1", "m\nexchange client=forged", "m\x00", "m\x1b[2J"):
            for stream in (False, True):
                assert_refused(post(url, client, model, stream), client)
    assert rig.seen() == before


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def log_lines() -> Iterator[Lines]:
    lines = Lines()
    logger = logging.getLogger("proxai_asgi")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(lines)
    try:
        yield lines
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)


BREAKS = ("\n", "\r", "\u2028", "\u2029", "\x85", "\x0b", "\x0c")


@pytest.mark.parametrize("transport", ["lean", "inner"])
def test_client_strings_cannot_forge_log_lines(
    rig: Rig, transport: str, log_lines: Lines
) -> None:
    url = rig.proxy(transport, CHAT)
    for model in ("m\nexchange client=forged status=200", "m\u2028forged", "m\x85forged"):
        post(url, CHAT, model, False)
    # Field names the translation drops are logged too (and sent as a header).
    post(url, RESPONSES, "m", False, **{"x\u2028forged": 1})
    assert len(log_lines.messages) >= 4
    for message in log_lines.messages:
        assert not any(b in message for b in BREAKS), repr(message)


@pytest.mark.parametrize("transport", ["lean", "inner"])
@pytest.mark.parametrize("client", [RESPONSES, GEMINI])
def test_dropped_field_names_cannot_break_the_dropped_fields_header(
    rig: Rig, client: str, transport: str
) -> None:
    """An unknown top-level field is dropped and named in ``x-proxai-dropped-fields``
    (Responses) or refused (Gemini, as Google does); a CR/LF in its name made the server
    drop the whole answer."""
    url = rig.proxy(transport, CHAT)
    name = "evil\r\nset-cookie: stolen=1"
    r = post(url, client, "m", False, **{name: 1})
    assert "set-cookie" not in r.headers
    if client == GEMINI:
        # Google refuses unknown fields: the refusal arrives whole, the name escaped.
        assert r.status_code == 400, r.text[:300]
        assert r.json()["error"]["status"] == "INVALID_ARGUMENT"
        return
    assert r.status_code == 200, r.text[:300]
    dropped = r.headers["x-proxai-dropped-fields"]
    assert "evil" in dropped and "\r" not in dropped and "\n" not in dropped


def test_span_attributes_hold_no_line_breaks(rig: Rig) -> None:
    exporter = span_exporter()
    r = post(rig.proxy("lean", ANTHROPIC), CHAT, "m\u2028forged", False)
    assert r.status_code == 200, r.text[:300]
    models: list[str] = []
    for _ in range(100):  # the span ends just after the answer's last byte
        attrs = [dict(s.attributes or {}) for s in exporter.get_finished_spans()]
        models = [str(a["gen_ai.request.model"]) for a in attrs if "gen_ai.request.model" in a]
        if models:
            break
        time.sleep(0.01)
    assert models and all(not any(b in m for b in BREAKS) for m in models), models


# -------------------------------------------------------------- headers (defect 5)


@pytest.mark.parametrize("target", [GEMINI, CHAT])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_query_key_with_a_line_break_adds_no_header_upstream(
    rig: Rig, transport: str, target: str
) -> None:
    """Without a key of ours the client's ``?key=`` is forwarded as a header; its
    percent-decoded CR LF added headers through the lean pool."""
    url = rig.proxy(transport, target, key=False)
    body = body_for(GEMINI, "", False)
    path = "/v1beta/models/gemini-2.5-flash:generateContent"
    before = rig.seen()
    for key in ("abc%0D%0AX-Injected:%20yes", "abc%0AX-Injected:%20yes", "abc%00", "%20abc"):
        r = httpx.post(f"{url}{path}?key={key}", json=body, timeout=10)
        message = assert_refused(r, GEMINI, param="key")
        assert "abc" not in message
    assert rig.seen() == before, "a key with a line break was forwarded"
    r = httpx.post(f"{url}{path}?key=client-key-1", json=body, timeout=10)
    assert r.status_code == 200, r.text[:300]
    if transport == "inner":  # pass-through hands the wrapped app the request as it is
        _, query, headers_list = rig.inner.calls[-1]
        headers = dict(headers_list)
        got = headers.get(b"x-goog-api-key") or headers.get(b"authorization")
        assert query == b"key=client-key-1" or got in (b"client-key-1", b"Bearer client-key-1")
    else:
        seen = rig.raw.requests[-1].headers
        assert "x-injected" not in seen
        assert seen.get("x-goog-api-key") or seen.get("authorization") in (
            "client-key-1",
            "Bearer client-key-1",
        )


# ---------------------------------------------------------- keys (defects 4, 12)

BAD_KEYS = [KEY + "\n", KEY + "\r\n", KEY + " ", "\t" + KEY, KEY[:6] + "\x00" + KEY[6:]]


@pytest.mark.parametrize("key", BAD_KEYS, ids=["lf", "crlf", "space", "tab", "nul"])
def test_keys_with_control_characters_are_refused_at_configuration(
    key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key with a newline (a secret file's last line) was sent, refused by the HTTP
    library, and the library's message quoting it became every client's 502 body."""
    with pytest.raises(ValueError) as caught:
        Upstream("openai_chat_completions", "http://127.0.0.1:9/v1", key)
    assert KEY not in str(caught.value) and "api_key" in str(caught.value)
    env = {"PROXAI_API_KEY": key}
    flags = ["--upstream-url", "http://127.0.0.1:9/v1", "--upstream-protocol", CHAT]
    with pytest.raises(ConfigError) as config_error:
        build_app(build_parser().parse_args(flags), env)
    assert KEY not in str(config_error.value)
    toml = tmp_path / "proxai.toml"
    toml.write_text(
        '[[upstreams]]\nname = "a"\nprotocol = "anthropic_messages"\n'
        'base_url = "http://127.0.0.1:9"\napi_key_env = "A_KEY"\n'
    )
    with pytest.raises(ConfigError) as toml_error:
        build_app(build_parser().parse_args(["--config", str(toml)]), {"A_KEY": key})
    assert KEY not in str(toml_error.value) and "upstreams.a" in str(toml_error.value)


def test_the_cli_refuses_a_key_with_a_newline_without_showing_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)  # were it accepted: no server
    monkeypatch.setenv("PROXAI_API_KEY", KEY + "\n")
    code = main(["--upstream-url", "http://127.0.0.1:9/v1", "--upstream-protocol", CHAT])
    out = capsys.readouterr()
    assert code == 2
    assert "api_key" in out.err and KEY not in out.err + out.out


def test_configured_header_values_with_control_characters_are_refused() -> None:
    for value in ("a\r\nX-Evil: 1", "a\n", "a\x00", " a"):
        with pytest.raises(ValueError, match="headers"):
            Upstream("openai_chat_completions", "http://h/v1", headers={"x-team": value})
    with pytest.raises(ValueError, match="headers"):
        Upstream("openai_chat_completions", "http://h/v1", headers={"x team": "a"})


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("transport", ["lean", "httpx"])
def test_a_key_split_across_two_reads_is_masked(rig: Rig, transport: str, stream: bool) -> None:
    r = post(rig.proxy(transport, CHAT), CHAT, "split_key", stream)
    assert r.status_code == 200, r.text[:300]
    assert KEY not in r.text
    assert "*" * len(KEY) in r.text  # masked in place: lengths and framing hold
    if not stream:
        content = r.json()["choices"][0]["message"]["content"]
        assert content == f"your key is {'*' * len(KEY)}, isn't it"
