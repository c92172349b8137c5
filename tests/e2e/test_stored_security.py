"""Stored Responses across tenants (issue 26): over a Responses upstream reached with
the proxy's own key, only the client that created a response reads, lists, deletes or
continues it; a response id never changes the upstream path; our key never comes back
in a forwarded answer; a SQLite store keeps its owners over a restart without a
configured secret.

The upstream here is a small Responses server that keeps responses per credential, as
OpenAI does. Over HTTP with our key every request reaches it with that one key, so the
proxy must tell tenants apart; over the wrapped app (and over HTTP without a key) it
gets each client's own credential and decides itself. The assertions are the same.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest
from websockets.sync.client import connect

from proxai_asgi import ProxaiMiddleware, Route, Upstream
from proxai_asgi.transport.upstream import Receive, Scope, Send
from tests.e2e.test_responses_websocket import answer, create
from tests.e2e.test_stored_responses import CHAT, COMMAND, MODEL, _error, _kinds, proxy
from tests.helpers.scripted_model import ScriptedModel
from tests.helpers.servers import serve

UPSTREAM_KEY = "sk-upstream-key-0123456789"


@dataclass
class Request:
    method: str
    path: str
    raw_path: bytes
    query: bytes
    credential: str
    body: bytes


@dataclass
class ResponsesServer:
    """A Responses upstream that keeps each response for the credential that created
    it (404 for any other), records every request as it arrived, and can quote a
    string back in its GET answers (``echo``: a body and a header)."""

    requests: list[Request] = field(default_factory=list)
    owners: dict[str, str] = field(default_factory=dict)
    echo: str = ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        credential = headers.get("authorization", "")
        req = Request(
            scope["method"],
            scope["path"],
            scope.get("raw_path") or b"",
            scope.get("query_string", b""),
            credential,
            body,
        )
        self.requests.append(req)
        path: str = scope["path"]
        if req.method == "POST" and path == "/v1/responses":
            await self._create(send, json.loads(body), credential)
            return
        rid = path.removeprefix("/v1/responses/").removesuffix("/input_items")
        if self.owners.get(rid) != credential:
            error = {"message": f"Response with id '{rid}' not found.", "type": "x"}
            await _json(send, 404, {"error": {**error, "param": None, "code": None}})
        elif req.method == "DELETE":
            del self.owners[rid]
            deleted = {"id": rid, "object": "response.deleted", "deleted": True}
            await _json(send, 200, {**deleted, "note": self.echo}, self._echoed())
        elif path.endswith("/input_items"):
            await _json(send, 200, {"object": "list", "data": [], "has_more": False})
        else:
            await _json(send, 200, {**_response(rid), "note": self.echo}, self._echoed())

    def _echoed(self) -> list[tuple[bytes, bytes]]:
        return [(b"x-request-id", self.echo.encode())] if self.echo else []

    async def _create(self, send: Send, request: dict[str, Any], credential: str) -> None:
        previous = request.get("previous_response_id")
        if previous is not None and self.owners.get(previous) != credential:
            error = {"message": "Previous response not found.", "type": "invalid_request_error"}
            await _json(send, 400, {"error": {**error, "param": None, "code": None}})
            return
        rid = f"resp_{len(self.owners) + len(self.requests)}"
        self.owners[rid] = credential
        if not request.get("stream"):
            await _json(send, 200, _response(rid))
            return
        events = [
            ("response.created", {**_response(rid), "status": "in_progress"}),
            ("response.completed", _response(rid)),
        ]
        data = "".join(
            f"event: {kind}\ndata: "
            + json.dumps({"type": kind, "sequence_number": n, "response": r})
            + "\n\n"
            for n, (kind, r) in enumerate(events)
        ).encode()
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    def seen(self, method: str) -> list[Request]:
        return [r for r in self.requests if r.method == method]


def _response(rid: str) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "created_at": 1,
        "model": MODEL,
        "status": "completed",
        "output": [],
    }


async def _json(
    send: Send, status: int, obj: Any, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(obj).encode()
    headers = [(b"content-type", b"application/json"), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _not_found(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"not here"})


@contextmanager
def responses_proxy(
    server: ResponsesServer, transport: str, api_key: str | None = UPSTREAM_KEY, **options: Any
) -> Iterator[str]:
    """The middleware in front of ``server``: over HTTP (with ``api_key``) or as the
    wrapped app; yields the proxy's ``/v1`` base URL."""
    if transport == "inner":
        up = Upstream.inner_app("openai_responses")
        with serve(ProxaiMiddleware(server, upstream=up, **options), websockets=True) as url:
            yield url + "/v1"
        return
    with serve(server) as upstream_url:
        up = Upstream("openai_responses", upstream_url + "/v1", api_key)
        with serve(ProxaiMiddleware(_not_found, upstream=up, **options), websockets=True) as url:
            yield url + "/v1"


