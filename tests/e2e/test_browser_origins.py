"""Browser pages: only the proxy's own origin and the listed ones may use it.

A web page the user visits can reach a proxy on the user's machine, which holds the
upstream key. So a request to an LLM path whose browser says it comes from another
page (``Origin``, ``Sec-Fetch-Site``) gets a 403 in the client's protocol shape and
never reaches the upstream, a CORS preflight from such a page gets no allowance (also
when the wrapped app would grant one), and a WebSocket handshake gets a 403 before it
opens -- unless the origin is in ``allowed_origins``, which then gets what a browser
needs to read the answer. Clients with no ``Origin`` (CLIs, SDKs) are not concerned.
Over HTTP and the wrapped app as the upstream, streamed and not, for all four clients.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.server.cli import build_app, build_parser
from proxai_asgi.server.config import ConfigError
from proxai_asgi.server.demo import DemoUpstream
from proxai_asgi.transport.upstream import Receive, Scope, Send
from tests.helpers.demo_proxy import CHAT, CLIENTS, RESPONSES, body_for, middleware, path_for
from tests.helpers.servers import serve
from tests.reliability._shapes import error_message

LISTED = "https://app.example"
EVIL = "https://evil.example"


class Model:
    """The demo model, counting the generation requests it is sent; any other request
    (a preflight the proxy let through) is answered with a permissive CORS allowance,
    as an app with a blanket CORS middleware would."""

    def __init__(self) -> None:
        self.calls = 0
        self.demo = DemoUpstream()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "OPTIONS":
            headers = [
                (b"access-control-allow-origin", b"*"),
                (b"access-control-allow-methods", b"*"),
            ]
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["type"] == "http":
            self.calls += 1
        await self.demo(scope, receive, send)


@contextmanager
def proxy(transport: str, **options: Any) -> Iterator[tuple[str, Model]]:
    model = Model()
    with ExitStack() as stack:
        app = middleware(model, transport, stack, **options)
        yield stack.enter_context(serve(app, websockets=True)), model


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("client", CLIENTS)
def test_llm_requests_from_pages_of_other_origins_are_refused_with_a_403(
    client: str, transport: str, stream: bool
) -> None:
    """By default: only requests without a browser's origin, or from the proxy's own."""
    path, body = path_for(client, stream), body_for(client, stream)
    with proxy(transport) as (url, model), httpx.Client() as http:

        def post(**headers: str) -> httpx.Response:
            return http.post(url + path, json=body, headers=headers, timeout=30)

        # Refused, before anything reaches the upstream.
        refused = [
            post(origin=EVIL),
            post(origin=EVIL, **{"sec-fetch-site": "cross-site"}),
            post(origin="null"),  # a sandboxed frame or a file:// page
            post(**{"sec-fetch-site": "cross-site"}),  # a browser's request without Origin
            post(origin="http://127.0.0.1:1"),  # another port of the same host
        ]
        for r in refused:
            assert r.status_code == 403, r.text
            assert "allowed_origins" in error_message(client, r.json())
            assert "access-control-allow-origin" not in r.headers
        assert model.calls == 0

        # Served: no Origin (CLIs, SDKs), and the proxy's own origin (url is the page
        # the proxy itself, or the app it wraps, would serve).
        for headers in ({}, {"origin": url}, {"origin": url, "sec-fetch-site": "same-origin"}):
            r = post(**headers)
            assert r.status_code == 200, (headers, r.text)
            assert "access-control-allow-origin" not in r.headers
        assert model.calls == 3


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("client", CLIENTS)
def test_listed_origins_are_served_with_the_cors_headers_they_need(
    client: str, transport: str, stream: bool
) -> None:
    path, body = path_for(client, stream), body_for(client, stream)
    with proxy(transport, allowed_origins=[LISTED]) as (url, model), httpx.Client() as http:
        r = http.post(url + path, json=body, headers={"origin": LISTED}, timeout=30)
        assert r.status_code == 200, r.text
        assert r.headers["access-control-allow-origin"] == LISTED
        assert r.headers["access-control-expose-headers"] == "*"
        assert "origin" in r.headers["vary"].lower()
        r = http.post(url + path, json=body, headers={"origin": LISTED + ":8443"}, timeout=30)
        assert r.status_code == 403, r.text  # another origin than the one listed
        assert model.calls == 1


@pytest.mark.parametrize("client", CLIENTS)
def test_preflights_from_pages_of_other_origins_get_no_cors_allowance(client: str) -> None:
    """Also when the wrapped app would have granted one to anybody."""
    path = path_for(client, False)
    asked = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, x-stainless-os",
        "access-control-request-private-network": "true",
    }
    with proxy("inner") as (url, _), httpx.Client() as http:
        r = http.options(url + path, headers={"origin": EVIL, **asked})
        assert r.status_code == 403
        assert not [h for h in r.headers if h.startswith("access-control-")]

        # Paths that are the wrapped app's keep its own answer.
        r = http.options(url + "/elsewhere", headers={"origin": EVIL, **asked})
        assert r.headers["access-control-allow-origin"] == "*"


@pytest.mark.parametrize("client", CLIENTS)
def test_preflights_from_listed_origins_get_what_they_ask_for(client: str) -> None:
    path = path_for(client, False)
    asked = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, x-stainless-os",
        "access-control-request-private-network": "true",
    }
    with proxy("inner", allowed_origins=[LISTED]) as (url, _), httpx.Client() as http:
        r = http.options(url + path, headers={"origin": EVIL, **asked})
        assert r.status_code == 403

        r = http.options(url + path, headers={"origin": LISTED, **asked})
        assert r.status_code == 204
        assert r.headers["access-control-allow-origin"] == LISTED
        assert "POST" in r.headers["access-control-allow-methods"]
        assert r.headers["access-control-allow-headers"] == asked["access-control-request-headers"]
        assert r.headers["access-control-allow-private-network"] == "true"
        assert "origin" in r.headers["vary"].lower()


def test_side_endpoints_refuse_pages_of_other_origins() -> None:
    with proxy("inner") as (url, _), httpx.Client() as http:
        for method, path in (
            ("GET", "/v1/models"),
            ("GET", "/v1/responses/resp_x"),
            ("DELETE", "/v1/responses/resp_x"),
        ):
            r = http.request(method, url + path, headers={"origin": EVIL})
            assert r.status_code == 403, (path, r.text)
            assert "allowed_origins" in error_message(RESPONSES, r.json())
        assert http.get(url + "/v1/models").status_code == 200


def test_a_page_whose_name_was_rebound_to_loopback_is_not_the_proxys_own_origin() -> None:
    """DNS rebinding: a page on attacker.example:PORT whose name now resolves to
    127.0.0.1 calls the proxy same-origin; only the Host tells, and a loopback
    listener is not reached under such a name. (Loopback names are.)"""
    path, body = path_for(CHAT, False), body_for(CHAT, False)
    with proxy("inner") as (url, model), httpx.Client() as http:
        port = url.rsplit(":", 1)[1]
        for name, status in (("attacker.example", 403), ("localhost", 200), ("127.0.0.1", 200)):
            headers = {
                "host": f"{name}:{port}",
                "origin": f"http://{name}:{port}",
                "sec-fetch-site": "same-origin",
            }
            r = http.post(url + path, json=body, headers=headers)
            assert r.status_code == status, (name, r.text)
        assert model.calls == 2


def test_every_origin_can_be_allowed_with_a_star() -> None:
    path, body = path_for(CHAT, False), body_for(CHAT, False)
    with proxy("inner", allowed_origins=["*"]) as (url, _), httpx.Client() as http:
        r = http.post(url + path, json=body, headers={"origin": EVIL})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == EVIL


@pytest.mark.parametrize("transport", ["http", "inner"])
def test_websocket_handshakes_from_pages_of_other_origins_get_a_403(transport: str) -> None:
    frame = json.dumps({"type": "response.create", "model": "m", "input": "hi", "generate": False})
    with proxy(transport) as (url, _):
        ws_url = url.replace("http://", "ws://") + "/v1/responses"
        for origin in (EVIL, "null", "http://127.0.0.1:1"):
            with pytest.raises(InvalidStatus) as info:
                connect(ws_url, origin=origin, open_timeout=10)  # type: ignore[arg-type]
            assert info.value.response.status_code == 403
            body = json.loads(info.value.response.body)
            assert body["error"]["code"] == "origin_not_allowed"
        for origin in (None, url):  # Codex sends none; the proxy's own page
            with connect(ws_url, origin=origin, open_timeout=10) as ws:  # type: ignore[arg-type]
                ws.send(frame)
                assert json.loads(ws.recv(timeout=10))["type"] == "response.created"


def test_websocket_handshakes_from_listed_origins_are_served() -> None:
    frame = json.dumps({"type": "response.create", "model": "m", "input": "hi", "generate": False})
    with proxy("inner", allowed_origins=[LISTED]) as (url, _):
        ws_url = url.replace("http://", "ws://") + "/v1/responses"
        with connect(ws_url, origin=LISTED, open_timeout=10) as ws:  # type: ignore[arg-type]
            ws.send(frame)
            assert json.loads(ws.recv(timeout=10))["type"] == "response.created"


def test_allowed_origins_from_toml_the_environment_and_the_flag(tmp_path: Path) -> None:
    def origins_of(argv: list[str], env: dict[str, str]) -> frozenset[bytes]:
        return build_app(build_parser().parse_args(argv), env)[0].origins.allowed

    assert origins_of([], {}) == frozenset()
    conf = tmp_path / "proxai.toml"
    conf.write_text('[server]\nallowed_origins = ["https://App.example:443"]\n')
    assert origins_of(["--config", str(conf)], {}) == {b"https://app.example"}
    env = {"PROXAI_ALLOWED_ORIGINS": "https://a.example, http://localhost:3000"}
    assert origins_of([], env) == {b"https://a.example", b"http://localhost:3000"}
    assert origins_of(["--allow-origin", LISTED], env) == {LISTED.encode()}
    for bad in ("app.example", "https://app.example/path", "null"):
        with pytest.raises(ConfigError, match="allowed_origins"):
            origins_of(["--allow-origin", bad], {})
        with pytest.raises(ValueError, match="allowed_origins"):
            ProxaiMiddleware(
                DemoUpstream(), upstream=Upstream.inner_app(CHAT), allowed_origins=[bad]
            )
