"""The real Claude Code, Codex and Gemini CLIs finish their tool loops while the route's
own upstream fails: a key pool whose first key is revoked, and an overloaded primary
answered by a fallback of another protocol.

The CLIs run as in ``test_real_clients.py`` (skipped when they are not installed); the
fake providers are the same scripted models (``tests/helpers/scripted_model.py``), one
per protocol, behind a door (``Providers``) that answers a revoked key with its
provider's 401 and an overloaded protocol with its provider's overload status, and
records which key each call carried. Every case runs over an HTTP upstream and the
wrapped app. The primary retries little (``max_retries=1`` within half a second) so
that a case spends no time in backoff.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from proxai_asgi import Fallback, ProxaiMiddleware, Route, Upstream
from proxai_asgi.codec import PROTOCOLS, ProtocolName
from proxai_asgi.protocols import get_codec
from proxai_asgi.routing.affinity import GENERIC_HEADERS, session_of
from proxai_asgi.routing.plan import RoutePlan
from proxai_asgi.transport.upstream import Receive, Scope, Send
from tests.e2e.test_real_clients import (
    ANTHROPIC,
    CHAT,
    COMMAND,
    GEMINI,
    PATCH,
    RESPONSES,
    Run,
    claude_result,
    codex_events,
    explain,
    gemini_result,
    llm_calls,
    run_claude,
    run_codex,
    run_gemini,
)
from tests.helpers.scripted_model import Recorder, ScriptedModel
from tests.helpers.servers import serve

REVOKED = "sk-revoked-e2e-0123456789"
GOOD = "sk-good-e2e-0123456789"
FALLBACK_KEY = "sk-fallback-e2e-0123456789"
FALLBACK_MODEL = "fallback-model-e2e"
# The primary gives up fast: one retry, at most half a second of backoff.
QUICK = {"max_retries": 1, "retry_budget": 0.5}
_JSON = [(b"content-type", b"application/json")]
_SSE = [(b"content-type", b"text/event-stream")]

# Each provider's answer to a revoked key, and to a request while it is overloaded.
_OPENAI_401 = {
    "error": {
        "message": "Incorrect API key provided.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}
REVOKED_ANSWER: dict[ProtocolName, tuple[int, dict[str, Any]]] = {
    ANTHROPIC: (
        401,
        {
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        },
    ),
    RESPONSES: (401, _OPENAI_401),
    CHAT: (401, _OPENAI_401),
    GEMINI: (
        400,
        {
            "error": {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "API_KEY_INVALID",
                        "domain": "googleapis.com",
                    }
                ],
            }
        },
    ),
}
_OPENAI_503 = {
    "error": {
        "message": "The server is overloaded or not ready yet.",
        "type": "server_error",
        "param": None,
        "code": None,
    }
}
_OPENAI_429 = {
    "error": {
        "message": "Rate limit reached for requests.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
# Status 200: Anthropic's overload inside a stream, before any content.
_ANTHROPIC_INBAND = b"".join(
    b"event: %s\ndata: %s\n\n" % (name.encode(), json.dumps(data).encode())
    for name, data in [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_overloaded",
                    "type": "message",
                    "role": "assistant",
                    "model": "primary",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        ),
        ("ping", {"type": "ping"}),
        (
            "error",
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ),
    ]
)
OVERLOADED_ANSWER: dict[tuple[ProtocolName, int], dict[str, Any] | bytes] = {
    (ANTHROPIC, 200): _ANTHROPIC_INBAND,
    (ANTHROPIC, 529): {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    },
    (RESPONSES, 503): _OPENAI_503,
    (RESPONSES, 429): _OPENAI_429,
    (CHAT, 503): _OPENAI_503,
    (GEMINI, 503): {
        "error": {
            "code": 503,
            "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE",
        }
    },
}


@dataclass
class Call:
    """One call that reached a fake provider."""

    protocol: ProtocolName
    path: str
    key: str
    model: str  # the model asked for
    status: int = 0


@dataclass
class Providers:
    """The fake providers, one scripted model per protocol, reached by path; a call
    with a ``revoked`` key, or to an ``overloaded`` protocol (with that status), gets
    its provider's error instead of the model's answer."""

    models: list[ScriptedModel]
    revoked: frozenset[str] = frozenset()
    overloaded: dict[ProtocolName, int] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        path = scope["path"]
        protocol = next((p for p in PROTOCOLS if get_codec(p).serves(path)), None)
        model = next((m for m in self.models if m.protocol == protocol), None)
        call = Call(protocol or CHAT, path, _key_of(scope), _model_of(path, body))
        failure: tuple[int, dict[str, Any] | bytes] | None = None
        if protocol is None:
            failure = 404, {"error": {"message": "no such path", "type": "not_found"}}
        elif call.key in self.revoked:
            failure = REVOKED_ANSWER[protocol]
        elif protocol in self.overloaded:
            status = self.overloaded[protocol]
            failure = status, OVERLOADED_ANSWER[protocol, status]
        elif model is None:
            failure = 404, {"error": {"message": f"no {protocol} model", "type": "not_found"}}
        self.calls.append(call)
        if failure is not None:
            call.status = failure[0]
            await _reply(send, *failure)
            return

        async def noting(message: Any) -> None:
            if message["type"] == "http.response.start":
                call.status = message["status"]
            await send(message)

        async def replay() -> Any:
            return {"type": "http.request", "body": body, "more_body": False}

        assert model is not None
        await model(scope, replay, noting)

    def keys(self, protocol: ProtocolName) -> list[str]:
        return [c.key for c in self.calls if c.protocol == protocol]


def _model_of(path: str, body: bytes) -> str:
    if "/models/" in path:  # Gemini names it in the path
        return path.split("/models/")[1].split(":")[0]
    try:
        return str(json.loads(body).get("model"))
    except ValueError:
        return "?"


def _key_of(scope: Scope) -> str:
    headers: dict[str, str] = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    for name in ("x-api-key", "x-goog-api-key", "authorization"):
        if name in headers:
            return headers[name].removeprefix("Bearer ")
    query: str = scope.get("query_string", b"").decode()
    return next((q[4:] for q in query.split("&") if q.startswith("key=")), "")


async def _reply(send: Send, status: int, body: dict[str, Any] | bytes) -> None:
    """A JSON error, or (bytes) an event stream."""
    headers = _SSE if isinstance(body, bytes) else _JSON
    await send({"type": "http.response.start", "status": status, "headers": headers})
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    await send({"type": "http.response.body", "body": data})


@dataclass
class PinSession:
    """Sets the session the CLI names (its protocol's session headers) to ``value``,
    so that the pool's first key for it is known: a new session starts on a key chosen
    by its hash. ``value`` may change between two runs of the CLI."""

    app: Any
    client: ProtocolName
    value: bytes = b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.value:
            names = session_headers(self.client)
            headers = [(k, v) for k, v in scope["headers"] if k not in names]
            scope = dict(scope, headers=[*headers, (names[0], self.value)])
        await self.app(scope, receive, send)


def session_headers(client: ProtocolName) -> tuple[bytes, ...]:
    """The headers that name a session, the first one ranking highest (Gemini CLI
    sends none of its own: the generic one pins its session)."""
    return get_codec(client).session_headers + GENERIC_HEADERS


def sessions_starting_on(route: Route, client: ProtocolName, key: str) -> Iterator[bytes]:
    """Session values that ``route`` starts on ``key`` for the CLIs' credential."""
    codec, plan = get_codec(client), RoutePlan(route)
    header = session_headers(client)[0]
    for i in range(256):
        value = b"e2e-pinned-session-%d" % i
        session = session_of(codec, [(header, value)], b"", b"dummy")
        if plan.targets("any-model", session=session)[0].upstream.api_key == key:
            yield value


def _upstream(
    protocol: ProtocolName, base: str | None, key: str | list[str], **options: Any
) -> Upstream:
    if base is None:
        return Upstream.inner_app(protocol, api_key=key, **options)
    # Anthropic and Google base URLs carry no version; OpenAI's do.
    base = base if protocol in (ANTHROPIC, GEMINI) else base + "/v1"
    return Upstream(protocol, base, key, **options)


@dataclass
class Proxy:
    url: str
    recorder: Recorder
    route: Route
    pin: PinSession


@contextlib.contextmanager
def routed(
    providers: Providers,
    transport: str,
    primary: tuple[ProtocolName, str | list[str]],
    fallback: ProtocolName | None = None,
    *,
    client: ProtocolName,
) -> Iterator[Proxy]:
    """The middleware with one route for every model: ``primary`` (its protocol and
    key or pool) with ``QUICK`` retries, then ``fallback`` asked for ``FALLBACK_MODEL``,
    behind a ``PinSession`` for the ``client`` protocol's CLI (which pins nothing until
    given a value) and the client recorder."""
    with contextlib.ExitStack() as stack:
        base = None if transport == "inner" else stack.enter_context(serve(providers))
        up = _upstream(primary[0], base, primary[1], **QUICK)
        fallbacks = []
        if fallback is not None:
            fallbacks = [Fallback(_upstream(fallback, base, FALLBACK_KEY), model=FALLBACK_MODEL)]
        route = Route(model="*", upstream=up, fallbacks=fallbacks)
        pin = PinSession(ProxaiMiddleware(providers, routes=[route]), client)
        recorder = Recorder(pin)
        yield Proxy(stack.enter_context(serve(recorder)), recorder, route, pin)


def assert_pool_held(
    runs: list[Run], recorder: Recorder, models: list[ScriptedModel], providers: Providers, log: str
) -> None:
    """Over two conversations that each start on the revoked key, it was tried once
    (then cooled down), the good key served every call the CLI made, and neither key
    reached the log."""
    keys = providers.keys(models[0].protocol)
    why = "\n".join(explain(r, recorder, m) for r, m in zip(runs, models, strict=True))
    why += f"\n== provider keys {keys}"
    assert keys.count(REVOKED) == 1 and keys[0] == REVOKED, why
    served = [c for c in providers.calls if c.key == GOOD]
    calls = llm_calls(recorder)
    assert len(served) == len(calls) and all(c.status == 200 for c in served), why
    assert all(r.status == 200 for r in calls), why
    assert log.count("class=key") == 1 and "class=target" not in log, why + log
    assert REVOKED not in log and GOOD not in log, log


def assert_fallback_served(
    run: Run,
    recorder: Recorder,
    model: ScriptedModel,
    providers: Providers,
    primary: ProtocolName,
    log: str,
    model_field: str = "model",
) -> None:
    """Every call the CLI made was answered by the fallback, under its model's name;
    the primary was tried (each try logged as a target failure) and then left alone
    while cooled down."""
    why = explain(run, recorder, model) + f"\n== provider calls {providers.calls}\n{log}"
    tried = [c for c in providers.calls if c.protocol == primary]
    assert tried and log.count("class=target") == len(tried), why
    for asked in {c.model for c in tried}:  # one request's tries per model, then cooled
        assert sum(c.model == asked for c in tried) <= 1 + QUICK["max_retries"], why
    assert "sk-primary-e2e" not in log and FALLBACK_KEY not in log, log
    served = [c for c in providers.calls if c.protocol == model.protocol]
    calls = llm_calls(recorder)
    assert len(served) == len(calls) and all(c.status == 200 for c in served), why
    for r in calls:
        assert r.status == 200, why
        assert f'"{model_field}":"{FALLBACK_MODEL}"'.encode() in r.response, why
    assert all(x.decoded and x.decoded.model == FALLBACK_MODEL for x in model.exchanges), why


TRANSPORTS = ["http", "inner"]


def subdir(tmp_path: Path, n: int) -> Path:
    """A directory of its own for one of a test's CLI runs."""
    path = tmp_path / f"run{n}"
    path.mkdir()
    return path


@pytest.fixture(autouse=True)
def _routing_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="proxai_asgi")