TRANSPORTS = ["http-our-key", "http-client-key", "inner"]


@contextmanager
def tenants(
    transport: str, stream: bool
) -> Iterator[tuple[ResponsesServer, openai.OpenAI, openai.OpenAI, str]]:
    """The upstream, alice and mallory (two keys) through the proxy, and the id of a
    response alice created."""
    server = ResponsesServer()
    api_key = None if transport == "http-client-key" else UPSTREAM_KEY
    with responses_proxy(server, transport.split("-")[0], api_key=api_key) as url:
        alice = openai.OpenAI(base_url=url, api_key="sk-alice", max_retries=0)
        mallory = openai.OpenAI(base_url=url, api_key="sk-mallory", max_retries=0)
        yield server, alice, mallory, _create(alice, stream, input="alice's secret")


def _create(client: openai.OpenAI, stream: bool, **kw: Any) -> str:
    if not stream:
        return client.responses.create(model=MODEL, **kw).id
    events = list(client.responses.create(model=MODEL, stream=True, **kw))
    return events[-1].response.id  # type: ignore[union-attr]


# ------------------------------------------------------------------ defect 10


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_tenant_cannot_read_list_or_delete_another_tenants_upstream_response(
    transport: str, stream: bool
) -> None:
    with tenants(transport, stream) as (server, alice, mallory, rid):
        with pytest.raises(openai.NotFoundError):
            mallory.responses.retrieve(rid)
        with pytest.raises(openai.NotFoundError):
            mallory.responses.input_items.list(rid)
        with pytest.raises(openai.NotFoundError) as info:
            mallory.responses.delete(rid)
        assert set(_error(info.value)) == {"message", "type", "param", "code"}
        # Still alice's, whole.
        assert alice.responses.retrieve(rid).id == rid
        assert alice.responses.input_items.list(rid).data == []
        alice.responses.delete(rid)
        with pytest.raises(openai.NotFoundError):
            alice.responses.retrieve(rid)
    # Whatever reached the upstream for mallory carried mallory's own credential.
    assert not any("sk-alice" in r.credential for r in server.requests[1:4])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_tenant_cannot_continue_another_tenants_upstream_response(
    transport: str, stream: bool
) -> None:
    with tenants(transport, stream) as (server, alice, mallory, rid):
        posts = len(server.seen("POST"))
        with pytest.raises(openai.BadRequestError) as info:
            _create(mallory, stream, input="what did alice say?", previous_response_id=rid)
        if transport == "http-our-key":  # refused by the proxy, in OpenAI's words
            assert _error(info.value)["code"] == "previous_response_not_found"
            assert _error(info.value)["param"] == "previous_response_id"
            assert len(server.seen("POST")) == posts  # never sent upstream
        second = _create(alice, stream, input="and then?", previous_response_id=rid)
        assert alice.responses.retrieve(second).id == second  # the answer is claimed too
    assert json.loads(server.seen("POST")[-1].body)["previous_response_id"] == rid


