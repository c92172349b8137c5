"""HTTPS upstreams on the lean pool: certificates verified as httpx verifies them,
keep-alive and streaming over TLS, and a rejected certificate as a 502 in the client's
own protocol shape (real SDKs, the middleware with no performance options).

Certificates come from a throwaway CA made in the test (``trustme``); every server is
on 127.0.0.1 and closed by its test.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import trustme

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.errors import ProxyError
from proxai_asgi.server.cli import build_app, build_parser
from proxai_asgi.transport.http1 import Http1Pool
from proxai_asgi.transport.tls import client_context
from tests.helpers.servers import FakeUpstream, Server, reply_from_capture, serve
from tests.reliability._shapes import error_message
from tests.test_http1 import OK, Seen, answer_ok, fetch, run, send_chunked

CA = trustme.CA()
LOCAL = CA.issue_cert("127.0.0.1", "localhost")
ELSEWHERE = CA.issue_cert("upstream.example")  # valid, but for another name


def server_context(cert: trustme.LeafCert = LOCAL) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(ctx)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


@pytest.fixture
def ca_file(tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    CA.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture(autouse=True)
def _no_ca_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    for name in ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


# ------------------------------------------------------------- the CA, as httpx


def _summary(ctx: ssl.SSLContext) -> tuple[Any, ...]:
    subjects = sorted(str(c["subject"]) for c in ctx.get_ca_certs())
    return (ctx.verify_mode, ctx.check_hostname, ctx.minimum_version, subjects)


def test_default_trust_is_httpx_default_with_and_without_ssl_cert_file(
    monkeypatch: pytest.MonkeyPatch, ca_file: str
) -> None:
    assert _summary(client_context(True)) == _summary(httpx.create_ssl_context())
    assert len(client_context(True).get_ca_certs()) > 50  # certifi's bundle
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    ours = client_context(True)
    assert _summary(ours) == _summary(httpx.create_ssl_context())
    assert [c["subject"] for c in ours.get_ca_certs()] == [
        c["subject"] for c in ssl.create_default_context(cafile=ca_file).get_ca_certs()
    ]


# ------------------------------------------------------------------ the pool


def test_keep_alive_reuses_one_tls_connection_offering_http11_by_alpn(ca_file: str) -> None:
    alpn: list[str | None] = []

    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> None:
        alpn.append(w.get_extra_info("ssl_object").selected_alpn_protocol())
        w.write(OK)

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        assert pool.serves(up)
        for _ in range(4):
            assert await fetch(pool, up) == (200, b"{}")
        assert pool.idle == 1

    seen = run(script, test, tls=server_context(), verify=ca_file)
    assert seen.connections == 1 and len(seen.requests) == 4
    assert alpn == ["http/1.1"] * 4
    assert seen.requests[0].lower().startswith(b"post /v1/chat/completions http/1.1\r\n")


def test_a_streamed_body_arrives_piece_by_piece_over_tls(ca_file: str) -> None:
    """Each chunk reaches the caller before the server writes the next one: the server
    waits for the caller's acknowledgement, so nothing here depends on timing."""
    pieces = [b"data: %d\n\n" % i for i in range(5)]
    got_one = asyncio.Queue[bytes]()

    async def acknowledged(piece: bytes) -> None:
        assert await got_one.get() == piece

    async def script(head: bytes, n: int, r: Any, w: asyncio.StreamWriter) -> None:
        await send_chunked(w, b"Content-Type: text/event-stream\r\n", pieces, acknowledged)

    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        received = []
        async with pool.open(up, [], b"{}", raw=False) as response:
            assert response.status == 200 and response.is_event_stream
            async for chunk in response:
                received.append(chunk)
                got_one.put_nowait(chunk)
        assert received == pieces

    run(script, test, tls=server_context(), verify=ca_file)


@pytest.mark.parametrize(
    ("cert", "needle"),
    [(LOCAL, "unable to get local issuer"), (ELSEWHERE, "mismatch")],
    ids=["untrusted-ca", "wrong-hostname"],
)
def test_a_certificate_the_default_trust_rejects_is_a_502(
    ca_file: str, cert: trustme.LeafCert, needle: str
) -> None:
    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        with pytest.raises(ProxyError) as err:
            await fetch(pool, up)
        assert err.value.status == 502 and "certificate" in str(err.value)
        assert needle in str(err.value).lower() and "127.0.0.1" not in str(err.value)

    # Untrusted: certifi does not know the test CA. Wrong name: the CA is trusted.
    verify: str | bool = True if cert is LOCAL else ca_file
    seen = run(answer_ok, test, tls=server_context(cert), verify=verify)
    assert seen.requests == []


