"""A Chat client that streams without ``stream_options.include_usage`` through a Chat
upstream (pass-through) still has its tokens counted when accounting is on: the
proxy asks the upstream for usage and takes the answer's usage chunk (and OpenAI's
``"usage":null`` members) out again, so the client gets the bytes it would have got
without the proxy. A client that asked for usage, and any client with accounting
off, gets every byte untouched. Over both transports (HTTP upstream and the wrapped
app, whose chunks are cut anywhere). The upstream answers like OpenAI: the recorded
stream when asked for usage, the same without the usage when not."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from proxai_asgi import Budget, ProxaiMiddleware, Route, Upstream
from proxai_asgi.usage import MemoryLedger
from proxai_asgi.usage.budget_memory import MemoryBudgets
from proxai_asgi.usage.budgets import Budgets
from tests.helpers.captures import response_body
from tests.helpers.servers import FakeUpstream, Reply, Seen, serve

pytestmark = pytest.mark.anyio

CHAT = "openai_chat_completions"
INNER = pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
SSE = [("content-type", "text/event-stream; charset=utf-8")]
REQUEST = (
    b'{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"What is 4200 + 42?"}]}'
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def es() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


def asked_stream() -> bytes:
    return response_body("chat_sse_text_basic_include_usage")


def unasked(stream: bytes) -> bytes:
    """What OpenAI streams to a request without ``include_usage``."""
    frames = [f for f in stream.split(b"\n\n") if b'"choices":[],"usage":{' not in f]
    return b"\n\n".join(frames).replace(b',"usage":null', b"")


def recorded_usage(stream: bytes) -> tuple[int, int]:
    (frame,) = [f for f in stream.split(b"\n\n") if b'"choices":[]' in f]
    usage = json.loads(frame[len(b"data: ") :])["usage"]
    return usage["prompt_tokens"], usage["completion_tokens"]


def openai_like(seen: Seen, last_blank_line: bool = True) -> Reply:
    """The recorded stream, with its usage only when the request asks for it; cut at
    random places (a wrapped app's chunks need not be frames)."""
    options = seen.json().get("stream_options") or {}
    body = asked_stream() if options.get("include_usage") is True else unasked(asked_stream())
    if not last_blank_line:
        body = body.removesuffix(b"\n\n")
    rnd = random.Random(len(body))
    points = sorted(rnd.sample(range(1, len(body)), 30))
    chunks = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    return Reply(200, SSE, chunks)


async def post(
    es: ExitStack, inner: bool, body: bytes, reply: Any = openai_like, **accounting: Any
) -> tuple[httpx.Response, FakeUpstream]:
    fake = FakeUpstream().push(reply)
    if inner:
        up = Upstream.inner_app(CHAT)
    else:
        up = Upstream(CHAT, es.enter_context(serve(fake)) + "/v1", "sk-upstream")
    mw = ProxaiMiddleware(fake, routes=[Route("*", up)], **accounting)
    try:
        transport = httpx.ASGITransport(app=mw)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as http:
            headers = {"content-type": "application/json", "authorization": "Bearer sk-client"}
            r = await http.post("/v1/chat/completions", content=body, headers=headers)
    finally:
        await mw.aclose()
    assert r.status_code == 200, r.text
    assert len(fake.seen) == 1
    return r, fake


@INNER
async def test_a_client_without_include_usage_gets_the_stream_without_usage_and_is_counted(
    es: ExitStack, inner: bool
) -> None:
    ledger, engine = MemoryLedger(), MemoryBudgets()
    budgets = Budgets([Budget(tokens=1_000_000, window="1d")], engine)
    r, fake = await post(es, inner, REQUEST, ledger=ledger, budgets=budgets)

    # Upstream: the client's bytes with one member added.
    assert fake.seen[0].body == b'{"stream_options":{"include_usage":true},' + REQUEST[1:]
    # Client: the upstream's stream minus what it did not ask for, byte for byte.
    assert r.content == unasked(asked_stream())
    assert b'"usage"' not in r.content and r.content.endswith(b"data: [DONE]\n\n")
    prompt, completion = recorded_usage(asked_stream())
    (rec,) = await ledger.records()
    assert (rec.input_tokens, rec.output_tokens) == (prompt, completion)
    assert rec.served_model == "gpt-4o-2024-08-06"
    ((_key, counter),) = engine.counters.items()
    assert (counter.used, counter.held) == (prompt + completion, 0)


@INNER
async def test_a_last_frame_without_its_blank_line_ends_the_stream_as_without_accounting(
    es: ExitStack, inner: bool
) -> None:
    def reply(seen: Seen) -> Reply:
        return openai_like(seen, last_blank_line=False)

    plain, _ = await post(es, inner, REQUEST, reply)
    ledger = MemoryLedger()
    r, fake = await post(es, inner, REQUEST, reply, ledger=ledger)

    assert b"data: [DONE]" in r.content and r.content == plain.content
    assert len(fake.seen) == 1  # complete: nothing was asked to continue it
    (rec,) = await ledger.records()
    assert (rec.input_tokens, rec.output_tokens) == recorded_usage(asked_stream())


@INNER
async def test_a_client_that_asked_for_usage_gets_every_byte_untouched(
    es: ExitStack, inner: bool
) -> None:
    body = REQUEST[:-1] + b', "stream_options" : {"include_usage": true}}'
    ledger = MemoryLedger()
    r, fake = await post(es, inner, body, ledger=ledger)

    assert fake.seen[0].body == body
    assert r.content == asked_stream()
    (rec,) = await ledger.records()
    assert (rec.input_tokens, rec.output_tokens) == recorded_usage(asked_stream())


@INNER
async def test_the_clients_other_stream_options_are_kept(es: ExitStack, inner: bool) -> None:
    body = REQUEST[:-1] + b',"stream_options":{"include_usage":false,"x":1}}'
    ledger = MemoryLedger()
    r, fake = await post(es, inner, body, ledger=ledger)

    assert fake.seen[0].body == body.replace(b'"include_usage":false', b'"include_usage":true')
    assert r.content == unasked(asked_stream())
    (rec,) = await ledger.records()
    assert (rec.input_tokens, rec.output_tokens) == recorded_usage(asked_stream())


@INNER
async def test_with_accounting_off_the_upstream_gets_the_clients_body_byte_for_byte(
    es: ExitStack, inner: bool
) -> None:
    r, fake = await post(es, inner, REQUEST)

    assert fake.seen[0].body == REQUEST
    assert r.content == unasked(asked_stream())