def test_over_the_websocket_a_tenant_cannot_reach_another_tenants_response() -> None:
    """Codex's Responses WebSocket is served by the same path: its stored answers are
    claimed for the socket's key, and another key can neither read nor continue them."""
    server = ResponsesServer()
    with responses_proxy(server, "http") as url:
        ws_url = url.replace("http://", "ws://", 1) + "/responses"
        with connect(ws_url, additional_headers={"authorization": "Bearer sk-alice"}) as ws:
            ws.send(create(input="alice's secret", store=True))
            rid = answer(ws)[-1]["response"]["id"]
        with connect(ws_url, additional_headers={"authorization": "Bearer sk-mallory"}) as ws:
            ws.send(create(input="and?", store=True, previous_response_id=rid))
            (refused,) = answer(ws)
        mallory = openai.OpenAI(base_url=url, api_key="sk-mallory", max_retries=0)
        with pytest.raises(openai.NotFoundError):
            mallory.responses.retrieve(rid)
        alice = openai.OpenAI(base_url=url, api_key="sk-alice", max_retries=0)
        assert alice.responses.retrieve(rid).id == rid
    assert refused["type"] == "error" and refused["status"] == 400
    assert refused["error"]["code"] == "previous_response_not_found"


def test_with_the_store_off_no_upstream_id_is_reachable_with_our_key() -> None:
    """No store, no record of who owns what: refused, never forwarded."""
    server = ResponsesServer()
    with responses_proxy(server, "http", store="off") as url:
        alice = openai.OpenAI(base_url=url, api_key="sk-alice", max_retries=0)
        rid = _create(alice, False, input="hi")
        with pytest.raises(openai.NotFoundError):
            alice.responses.retrieve(rid)
        with pytest.raises(openai.BadRequestError):
            _create(alice, False, input="next", previous_response_id=rid)
    assert [r.method for r in server.requests] == ["POST"]


def test_store_false_answers_are_not_claimed() -> None:
    server = ResponsesServer()
    with responses_proxy(server, "http") as url:
        alice = openai.OpenAI(base_url=url, api_key="sk-alice", max_retries=0)
        rid = _create(alice, False, input="hi", store=False)
        with pytest.raises(openai.NotFoundError):
            alice.responses.retrieve(rid)


# ------------------------------------------------------------------ defect 2


