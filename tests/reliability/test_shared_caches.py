"""The tables a process keeps between requests (issue 26 §6), through the public API.

- Bounded by bytes: requests carrying large distinct contents (call ids, tool names, model
  names in a Gemini upstream's URL) leave the process holding no more than the tables'
  byte bounds, however many come. Before, the tables were bounded by count only: each
  such request was kept whole (thousands of entries of any size).
- Never shared between contents: two tenants whose tool sets, schemas, call ids and
  arguments are alike in size and names send requests at once, from several threads
  (each its own event loop and middleware, the tables being the process's) switching
  every few bytecodes; every upstream body equals the one the same request gives alone.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.codec import ProtocolName
from tests.helpers.races import race
from tests.helpers.servers import FakeUpstream, Reply, Seen, reply_from_capture, serve

A: ProtocolName = "anthropic_messages"
C: ProtocolName = "openai_chat_completions"
R: ProtocolName = "openai_responses"
G: ProtocolName = "gemini_generate_content"
TRANSPORTS = ["http", "inner"]


async def _inner_404(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


class _Unrecorded(list[Seen]):
    """A fake upstream's record that keeps nothing: the byte tests measure what the
    proxy keeps, not what the fake does."""

    def append(self, seen: Seen) -> None:
        pass


def _canned(*, record: bool) -> FakeUpstream:
    """An Anthropic or Gemini upstream answering every request with a recorded reply
    (streamed when asked); records every request only when ``record``."""
    replies = {
        (gemini, stream): reply_from_capture(
            f"{'gemini' if gemini else 'anthropic'}_{'sse' if stream else 'json'}_text_basic"
        )
        for gemini in (False, True)
        for stream in (False, True)
    }

    def pick(seen: Seen) -> Reply:
        stream = ":streamGenerateContent" in seen.path or b'"stream":true' in seen.body
        return replies[("models/" in seen.path, stream)]

    return FakeUpstream([pick], seen=[] if record else _Unrecorded())


@contextmanager
def _proxies(
    transport: str, upstream: ProtocolName, canned: FakeUpstream
) -> Iterator[Callable[[], ProxaiMiddleware]]:
    """Middlewares in front of ``canned``: over HTTP (the lean pool) or wrapping it."""
    if transport == "inner":
        yield lambda: ProxaiMiddleware(canned, upstream=Upstream.inner_app(upstream))
        return
    with serve(canned) as url:
        yield lambda: ProxaiMiddleware(_inner_404, upstream=Upstream(upstream, url, api_key="k"))


@contextmanager
def _proxy(
    transport: str, upstream: ProtocolName, canned: FakeUpstream
) -> Iterator[ProxaiMiddleware]:
    with _proxies(transport, upstream, canned) as make:
        yield make()


def _path(client: ProtocolName, model: str = "m", stream: bool = False) -> str:
    if client == G:
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"/v1beta/models/{model}:{method}"
    return {A: "/v1/messages", C: "/v1/chat/completions", R: "/v1/responses"}[client]


async def _post(
    client: httpx.AsyncClient,
    protocol: ProtocolName,
    body: dict[str, Any],
    stream: bool,
    status: int = 200,
) -> None:
    if protocol != G:
        body = {**body, "stream": stream}
    model = body.pop("model") if protocol == G else "m"
    response = await client.post(_path(protocol, model, stream), json=body)
    assert response.status_code == status, response.text[:300]


def _client(app: ProxaiMiddleware) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy")


# ------------------------------------------------------------- what a client sends


def _tools(client: ProtocolName, tenant: int) -> list[dict[str, Any]]:
    """Three tools named alike for both tenants (the same size and end names), their
    descriptions and schemas the tenant's own."""
    out = []
    for name in ("read", "exec", "write"):
        about = f"{name} in /home/tenant{tenant}"
        schema = {
            "type": "object",
            "properties": {"path": {"type": "string", "description": f"tenant{tenant}"}},
        }
        if client == A:
            out.append({"name": name, "description": about, "input_schema": schema})
        elif client == C:
            function = {"name": name, "description": about, "parameters": schema}
            out.append({"type": "function", "function": function})
        elif client == R:
            out.append(
                {"type": "function", "name": name, "description": about, "parameters": schema}
            )
        else:
            out.append({"name": name, "description": about, "parametersJsonSchema": schema})
    return [{"functionDeclarations": out}] if client == G else out