# ------------------------------------------------------------------ Claude Code


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_claude_code_completes_its_loop_when_the_pools_first_key_is_revoked(
    tmp_path: Path, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Two conversations, each pinned to a session that starts on the revoked key: the
    first finds it revoked, the second never tries it (cooled down)."""
    models = [ScriptedModel(ANTHROPIC, COMMAND, reasoning=transport == "http") for _ in "12"]
    providers = Providers(models[:1], revoked=frozenset({REVOKED}))
    runs = []
    with routed(providers, transport, (ANTHROPIC, [REVOKED, GOOD]), client=ANTHROPIC) as proxy:
        sessions = sessions_starting_on(proxy.route, ANTHROPIC, REVOKED)
        for n, model in enumerate(models):
            providers.models, proxy.pin.value = [model], next(sessions)
            runs.append(run_claude(proxy.url, subdir(tmp_path, n)))
            claude_result(runs[-1], proxy.recorder, model)
    assert_pool_held(runs, proxy.recorder, models, providers, caplog.text)


# (fallback, transport, the primary's status (200: overloaded in-band), reasoning)
CLAUDE_FALLBACKS = [
    pytest.param(CHAT, "http", 529, False, id="chat-http-529"),
    pytest.param(CHAT, "inner", 529, True, id="chat-inner-529-reasoning"),
    pytest.param(GEMINI, "http", 529, True, id="gemini-http-529-reasoning"),
    pytest.param(GEMINI, "inner", 200, False, id="gemini-inner-inband"),
    pytest.param(CHAT, "http", 200, True, id="chat-http-inband-reasoning"),
]


@pytest.mark.parametrize(("fallback", "transport", "status", "reasoning"), CLAUDE_FALLBACKS)
def test_claude_code_completes_its_loop_on_a_fallback_when_its_primary_is_overloaded(
    tmp_path: Path,
    fallback: ProtocolName,
    transport: str,
    status: int,
    reasoning: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedModel(fallback, COMMAND, reasoning=reasoning)
    providers = Providers([model], overloaded={ANTHROPIC: status})
    primary = (ANTHROPIC, "sk-primary-e2e")
    with routed(providers, transport, primary, fallback, client=ANTHROPIC) as proxy:
        run = run_claude(proxy.url, tmp_path)
    claude_result(run, proxy.recorder, model)
    assert_fallback_served(run, proxy.recorder, model, providers, ANTHROPIC, caplog.text)


# ------------------------------------------------------------------------ Codex


def _codex_model(protocol: ProtocolName, reasoning: bool) -> ScriptedModel:
    steps = [("apply_patch", {"input": PATCH})]
    return ScriptedModel(protocol, COMMAND, pre_steps=steps, reasoning=reasoning)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_codex_completes_its_loop_when_the_pools_first_key_is_revoked(
    tmp_path: Path, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    """As for Claude Code: two conversations, the revoked key tried by the first only."""
    models = [_codex_model(RESPONSES, reasoning=transport == "http") for _ in "12"]
    providers = Providers(models[:1], revoked=frozenset({REVOKED}))
    runs = []
    with routed(providers, transport, (RESPONSES, [REVOKED, GOOD]), client=RESPONSES) as proxy:
        sessions = sessions_starting_on(proxy.route, RESPONSES, REVOKED)
        for n, model in enumerate(models):
            providers.models, proxy.pin.value = [model], next(sessions)
            runs.append(run_codex(proxy.url, subdir(tmp_path, n)))
            codex_events(runs[-1], proxy.recorder, model)
    assert_pool_held(runs, proxy.recorder, models, providers, caplog.text)


CODEX_FALLBACKS = [
    pytest.param(ANTHROPIC, "http", 503, True, id="anthropic-http-503-reasoning"),
    pytest.param(CHAT, "inner", 429, False, id="chat-inner-429"),
    pytest.param(ANTHROPIC, "inner", 429, False, id="anthropic-inner-429"),
    pytest.param(CHAT, "http", 503, True, id="chat-http-503-reasoning"),
]


@pytest.mark.parametrize(("fallback", "transport", "status", "reasoning"), CODEX_FALLBACKS)
def test_codex_completes_its_loop_on_a_fallback_when_its_primary_is_overloaded(
    tmp_path: Path,
    fallback: ProtocolName,
    transport: str,
    status: int,
    reasoning: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = _codex_model(fallback, reasoning)
    providers = Providers([model], overloaded={RESPONSES: status})
    primary = (RESPONSES, "sk-primary-e2e")
    with routed(providers, transport, primary, fallback, client=RESPONSES) as proxy:
        run = run_codex(proxy.url, tmp_path)
    codex_events(run, proxy.recorder, model)
    assert_fallback_served(run, proxy.recorder, model, providers, RESPONSES, caplog.text)


# ------------------------------------------------------------------- Gemini CLI


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_gemini_cli_completes_its_loop_when_the_pools_first_key_is_revoked(
    tmp_path: Path, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Google answers a revoked key with a 400 whose reason is ``API_KEY_INVALID``."""
    models = [ScriptedModel(GEMINI, COMMAND, reasoning=transport == "http") for _ in "12"]
    providers = Providers(models[:1], revoked=frozenset({REVOKED}))
    runs = []
    with routed(providers, transport, (GEMINI, [REVOKED, GOOD]), client=GEMINI) as proxy:
        sessions = sessions_starting_on(proxy.route, GEMINI, REVOKED)
        for n, model in enumerate(models):
            providers.models, proxy.pin.value = [model], next(sessions)
            runs.append(run_gemini(proxy.url, subdir(tmp_path, n)))
            gemini_result(runs[-1], proxy.recorder, model)
    assert_pool_held(runs, proxy.recorder, models, providers, caplog.text)


@pytest.mark.parametrize(
    ("transport", "reasoning"),
    [pytest.param("http", True, id="http-reasoning"), pytest.param("inner", False, id="inner")],
)
def test_gemini_cli_completes_its_loop_on_an_anthropic_fallback_when_gemini_is_overloaded(
    tmp_path: Path, transport: str, reasoning: bool, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel(ANTHROPIC, COMMAND, reasoning=reasoning)
    providers = Providers([model], overloaded={GEMINI: 503})
    primary = (GEMINI, "sk-primary-e2e")
    with routed(providers, transport, primary, ANTHROPIC, client=GEMINI) as proxy:
        run = run_gemini(proxy.url, tmp_path)
    gemini_result(run, proxy.recorder, model)
    assert_fallback_served(
        run, proxy.recorder, model, providers, GEMINI, caplog.text, "modelVersion"
    )