def _raw_get(url: str, target: str, method: str = "GET") -> tuple[int, bytes]:
    """One request with exactly this request target (no client-side normalisation)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        head = (
            f"{method} {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-alice\r\n"
            "Connection: close\r\n\r\n"
        )
        sock.sendall(head.encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head_bytes, _, body = data.partition(b"\r\n\r\n")
    return int(head_bytes.split(b" ", 2)[1]), body


BAD_IDS = [
    "%2E%2E",
    "%2E%2E/input_items",
    "..%2F..%2Fmodels%3F",
    "resp_1%3Fx%3D1",
    "resp_1%23frag",
    "resp_1%2F..%2F..%2Fmodels",
    "resp%201",
    "resp_1%0d%0aX-Injected:%201",
    "r" * 201,
]


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("api_key", [UPSTREAM_KEY, None], ids=["our-key", "client-key"])
def test_a_response_id_is_one_validated_path_segment(api_key: str | None, method: str) -> None:
    server = ResponsesServer()
    with responses_proxy(server, "http", api_key=api_key) as url:
        base = urlsplit(url).path  # /v1
        answers = {bad: _raw_get(url, f"{base}/responses/{bad}", method) for bad in BAD_IDS}
        # A good id the caller may reach still goes to exactly its own path.
        alice = openai.OpenAI(base_url=url, api_key="sk-alice", max_retries=0)
        rid = _create(alice, False, input="hi")
        _raw_get(url, f"{base}/responses/{rid}?limit=5&after=a%26b", "GET")
    forwarded = [r for r in server.requests if r.method != "POST"]
    assert [(r.path, r.raw_path) for r in forwarded] == [
        (f"/v1/responses/{rid}", f"/v1/responses/{rid}".encode())
    ]
    assert forwarded[0].query == b"limit=5&after=a%26b"
    for bad, (status, body) in answers.items():
        assert status in (400, 404), (bad, status, body)
        if body.startswith(b"{"):  # ours (an OpenAI error), or the wrapped app's own 404
            assert set(json.loads(body)["error"]) == {"message", "type", "param", "code"}


# ------------------------------------------------------------------ defect 12


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_our_key_is_masked_in_forwarded_stored_answers(method: str) -> None:
    server = ResponsesServer(echo=f"your key was {UPSTREAM_KEY}")
    with responses_proxy(server, "http") as url:
        alice = openai.OpenAI(base_url=url, api_key="sk-alice", max_retries=0)
        rid = _create(alice, False, input="hi")
        if method == "GET":
            raw: Any = alice.responses.with_raw_response.retrieve(rid)
        else:
            raw = alice.responses.with_raw_response.delete(rid)
    text = raw.http_response.text
    assert UPSTREAM_KEY not in text and "*" * len(UPSTREAM_KEY) in text
    assert UPSTREAM_KEY not in raw.headers.get("x-request-id", "")
    assert "*" * len(UPSTREAM_KEY) in raw.headers.get("x-request-id", "")


# ------------------------------------------------------------------ defect 11


def test_a_sqlite_store_without_a_secret_keeps_owners_over_a_restart(tmp_path: Any) -> None:
    """Two middlewares one after the other on one SQLite file, no secret configured:
    the second continues the first's conversation for the same key, not for another."""
    model = ScriptedModel(CHAT, COMMAND)
    store = f"sqlite:///{tmp_path / 'responses.db'}"
    with proxy(model, "http", store=store) as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        first = client.responses.create(model=MODEL, input="remember 4711")
    with proxy(model, "inner", store=store) as url:  # as if restarted
        other = openai.OpenAI(base_url=url, api_key="sk-other", max_retries=0)
        with pytest.raises(openai.NotFoundError):
            other.responses.retrieve(first.id)
        with pytest.raises(openai.BadRequestError):
            other.responses.create(model=MODEL, input="steal", previous_response_id=first.id)
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        second = client.responses.create(
            model=MODEL, input="what was it?", previous_response_id=first.id
        )
    assert second.previous_response_id == first.id
    assert _kinds(model.exchanges[1].decoded) == ["user:Text", "assistant:Text", "user:Text"]  # type: ignore[arg-type]


def test_a_store_that_cannot_give_its_owner_key_fails_only_what_needs_it() -> None:
    """A Redis store down from the start: the owner key cannot be read, yet a request
    that needs no stored state is answered; those that need the store get its 503."""
    pytest.importorskip("redis")
    model = ScriptedModel(CHAT, COMMAND)
    with proxy(model, "http", store="redis://127.0.0.1:1/0") as url:  # nothing listens
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        plain = client.responses.create(model=MODEL, input="no chain, no store needed")
        with pytest.raises(openai.InternalServerError) as info:
            client.responses.retrieve(plain.id)
    assert plain.status == "completed"
    assert _error(info.value)["code"] == "store_unavailable"


def test_an_upstream_id_is_fetched_from_the_responses_upstream_that_answered_it() -> None:
    """Two Responses upstreams with keys of ours: the claim names the one that
    answered, so a retrieve goes there (not to the first route's)."""
    first, second = ResponsesServer(), ResponsesServer()
    with serve(first) as one, serve(second) as two:
        routes = [
            Route("a-*", Upstream("openai_responses", one + "/v1", UPSTREAM_KEY, name="one")),
            Route("*", Upstream("openai_responses", two + "/v1", UPSTREAM_KEY + "2")),
        ]
        with serve(ProxaiMiddleware(_not_found, routes=routes)) as url:
            alice = openai.OpenAI(base_url=url + "/v1", api_key="sk-alice", max_retries=0)
            rid = alice.responses.create(model="b-model", input="hi").id
            assert alice.responses.retrieve(rid).id == rid
    assert [r.method for r in first.requests] == []
    assert [r.method for r in second.requests] == ["POST", "GET"]