def _calls(
    tenant: int, count: int, id_length: int = 0, salt: str = ""
) -> list[tuple[str, dict[str, Any]]]:
    """A tenant's calls: ids alike in size for both tenants (and ``:``, which Anthropic
    refuses, so that they are cleaned), arguments alike in size."""
    pad = salt + "x" * id_length
    return [
        (f"call:{tenant}{k}{pad}", {"path": f"/home/tenant{tenant}/f{k}"}) for k in range(count)
    ]


def _body(
    client: ProtocolName,
    tenant: int,
    marker: str,
    calls: list[tuple[str, dict[str, Any]]],
    tools: list[dict[str, Any]] | None = None,
    model: str = "m",
) -> dict[str, Any]:
    """A conversation of tool round trips, then the user's ``marker`` (found again in
    the upstream body: which request it was)."""
    tools = _tools(client, tenant) if tools is None else tools
    if client == A:
        calls = [(call_id.replace(":", "_"), args) for call_id, args in calls]
        messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
        for k, (call_id, args) in enumerate(calls):
            use = {"type": "tool_use", "id": call_id, "name": "exec", "input": args}
            messages.append({"role": "assistant", "content": [use]})
            result = {"type": "tool_result", "tool_use_id": call_id, "content": "out"}
            last = k == len(calls) - 1
            extra = [{"type": "text", "text": marker}] if last else []
            messages.append({"role": "user", "content": [result, *extra]})
        if not calls:
            messages[0]["content"] = marker
        return {"model": model, "max_tokens": 16, "tools": tools, "messages": messages}
    if client == C:
        chat: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
        for call_id, args in calls:
            function = {"name": "exec", "arguments": json.dumps(args)}
            call = {"id": call_id, "type": "function", "function": function}
            chat.append({"role": "assistant", "content": None, "tool_calls": [call]})
            chat.append({"role": "tool", "tool_call_id": call_id, "content": "out"})
        chat.append({"role": "user", "content": marker})
        return {"model": model, "max_tokens": 16, "tools": tools, "messages": chat}
    if client == R:
        items: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
        for call_id, args in calls:
            items.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": "exec",
                    "arguments": json.dumps(args),
                }
            )
            items.append({"type": "function_call_output", "call_id": call_id, "output": "out"})
        items.append({"role": "user", "content": marker})
        return {"model": model, "max_output_tokens": 16, "tools": tools, "input": items}
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "start"}]}]
    for call_id, args in calls:
        call = {"name": "exec", "args": args, "id": call_id}
        contents.append({"role": "model", "parts": [{"functionCall": call}]})
        answer = {"name": "exec", "response": {"out": "out"}, "id": call_id}
        contents.append({"role": "user", "parts": [{"functionResponse": answer}]})
    contents[-1]["parts"].append({"text": marker})
    return {"model": model, "contents": contents, "tools": tools}


# ------------------------------------------------------------------ bytes bounds


@contextmanager
def _sender(
    app: ProxaiMiddleware, protocol: ProtocolName, stream: bool, status: int = 200
) -> Iterator[Callable[[dict[str, Any]], None]]:
    """Posts a ``protocol`` client's bodies to ``app``, one at a time, on a loop of its own."""
    loop = asyncio.new_event_loop()
    client = _client(app)
    try:
        yield lambda body: loop.run_until_complete(_post(client, protocol, body, stream, status))
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()


def _held(
    transport: str,
    upstream: ProtocolName,
    body_of: Callable[[int], dict[str, Any]],
    count: int,
    stream: bool = False,
    status: int = 200,
) -> int:
    """The bytes the process still holds after a Chat client's ``count`` requests
    ``body_of(i)`` (each dropped), beyond what it held after the first."""
    canned = _canned(record=False)
    with _proxy(transport, upstream, canned) as app, _sender(app, C, stream, status) as send:
        send(body_of(0))
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i in range(1, count + 1):
                send(body_of(i))
            gc.collect()
            return tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()