def test_trust_from_ssl_cert_file_a_context_or_none(
    monkeypatch: pytest.MonkeyPatch, ca_file: str
) -> None:
    async def ok(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        assert await fetch(pool, up) == (200, b"{}")

    ctx = ssl.create_default_context(cafile=ca_file)
    run(answer_ok, ok, tls=server_context(), verify=ctx)
    run(answer_ok, ok, tls=server_context(ELSEWHERE), verify=False)
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    run(answer_ok, ok, tls=server_context())


def test_trust_from_ssl_cert_dir_or_a_directory_given_as_verify(
    monkeypatch: pytest.MonkeyPatch, ca_file: str, tmp_path: Path
) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("naming a CA directory's files needs the openssl command")
    subject_hash = subprocess.run(
        [openssl, "x509", "-hash", "-noout", "-in", ca_file],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    directory = tmp_path / "certs"
    directory.mkdir()
    shutil.copy(ca_file, directory / f"{subject_hash}.0")

    async def ok(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        assert await fetch(pool, up) == (200, b"{}")

    async def rejected(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        with pytest.raises(ProxyError, match="certificate"):
            await fetch(pool, up)

    run(answer_ok, rejected, tls=server_context())  # certifi alone: not trusted
    run(answer_ok, ok, tls=server_context(), verify=str(directory))
    monkeypatch.setenv("SSL_CERT_DIR", str(directory))
    run(answer_ok, ok, tls=server_context())


def test_upstreams_trusting_differently_never_share_a_connection(ca_file: str) -> None:
    async def test(pool: Http1Pool, up: Upstream, seen: Seen) -> None:
        assert await fetch(pool, up) == (200, b"{}")
        untrusting = Upstream(up.protocol, up.base_url)  # certifi only
        with pytest.raises(ProxyError):
            await fetch(pool, untrusting)  # not handed the idle, verified connection
        assert await fetch(pool, up) == (200, b"{}")

    seen = run(answer_ok, test, tls=server_context(), verify=ca_file)
    # The untrusting request sent nothing: its own handshake failed (a handshake that
    # fails never reaches the server's handler, so one connection is counted).
    assert seen.connections == 1 and len(seen.requests) == 2


# ------------------------------------------------- through the middleware, real SDKs


@pytest.fixture
def tls_upstream(tmp_path: Path) -> Iterator[tuple[FakeUpstream, str]]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    LOCAL.cert_chain_pems[0].write_to_path(str(cert))
    LOCAL.private_key_pem.write_to_path(str(key))
    fake = FakeUpstream()
    with serve(_recording_peers(fake), tls=(str(cert), str(key))) as url:
        yield fake, url


PEERS: list[object] = []  # the client address of each request the TLS upstream served


def _recording_peers(app: Any) -> Any:
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        PEERS.append(scope.get("client"))
        await app(scope, receive, send)

    PEERS.clear()
    return wrapped


# The middleware's transport, and the server's loop: uvicorn runs on uvloop (with
# httptools) by itself when they are installed, as ``proxai-asgi[server]`` installs them.
TRANSPORTS = pytest.mark.parametrize(
    ("lean", "server"),
    [(True, "asyncio"), (False, "asyncio"), (True, "uvloop")],
    ids=["default", "httpx", "default-uvloop"],
)


@TRANSPORTS
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_default_middleware_translates_over_https(
    tls_upstream: tuple[FakeUpstream, str], ca_file: str, stream: bool, lean: bool, server: Server
) -> None:
    """The default transport (the lean pool) and httpx (``lean_http=False``) honour
    the upstream's ``verify`` alike."""
    fake, url = tls_upstream
    capture = "chat_sse_text_basic_include_usage" if stream else "chat_json_text_basic"
    fake.push(reply_from_capture(capture))
    up = Upstream("openai_chat_completions", url + "/v1", "sk-test", verify=ca_file)
    mw = ProxaiMiddleware(_no_app, upstream=up, **({} if lean else {"lean_http": False}))
    assert (mw.lean is not None) is lean
    with serve(mw, close_app=True, server=server) as base:
        client = anthropic.Anthropic(base_url=base, api_key="x", max_retries=0)
        for turn in range(2):
            if turn and stream and lean:  # a stream's connection is parked once read out
                assert mw.lean is not None
                for _ in range(200):
                    if mw.lean.idle:
                        break
                    time.sleep(0.01)
            args: dict[str, Any] = {
                "model": "m",
                "max_tokens": 20,
                "messages": [{"role": "user", "content": "hi"}],
            }
            if stream:
                with client.messages.stream(**args) as events:
                    kinds = [event.type for event in events]
                    final = events.get_final_message()
                assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
                assert kinds.count("text") > 1 and final.content[0].type == "text"
            else:
                message = client.messages.create(**args)
                assert message.content[0].type == "text" and message.content[0].text
    assert len(fake.seen) == 2 and fake.seen[0].path == "/v1/chat/completions"
    assert fake.seen[0].headers["authorization"] == "Bearer sk-test"
    if not stream or lean:  # (httpx reads a stream's rest after the client's answer ends)
        assert PEERS[0] == PEERS[1], "the second request did not reuse the connection"


@TRANSPORTS
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_an_untrusted_https_upstream_is_a_502_in_each_clients_shape(
    tls_upstream: tuple[FakeUpstream, str], stream: bool, lean: bool, server: Server
) -> None:
    fake, url = tls_upstream
    up = Upstream("anthropic_messages", url, "sk-test", max_retries=0)  # default trust: certifi
    options = {} if lean else {"lean_http": False}
    with serve(ProxaiMiddleware(_no_app, upstream=up, **options), server=server) as base:
        chat_client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as chat:
            chat_client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=stream
            )
        with pytest.raises(anthropic.APIStatusError) as messages:
            anthropic.Anthropic(base_url=base, api_key="x", max_retries=0).messages.create(
                model="m",
                max_tokens=5,
                messages=[{"role": "user", "content": "hi"}],
                stream=stream,
            )
    assert chat.value.status_code == messages.value.status_code == 502
    chat_message = error_message("openai_chat_completions", chat.value.response.json())
    anthropic_message = error_message("anthropic_messages", messages.value.response.json())
    if lean:  # httpx's ConnectError does not say why
        assert "certificate" in chat_message and "certificate" in anthropic_message
    assert "sk-test" not in chat.value.response.text
    assert fake.seen == []


def test_a_configured_ca_file_reaches_the_https_upstream(
    tls_upstream: tuple[FakeUpstream, str], ca_file: str, tmp_path: Path
) -> None:
    fake, url = tls_upstream
    fake.push(reply_from_capture("chat_json_text_basic"))
    config = tmp_path / "proxai.toml"
    config.write_text(
        f'[[upstreams]]\nname = "tls"\nprotocol = "openai_chat_completions"\n'
        f'base_url = "{url}/v1"\nverify = "{ca_file}"\n'
    )
    app, _ = build_app(build_parser().parse_args(["--config", str(config)]), env={})
    assert app.router.routes[0].upstream.verify == ca_file
    with serve(app, close_app=True) as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
        answer = client.responses.create(model="m", input="hi")
    assert answer.output_text and len(fake.seen) == 1


async def _no_app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def test_under_trio_the_default_middleware_reaches_https_through_httpx(
    tls_upstream: tuple[FakeUpstream, str], ca_file: str
) -> None:
    """The lean pool runs on asyncio only; on trio the same default middleware sends
    through httpx, with the upstream's ``verify`` (driven in-process, as an ASGI
    server on trio would)."""
    pytest.importorskip("trio")
    import anyio

    fake, url = tls_upstream
    fake.push(reply_from_capture("chat_json_text_basic"))
    up = Upstream("openai_chat_completions", url + "/v1", verify=ca_file)
    mw = ProxaiMiddleware(_no_app, upstream=up)
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}

    async def main() -> tuple[bool, httpx.Response]:
        assert mw.lean is not None
        serves = mw.lean.serves(up)
        transport = httpx.ASGITransport(app=mw)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            answer = await client.post("/v1/messages", json=body)
        await mw.aclose()
        return serves, answer

    serves, answer = anyio.run(main, backend="trio")
    assert serves is False
    assert answer.status_code == 200, answer.text
    assert answer.json()["content"][0]["text"] and len(fake.seen) == 1
