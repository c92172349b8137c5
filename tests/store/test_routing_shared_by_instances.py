"""Routing state shared by several instances through a real redis-server: two
``ProxaiMiddleware`` with the same ``store="redis://..."``, each behind its own uvicorn
server on 127.0.0.1 (as two processes behind a load balancer), and one scripted
upstream whose request log shows which target and key each request reached.

What one instance learns — a target down, a target recovered, a key revoked, the key
a session is bound to — the other obeys on its next request; an instance on memory
(``store=None``) learns nothing from them. Redis stopped mid-test fails no request:
each instance answers from its own view and says so once. Last, the same across real
processes: ``proxai-asgi --workers 2`` beside a middleware in this process."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import redis as redis_client

from proxai_asgi import Fallback, ProxaiMiddleware, Route
from tests.helpers.redis_server import RedisServer, redis_server
from tests.helpers.servers import FakeUpstream, Reply, Seen, serve
from tests.routing.test_failover import (
    ANTHROPIC,
    CHAT,
    GOOD_KEY,
    REVOKED_KEY,
    Board,
    Script,
    ask_anthropic,
    error,
    key_of,
    protocol_of,
    requested_model,
    upstream,
)

DOWN = "routing state: Redis unavailable, using this process's own view"
STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
KEY_1 = "sk-pool-key-one-0123456789"
KEY_2 = "sk-pool-key-two-0123456789"
SESSION_HEADER = "x-claude-code-session-id"  # what Claude Code sends

RouteFor = Callable[[str | None], Route]


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


_databases = itertools.cycle(range(1, 16))


@pytest.fixture
def store_url(redis: RedisServer) -> str:
    """A Redis database of this test's own, empty: nothing learned by another test."""
    url = f"redis://127.0.0.1:{redis.port}/{next(_databases)}"
    with redis_client.Redis.from_url(url) as r:
        r.flushdb()
    return url