# What the process may keep of these requests beyond the tables' bounds, which keep no
# entry of their size: what the run itself allocates.
_MARGIN = 1 << 20


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_long_call_ids_are_not_all_kept(transport: str, stream: bool) -> None:
    """A Chat client's long call ids toward Anthropic (cleaned, as Anthropic takes
    them): the call-id tables kept each one (key and cleaned copy, twice over), 4096
    of them whatever their size."""
    salt = os.urandom(8).hex()  # (ids no earlier test sent)
    held = _held(transport, A, lambda i: _body(C, 0, "go", _calls(0, 1, 64_000 + i, salt)), 24)
    # (24 ids of 64 KB: 3 MB held twice before; the safe-id table is bounded at 2 MB and
    # keeps no id over 1 KB)
    assert held < _MARGIN, held


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tool_sets_with_long_names_are_not_all_noted(transport: str) -> None:
    """Tool sets toward Anthropic are noted by their size and end names on a first
    sighting: those names were kept uncounted (512 notes of any size)."""
    salt = os.urandom(8).hex()  # (names no earlier test sent)
    names = (salt + "n" * 600_000, salt + "m" * 600_000)

    def tools(i: int) -> list[dict[str, Any]]:
        return [
            {"type": "function", "function": {"name": f"{name}{i}", "parameters": {}}}
            for name in names
        ]

    held = _held(transport, A, lambda i: _body(C, 0, "go", [], tools(i)), 16)
    # (16 sets of 1.2 MB of names: 19 MB noted before. Now the notes and Chat's tool
    # sets keep no entry over 1 MB, but single names of 600 KB may be kept up to their
    # table's 4 MiB, more or less of it already full from earlier tests in this process.)
    assert held < 5 * _MARGIN, held


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_long_model_names_in_a_gemini_url_are_not_all_kept(transport: str) -> None:
    """A Gemini upstream's URL (or the wrapped app's path) names the client's model:
    the lean pool kept each URL (4096 of any size), and ``urlsplit``'s own cache the
    last 128 it split, for both transports. A model that enters a URL is now one
    segment of at most 256 characters: a longer one is refused before any table or
    URL sees it, and nothing of it is kept."""
    salt = os.urandom(8).hex()  # (models no earlier test sent)
    model = f"{salt}-" + "x" * 60_000
    body_of = lambda i: _body(C, 0, "go", [], model=f"{i}{model}")  # noqa: E731
    held = _held(transport, G, body_of, 40, status=400)
    assert held < _MARGIN, held  # (40 URLs of 60 KB, held once or twice before)


# ---------------------------------------------------- tenants never share an entry

DIRECTIONS = [(C, A), (R, A), (G, A), (A, G), (C, G), (R, G)]
VARIANTS = [(tenant, count) for tenant in (0, 1) for count in (1, 2, 3)]


def _variant_body(client: ProtocolName, tenant: int, count: int) -> dict[str, Any]:
    return _body(client, tenant, f"variant-{tenant}-{count};", _calls(tenant, count))


def _which(body: bytes) -> tuple[int, int]:
    at = body.index(b"variant-") + len(b"variant-")
    tenant, count = body[at : body.index(b";", at)].split(b"-")
    return int(tenant), int(count)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(("client", "upstream"), DIRECTIONS)
def test_concurrent_tenants_never_receive_each_others_entries(
    client: ProtocolName, upstream: ProtocolName, transport: str, stream: bool
) -> None:
    from proxai_asgi import bounded_cache

    canned = _canned(record=True)
    alone: dict[tuple[int, int], bytes] = {}
    with _proxies(transport, upstream, canned) as make:
        with _sender(make(), client, stream) as send:
            for tenant, count in VARIANTS:  # each alone, from empty tables and again
                bounded_cache.clear_all()
                for _ in range(3):
                    send(_variant_body(client, tenant, count))
                first, *again = [seen.body for seen in canned.seen[-3:]]
                assert again == [first, first]
                alone[(tenant, count)] = first
        assert len(set(alone.values())) == len(VARIANTS)
        canned.seen.clear()
        bounded_cache.clear_all()
        failures: list[str] = []

        def work(seed: int) -> None:
            async def batch() -> None:
                # (each thread its own middleware and loop; the tables are the process's)
                async with _client(make()) as http:
                    order = [VARIANTS[(seed + k) % len(VARIANTS)] for k in range(24)]
                    await asyncio.gather(
                        *(
                            _post(http, client, _variant_body(client, t, n), stream)
                            for t, n in order
                        )
                    )

            try:
                asyncio.run(batch())
            except Exception as exc:
                failures.append(repr(exc))

        race(work, 3, timeout=120)
    assert not failures, failures[:3]
    assert len(canned.seen) == 3 * 24
    for seen in canned.seen:
        assert seen.body == alone[_which(seen.body)], _which(seen.body)