@pytest.fixture(params=["http", "inner"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Fleet:
    """The scripted upstream (an HTTP server, or the wrapped app itself) and the proxy
    instances started in front of it; everything stopped at the end of the test."""

    def __init__(self, es: ExitStack, transport: str) -> None:
        self.es = es
        self.board = Board()
        self.base = None if transport == "inner" else es.enter_context(serve(self.board))

    def script(self, rule: Callable[[Seen, int], Reply | None]) -> None:
        self.board.fake = FakeUpstream().push(Script(rule))

    @property
    def seen(self) -> list[Seen]:
        return self.board.fake.seen

    def instance(self, route: RouteFor, store: str | None, *more: RouteFor) -> str:
        """One more proxy in front of the upstream, with ``route`` (then ``more``), on
        ``store``."""
        routes = [r(self.base) for r in (route, *more)]
        app = ProxaiMiddleware(self.board, routes=routes, store=store)
        return self.es.enter_context(serve(app, close_app=True))

    def ask(
        self,
        url: str,
        stream: bool = False,
        *,
        model: str = "claude-x",
        prompt: str = "hi",
        session: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[str, list[Seen]]:
        """One request through ``url``: the answer's text and what the upstream saw of it."""
        before = len(self.seen)
        headers = dict(headers or {})
        if session:
            headers[SESSION_HEADER] = session
        text, _model = ask_anthropic(url, stream, model, prompt=prompt, headers=headers)
        return text, self.seen[before:]


@pytest.fixture
def fleet(transport: str) -> Iterator[Fleet]:
    with ExitStack() as es:
        yield Fleet(es, transport)


def protocols(seen: list[Seen]) -> list[str]:
    return [protocol_of(s) for s in seen]


def keys(seen: list[Seen]) -> list[str]:
    return [key_of(s) for s in seen]


def overloaded_primary(base: str | None) -> Route:
    """An Anthropic primary (one retry, then cooled down for long) and a Chat fallback."""
    return Route(
        "claude-*",
        upstream(ANTHROPIC, base, max_retries=1, retry_budget=0.5, target_cooldown=30),
        fallbacks=[Fallback(upstream(CHAT, base), model="backup-model")],
    )


def anthropic_overloaded(seen: Seen, n: int) -> Reply | None:
    """The Anthropic primary of ``claude-*`` is overloaded."""
    if protocol_of(seen) == ANTHROPIC and requested_model(seen).startswith("claude-"):
        return error(529)
    return None


# ------------------------------------------------------------------------- cooldowns


@STREAMS
def test_a_target_cooled_on_one_instance_is_skipped_by_the_other(
    fleet: Fleet, store_url: str, stream: bool
) -> None:
    fleet.script(anthropic_overloaded)
    a = fleet.instance(overloaded_primary, store_url)
    b = fleet.instance(overloaded_primary, store_url)
    memory = fleet.instance(overloaded_primary, None)

    text, seen = fleet.ask(a, stream)
    assert text == "answered by backup-model"
    assert protocols(seen) == [ANTHROPIC, ANTHROPIC, CHAT]  # a retry, then cooled: fallback
    for _ in range(2):
        text, seen = fleet.ask(b, stream)
        assert text == "answered by backup-model"
        assert protocols(seen) == [CHAT]  # straight to the fallback: never the primary
    # An instance that shares nothing still learns it the hard way.
    text, seen = fleet.ask(memory, stream)
    assert text == "answered by backup-model"
    assert protocols(seen) == [ANTHROPIC, ANTHROPIC, CHAT]


def briefly_cooled_primary(base: str | None) -> Route:
    """A primary cooled for a moment only after one failure, and a Chat fallback."""
    return Route(
        "claude-*",
        upstream(ANTHROPIC, base, max_retries=0, target_cooldown=0.2),
        fallbacks=[Fallback(upstream(CHAT, base), model="backup-model")],
    )


def test_a_primary_that_recovers_on_one_instance_is_used_again_by_every_instance(
    fleet: Fleet, store_url: str
) -> None:
    down = [True]
    fleet.script(lambda seen, n: anthropic_overloaded(seen, n) if down[0] else None)
    a = fleet.instance(briefly_cooled_primary, store_url)
    b = fleet.instance(briefly_cooled_primary, store_url)
    memory = fleet.instance(briefly_cooled_primary, None)

    assert protocols(fleet.ask(a)[1]) == [ANTHROPIC, CHAT]
    assert protocols(fleet.ask(b)[1]) == [CHAT]  # cooled, for every instance
    assert protocols(fleet.ask(memory)[1]) == [ANTHROPIC, CHAT]  # (learned by itself)
    down[0] = False
    time.sleep(0.3)  # the cooldown (0.2 s) lapses: the next request probes the primary
    for url in (b, memory):
        text, seen = fleet.ask(url)
        assert (text, protocols(seen)) == ("answered by claude-x", [ANTHROPIC])
    for url in (a, b, a, b, memory):  # the probe succeeded: traffic is back on the primary
        text, seen = fleet.ask(url)
        assert (text, protocols(seen)) == ("answered by claude-x", [ANTHROPIC])


def revoked_first_key(base: str | None) -> Route:
    return Route("*", upstream(ANTHROPIC, base, [REVOKED_KEY, GOOD_KEY]))


def refuse_revoked(seen: Seen, n: int) -> Reply | None:
    if key_of(seen) == REVOKED_KEY:
        return error(401, "authentication_error", "invalid x-api-key")
    return None


PROMPTS = [f"question {i}" for i in range(8)]  # eight conversations, spread over the pool


def test_a_key_revoked_on_one_instance_is_skipped_by_the_other(
    fleet: Fleet, store_url: str
) -> None:
    fleet.script(refuse_revoked)
    a = fleet.instance(revoked_first_key, store_url)
    b = fleet.instance(revoked_first_key, store_url)
    memory = fleet.instance(revoked_first_key, None)

    tried: list[str] = []
    for prompt in PROMPTS:  # until a conversation starts on the revoked key
        text, seen = fleet.ask(a, prompt=prompt)
        assert text == "answered by claude-x"
        tried += keys(seen)
        if REVOKED_KEY in tried:
            break
    assert tried.count(REVOKED_KEY) == 1 and tried[-2:] == [REVOKED_KEY, GOOD_KEY]

    for prompt in PROMPTS:  # the same conversations: none tries the revoked key
        text, seen = fleet.ask(b, prompt=prompt)
        assert (text, keys(seen)) == ("answered by claude-x", [GOOD_KEY])

    on_memory = [k for prompt in PROMPTS for k in keys(fleet.ask(memory, prompt=prompt)[1])]
    assert on_memory.count(REVOKED_KEY) == 1  # it had to learn it itself


# -------------------------------------------------------------------------- affinity


def two_key_pool(base: str | None) -> Route:
    """Both keys good; a rate-limited key is cooled for a moment only."""
    return Route("*", upstream(ANTHROPIC, base, [KEY_1, KEY_2], max_retries=0, target_cooldown=0.2))


def test_a_session_bound_on_one_instance_stays_on_its_key_on_the_other(
    fleet: Fleet, store_url: str
) -> None:
    limited: set[str] = set()  # keys answering 429
    revoked: set[str] = set()  # keys answering 401

    def rule(seen: Seen, n: int) -> Reply | None:
        if key_of(seen) in revoked:
            return error(401, "authentication_error", "invalid x-api-key")
        if key_of(seen) in limited:
            return error(429, "rate_limit_error", "slow down")
        return None

    fleet.script(rule)
    a = fleet.instance(two_key_pool, store_url)
    b = fleet.instance(two_key_pool, store_url)
    memory = fleet.instance(two_key_pool, None)

    # Where the session would start by itself (its hash), and another session that
    # starts there too: asked of an instance that shares nothing.
    session = "session-main"
    (first,) = keys(fleet.ask(memory, session=session)[1])
    other_key = KEY_2 if first == KEY_1 else KEY_1
    neighbour = next(
        s
        for s in (f"session-{i}" for i in range(32))
        if keys(fleet.ask(memory, session=s)[1]) == [first]
    )

    # On A the session's own key is rate-limited: it moves to the other key, bound there.
    limited.add(first)
    text, seen = fleet.ask(a, session=session)
    assert (text, keys(seen)) == ("answered by claude-x", [first, other_key])
    limited.clear()
    time.sleep(0.3)  # the rate limit's cooldown (0.2 s) lapses

    # On B another session takes the recovered key, as its hash says...
    assert keys(fleet.ask(b, session=neighbour)[1]) == [first]
    # ...while the bound session stays on the key whose cache is warm, on both.
    for url in (b, b, a, b):
        text, seen = fleet.ask(url, session=session)
        assert (text, keys(seen)) == ("answered by claude-x", [other_key])
    # Its hash alone would still have chosen the first key.
    assert keys(fleet.ask(memory, session=session)[1]) == [first]

    # Its key revoked (learned on B): the session moves to the first key, on both.
    revoked.add(other_key)
    text, seen = fleet.ask(b, session=session)
    assert (text, keys(seen)) == ("answered by claude-x", [other_key, first])
    for url in (a, b, a):
        assert keys(fleet.ask(url, session=session)[1]) == [first]


# ------------------------------------------------------------------------ Redis down


def test_redis_stopped_mid_test_fails_no_request_and_is_logged_once_per_instance(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    with redis_server() as own:  # (stopped here: a server of this test's own)
        fleet.script(anthropic_overloaded)
        a = fleet.instance(overloaded_primary, own.url)
        b = fleet.instance(overloaded_primary, own.url)
        assert protocols(fleet.ask(a)[1]) == [ANTHROPIC, ANTHROPIC, CHAT]
        assert protocols(fleet.ask(b)[1]) == [CHAT]  # learned through Redis

        own.stop()
        with caplog.at_level(logging.WARNING, logger="proxai_asgi"):
            for url in (a, b, a, b, a, b):
                text, seen = fleet.ask(url, stream=url == b)
                assert text == "answered by backup-model"
                assert protocols(seen) == [CHAT]  # each from its own view
        assert caplog.text.count(DOWN) == 2  # once for each instance
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# ------------------------------------------------------------- separate processes

STANDALONE = """
[[upstreams]]
name = "primary"
protocol = "anthropic_messages"
base_url = "{base}"
max_retries = 1
retry_budget = 0.5
target_cooldown = 30

[[upstreams]]
name = "backup"
protocol = "openai_chat_completions"
base_url = "{base}/v1"

[[upstreams]]
name = "pool"
protocol = "anthropic_messages"
base_url = "{base}"
api_key_env = ["REVOKED", "GOOD"]

[[routes]]
model = "claude-*"
upstream = "primary"
fallbacks = [{{ upstream = "backup", model = "backup-model" }}]

[[routes]]
model = "pool-*"
upstream = "pool"
"""


def test_the_standalone_servers_workers_and_an_embedded_instance_share_what_they_learn(
    tmp_path: Path, store_url: str
) -> None:
    """Other processes: ``proxai-asgi --workers 2`` configured by TOML, and this
    process's middleware configured in Python with the same upstreams."""
    from tests.test_workers import proxy, start

    with ExitStack() as es:
        fleet = Fleet(es, "http")
        fleet.script(lambda seen, n: anthropic_overloaded(seen, n) or refuse_revoked(seen, n))
        assert fleet.base is not None
        config = tmp_path / "proxai.toml"
        config.write_text(STANDALONE.format(base=fleet.base))
        keys_env = {"REVOKED": REVOKED_KEY, "GOOD": GOOD_KEY}
        server = es.enter_context(
            proxy("--config", str(config), "--workers", "2", "--store", store_url, env=keys_env)
        )
        start(server, 2)
        workers = f"http://127.0.0.1:{server.port}"
        embedded = fleet.instance(overloaded_primary, store_url, revoked_first_key)
        fresh = {"connection": "close"}  # a new connection each time: any worker takes it

        # The primary learned down here is skipped by whichever worker answers...
        assert protocols(fleet.ask(embedded)[1]) == [ANTHROPIC, ANTHROPIC, CHAT]
        for _ in range(6):
            text, seen = fleet.ask(workers, headers=fresh)
            assert (text, protocols(seen)) == ("answered by backup-model", [CHAT])

        # ...and a key the workers learned revoked is skipped here.
        tried: list[str] = []
        for prompt in PROMPTS:
            tried += keys(fleet.ask(workers, model="pool-x", prompt=prompt, headers=fresh)[1])
            if REVOKED_KEY in tried:
                break
        assert tried.count(REVOKED_KEY) == 1
        for prompt in PROMPTS:
            assert keys(fleet.ask(embedded, model="pool-x", prompt=prompt)[1]) == [GOOD_KEY]
