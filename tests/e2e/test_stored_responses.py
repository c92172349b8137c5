"""Stored Responses over stateless upstreams, through the official ``openai`` SDK.

Three turns chained with ``previous_response_id`` (a tool call with reasoning, its
output, a follow-up) against a scripted Chat or Anthropic model, over HTTP and the
wrapped-app transport, streamed and not, with the sync and the async client: the
model must receive the whole conversation every time. Then retrieve, input items
(paged), delete, and the errors for ids the proxy does not hold.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from tests.helpers.scripted_model import CALL_ID_PREFIX, FINAL_PREFIX, ScriptedModel
from tests.helpers.servers import FakeUpstream, Reply, serve

CHAT: ProtocolName = "openai_chat_completions"
ANTHROPIC: ProtocolName = "anthropic_messages"
COMMAND = "echo stored-marker"
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    }
]
TOOL_OUTPUT = "stored-marker"
MODEL = "gpt-5.5"


async def _not_found(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"not here"})


@contextmanager
def proxy(model: ScriptedModel, transport: str, **options: Any) -> Iterator[str]:
    """The middleware in front of ``model``; yields its ``/v1`` base URL. A Chat
    upstream echoes reasoning (``reasoning_content``) so it travels the chain too."""
    extra = {"echo_reasoning_content": True} if model.protocol == CHAT else {}
    if transport == "inner":
        inner = Upstream.inner_app(model.protocol, **extra)  # type: ignore[arg-type]
        with serve(ProxaiMiddleware(model, upstream=inner, **options)) as url:
            yield url + "/v1"
        return
    with serve(model) as upstream_url:
        # OpenAI base URLs carry the version; Anthropic's and Google's do not.
        base = upstream_url + "/v1" if model.protocol == CHAT else upstream_url
        up = Upstream(model.protocol, base, "sk-upstream-key", **extra)  # type: ignore[arg-type]
        with serve(ProxaiMiddleware(_not_found, upstream=up, **options)) as url:
            yield url + "/v1"


def turn(k: int, previous: list[Response]) -> dict[str, Any]:
    """The k-th request of the conversation: only what is new since the last turn."""
    if k == 0:
        return {"input": "Print the marker, please.", "tools": TOOLS}
    if k == 1:
        call = next(i for i in previous[0].output if i.type == "function_call")
        output = {"type": "function_call_output", "call_id": call.call_id, "output": TOOL_OUTPUT}
        return {"input": [output], "tools": TOOLS, "previous_response_id": previous[0].id}
    return {
        "input": [{"role": "user", "content": "Thanks. And again?"}],
        "instructions": "Answer briefly.",
        "tools": TOOLS,
        "previous_response_id": previous[1].id,
    }


def run_sync(url: str, stream: bool, key: str = "sk-client") -> tuple[list[Response], list[Any]]:
    client = openai.OpenAI(base_url=url, api_key=key, max_retries=0)
    answers: list[Response] = []
    folded: list[Any] = []
    for k in range(3):
        kw = turn(k, answers)
        if stream:
            events = list(client.responses.create(model=MODEL, stream=True, **kw))
            answers.append(events[-1].response)  # type: ignore[union-attr]
            folded.append([e.item for e in events if e.type == "response.output_item.done"])
        else:
            answers.append(client.responses.create(model=MODEL, **kw))
    client.close()
    return answers, folded


async def _run_async(url: str, stream: bool) -> tuple[list[Response], list[Any]]:
    async with openai.AsyncOpenAI(base_url=url, api_key="sk-client", max_retries=0) as client:
        answers: list[Response] = []
        folded: list[Any] = []
        for k in range(3):
            kw = turn(k, answers)
            if stream:
                events = [
                    e async for e in await client.responses.create(model=MODEL, stream=True, **kw)
                ]
                answers.append(events[-1].response)  # type: ignore[union-attr]
                folded.append([e.item for e in events if e.type == "response.output_item.done"])
            else:
                answers.append(await client.responses.create(model=MODEL, **kw))
        return answers, folded


def run_async(url: str, stream: bool) -> tuple[list[Response], list[Any]]:
    return asyncio.run(_run_async(url, stream))


def _kinds(request: c.Request) -> list[str]:
    """The conversation as the upstream read it: role and part kind, in order."""
    out: list[str] = []
    for m in request.messages:
        for p in m.content:
            out.append(f"{m.role}:{type(p).__name__}")
    return out


@pytest.mark.parametrize("sdk", ["sync", "async"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("upstream", [CHAT, ANTHROPIC], ids=["chat", "anthropic"])
def test_three_chained_turns_reach_the_upstream_as_the_whole_conversation(
    upstream: ProtocolName, transport: str, stream: bool, sdk: str
) -> None:
    model = ScriptedModel(upstream, COMMAND, reasoning=True)
    with proxy(model, transport) as url:
        answers, folded = (run_sync if sdk == "sync" else run_async)(url, stream)
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        retrieved = [client.responses.retrieve(a.id) for a in answers]
    assert model.problems == []  # every reasoning carrier came back intact
    assert [a.status for a in answers] == ["completed"] * 3
    assert answers[2].output_text == FINAL_PREFIX + TOOL_OUTPUT
    assert answers[1].previous_response_id == answers[0].id
    assert answers[2].previous_response_id == answers[1].id
    seen = [x.decoded for x in model.exchanges]
    assert len(seen) == 3 and all(s is not None for s in seen)
    first, second, third = seen  # type: ignore[misc]
    assert _kinds(first) == ["user:Text"]  # type: ignore[arg-type]
    # Turn 2: turn 1's question, the model's reasoning, text and call, the result.
    assistant_1 = ["assistant:Reasoning", "assistant:Text", "assistant:ToolCall"]
    assert _kinds(second) == ["user:Text", *assistant_1, "tool:ToolResult"]  # type: ignore[arg-type]
    assert _kinds(third) == [  # type: ignore[arg-type]
        "user:Text",
        *assistant_1,
        "tool:ToolResult",
        "assistant:Text",
        "user:Text",
    ]
    call = second.messages[1].content[2]  # type: ignore[union-attr]
    assert isinstance(call, c.ToolCall) and call.id == f"{CALL_ID_PREFIX}0001"
    assert json.loads(call.arguments) == {"cmd": COMMAND}
    result = second.messages[2].content[0]  # type: ignore[union-attr]
    assert isinstance(result, c.ToolResult) and result.call_id == call.id
    reasoning = third.messages[1].content[0]  # type: ignore[union-attr]
    assert isinstance(reasoning, c.Reasoning)
    if upstream == ANTHROPIC:  # the thinking signature survived two store round trips
        assert reasoning.signature == "sig-scripted-0001"
    # Instructions are this request's own, never carried from an earlier turn.
    assert [t.text for t in third.system] == ["Answer briefly."]  # type: ignore[union-attr]
    assert first.system == [] and second.system == []  # type: ignore[union-attr]
    # Retrieved as returned; for a stream, the terminal snapshot = the folded items.
    for got, answer in zip(retrieved, answers, strict=True):
        assert got.model_dump() == answer.model_dump()
    if stream:
        for got, items in zip(retrieved, folded, strict=True):
            assert [i.model_dump() for i in got.output] == [i.model_dump() for i in items]


# ------------------------------------------------------------------ the endpoints


def test_input_items_list_pages_through_the_whole_context_in_both_orders() -> None:
    model = ScriptedModel(ANTHROPIC, COMMAND, reasoning=True)
    with proxy(model, "http") as url:
        answers, _ = run_sync(url, stream=False)
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        last = answers[2].id
        desc = list(client.responses.input_items.list(last, limit=2))  # every page
        asc = list(client.responses.input_items.list(last, order="asc", limit=3))
        first_page = client.responses.input_items.list(last, order="asc", limit=3)
        raw = httpx.get(
            f"{url}/responses/{last}/input_items",
            params={"order": "asc", "before": asc[5].id, "limit": 2},
            headers={"authorization": "Bearer sk-client"},
        ).json()
        bad = httpx.get(
            f"{url}/responses/{last}/input_items",
            params={"limit": 0},
            headers={"authorization": "Bearer sk-client"},
        )
    # turn 1's question, its three output items, the tool output, turn 2's answer,
    # turn 3's question: what answers[2] was generated from.
    kinds = [i.type for i in asc]
    assert kinds == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    assert [i.id for i in asc[1:4]] == [o.id for o in answers[0].output]
    assert asc[5].id == answers[1].output[0].id
    assert [getattr(i, "role", None) for i in (asc[0], asc[6])] == ["user", "user"]
    assert asc[0].content[0].text == "Print the marker, please."  # type: ignore[union-attr]
    assert asc[6].content[0].text == "Thanks. And again?"  # type: ignore[union-attr]
    assert len({i.id for i in asc}) == 7  # every item has its own id
    assert [i.id for i in desc] == [i.id for i in reversed(asc)]
    assert first_page.has_more is True and len(first_page.data) == 3
    # ``before`` in ascending order: the page just before that item.
    assert [i["id"] for i in raw["data"]] == [asc[3].id, asc[4].id]
    assert raw["first_id"] == asc[3].id and raw["last_id"] == asc[4].id
    assert raw["has_more"] is True and raw["object"] == "list"
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "limit"


def _error(exc: openai.APIStatusError) -> dict[str, Any]:
    body = exc.response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]  # type: ignore[no-any-return]


def test_delete_then_every_endpoint_and_a_chain_find_nothing() -> None:
    model = ScriptedModel(CHAT, COMMAND)
    with proxy(model, "inner") as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        first = client.responses.create(model=MODEL, input="hello")
        raw = client.responses.with_raw_response.delete(first.id)
        calls = len(model.exchanges)
        with pytest.raises(openai.NotFoundError) as got:
            client.responses.retrieve(first.id)
        with pytest.raises(openai.NotFoundError) as items:
            client.responses.input_items.list(first.id)
        with pytest.raises(openai.NotFoundError) as again:
            client.responses.delete(first.id)
        with pytest.raises(openai.BadRequestError) as chained:
            client.responses.create(model=MODEL, input="more", previous_response_id=first.id)
    assert raw.http_response.json() == {
        "id": first.id,
        "object": "response.deleted",
        "deleted": True,
    }
    for exc in (got.value, items.value, again.value):
        assert exc.status_code == 404
        assert _error(exc)["message"] == f"Response with id '{first.id}' not found."
    error = _error(chained.value)
    assert error["param"] == "previous_response_id"
    assert error["code"] == "previous_response_not_found"
    assert error["message"] == f"Previous response with id '{first.id}' not found."
    assert len(model.exchanges) == calls  # the upstream was never asked


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_unknown_and_store_false_ids_cannot_be_chained_or_read(stream: bool) -> None:
    model = ScriptedModel(ANTHROPIC, COMMAND)
    with proxy(model, "http") as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        if stream:
            events = list(
                client.responses.create(model=MODEL, input="hi", store=False, stream=True)
            )
            unstored = events[-1].response.id  # type: ignore[union-attr]
        else:
            unstored = client.responses.create(model=MODEL, input="hi", store=False).id
        calls = len(model.exchanges)
        failures = []
        for rid in (unstored, "resp_0123456789abcdef"):
            with pytest.raises(openai.NotFoundError):
                client.responses.retrieve(rid)
            with pytest.raises(openai.BadRequestError) as info:
                client.responses.create(
                    model=MODEL, input="more", previous_response_id=rid, stream=stream
                )
            failures.append(_error(info.value))
    assert calls == 1 and len(model.exchanges) == 1
    assert [f["code"] for f in failures] == ["previous_response_not_found"] * 2
    assert [f["param"] for f in failures] == ["previous_response_id"] * 2
    assert [f["type"] for f in failures] == ["invalid_request_error"] * 2


def test_a_chain_from_a_store_false_turn_is_stored_but_keeps_nothing_of_its_own() -> None:
    """``store: false`` on a chained request: it reads the chain, stores nothing."""
    model = ScriptedModel(CHAT, COMMAND)
    with proxy(model, "http") as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        first = client.responses.create(model=MODEL, input="one")
        second = client.responses.create(
            model=MODEL, input="two", previous_response_id=first.id, store=False
        )
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(second.id)
    assert second.previous_response_id == first.id
    assert _kinds(model.exchanges[1].decoded) == ["user:Text", "assistant:Text", "user:Text"]  # type: ignore[arg-type]


def test_with_the_store_off_a_chain_is_refused_as_before() -> None:
    model = ScriptedModel(CHAT, COMMAND)
    with proxy(model, "http", store="off") as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        first = client.responses.create(model=MODEL, input="one")
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(first.id)
        with pytest.raises(openai.BadRequestError) as info:
            client.responses.create(model=MODEL, input="two", previous_response_id=first.id)
    assert _error(info.value)["param"] == "previous_response_id"
    assert len(model.exchanges) == 1


# ------------------------------------------------------------------- isolation


def _outsider_sees_nothing(url: str, key: str, rid: str, model: ScriptedModel) -> None:
    """Every endpoint, for a caller who does not own ``rid``: as if it did not exist."""
    other = openai.OpenAI(base_url=url, api_key=key, max_retries=0)
    calls = len(model.exchanges)
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(rid)
    with pytest.raises(openai.NotFoundError):
        other.responses.input_items.list(rid)
    with pytest.raises(openai.NotFoundError):
        other.responses.delete(rid)
    with pytest.raises(openai.BadRequestError) as info:
        other.responses.create(model=MODEL, input="steal", previous_response_id=rid)
    assert _error(info.value)["code"] == "previous_response_not_found"
    assert len(model.exchanges) == calls


@pytest.mark.parametrize("transport", ["http", "inner"])
def test_another_key_cannot_read_list_chain_or_delete_a_response(transport: str) -> None:
    model = ScriptedModel(CHAT, COMMAND)
    with proxy(model, transport) as url:
        alice = openai.OpenAI(base_url=url, api_key="sk-alice", max_retries=0)
        first = alice.responses.create(model=MODEL, input="alice's secret")
        _outsider_sees_nothing(url, "sk-mallory", first.id, model)
        # Still alice's, whole: the attempts changed nothing.
        assert alice.responses.retrieve(first.id).id == first.id
        assert len(list(alice.responses.input_items.list(first.id))) == 1
        alice.responses.create(model=MODEL, input="next", previous_response_id=first.id)


def test_an_owner_function_replaces_the_key_as_the_owner() -> None:
    """The application's own tenancy: two keys of one tenant share, tenants do not."""

    def tenant(scope: Any) -> str:
        return dict(scope["headers"]).get(b"x-tenant", b"").decode()

    model = ScriptedModel(CHAT, COMMAND)
    with proxy(model, "http", store_owner=tenant) as url:
        one = openai.OpenAI(
            base_url=url, api_key="sk-1", max_retries=0, default_headers={"x-tenant": "acme"}
        )
        two = openai.OpenAI(
            base_url=url, api_key="sk-2", max_retries=0, default_headers={"x-tenant": "acme"}
        )
        first = one.responses.create(model=MODEL, input="shared within acme")
        assert two.responses.retrieve(first.id).id == first.id
        with pytest.raises(openai.NotFoundError):
            openai.OpenAI(
                base_url=url, api_key="sk-1", max_retries=0, default_headers={"x-tenant": "other"}
            ).responses.retrieve(first.id)


def test_the_owner_is_a_keyed_hash_never_the_credential() -> None:
    from proxai_asgi.responses_state.stored_responses import Owners

    scope = {"headers": [(b"authorization", b"Bearer sk-very-secret-key")]}
    a, b = Owners(), Owners()
    assert "sk-very-secret-key" not in a(scope)
    assert a(scope) == a(scope) and a(scope) != b(scope)  # a random key per process
    assert Owners("shared")(scope) == Owners(b"shared")(scope)  # instances can agree
    other = {"headers": [(b"x-api-key", b"sk-other")]}
    assert Owners("shared")(other) != Owners("shared")(scope)


# ------------------------------------------------------- abandoned, pass-through


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-abandoned",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def test_a_stream_the_client_abandons_is_stored_as_cancelled_never_half() -> None:
    fake = FakeUpstream()
    # Text that never ends: the upstream goes silent after two chunks.
    fake.push(
        Reply(
            200,
            [("content-type", "text/event-stream")],
            [
                _chat_chunk({"role": "assistant", "content": "Let me"}),
                _chat_chunk({"content": " think"}),
                _chat_chunk({}, "stop"),  # never sent: the stall comes first
            ],
            stall_after=2,
            stall=30,
        )
    )
    with serve(fake) as upstream_url:
        up = Upstream(CHAT, upstream_url + "/v1", "sk-upstream-key")
        with serve(ProxaiMiddleware(_not_found, upstream=up)) as url:
            client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
            with client.responses.create(model=MODEL, input="go", stream=True) as events:
                rid = None
                for event in events:
                    if event.type == "response.created":
                        rid = event.response.id
                    if event.type == "response.output_text.delta":
                        break  # the client leaves mid-answer
            assert fake.cancelled.wait(10)  # the proxy saw it go and hung up upstream
            got = None
            deadline = time.monotonic() + 10
            while got is None and time.monotonic() < deadline:
                try:
                    got = client.responses.retrieve(rid)  # type: ignore[arg-type]
                except openai.NotFoundError:
                    time.sleep(0.02)  # the record is written as the exchange unwinds
    assert got is not None and got.id == rid
    assert got.status == "cancelled"
    assert got.output == []  # the half-written message is not kept


def test_a_responses_upstream_keeps_its_own_state_for_the_client_that_made_it() -> None:
    """Ids of a Responses upstream reached with our key go to it for the client that
    created them through the proxy (the others: ``tests/e2e/test_stored_security.py``)."""
    fake = FakeUpstream()
    stored = {"id": "resp_upstream1", "object": "response", "status": "completed"}
    fake.push(Reply(200, [("content-type", "application/json")], [json.dumps(stored).encode()]))
    with serve(fake) as upstream_url:
        up = Upstream("openai_responses", upstream_url + "/v1", "sk-upstream-key")
        with serve(ProxaiMiddleware(_not_found, upstream=up)) as url:
            client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
            created = client.responses.create(model=MODEL, input="hi")
            got = client.responses.retrieve("resp_upstream1")
            client.responses.input_items.list("resp_upstream1", limit=5)
            client.responses.delete("resp_upstream1")
    assert created.id == got.id == "resp_upstream1"
    assert [s.path for s in fake.seen] == [
        "/v1/responses",
        "/v1/responses/resp_upstream1",
        "/v1/responses/resp_upstream1/input_items",
        "/v1/responses/resp_upstream1",
    ]
    assert fake.seen[2].query == b"limit=5"
    assert all(s.headers["authorization"] == "Bearer sk-upstream-key" for s in fake.seen)


def test_store_true_is_honoured_not_reported_as_dropped() -> None:
    model = ScriptedModel(CHAT, COMMAND)
    with proxy(model, "http") as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        kept = client.responses.with_raw_response.create(model=MODEL, input="a", store=True)
    with proxy(model, "http", store="off") as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        off = client.responses.with_raw_response.create(model=MODEL, input="a", store=True)
    assert "store" not in kept.headers.get("x-proxai-dropped-fields", "")
    assert "store" in off.headers.get("x-proxai-dropped-fields", "")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("transport", ["http", "inner"])
def test_a_gemini_upstream_receives_the_stored_conversation_too(
    transport: str, stream: bool
) -> None:
    model = ScriptedModel("gemini_generate_content", COMMAND)
    with proxy(model, transport) as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        first = client.responses.create(model=MODEL, input="remember 4711")
        if stream:
            events = list(
                client.responses.create(
                    model=MODEL, input="what was it?", previous_response_id=first.id, stream=True
                )
            )
            second = events[-1].response  # type: ignore[union-attr]
        else:
            second = client.responses.create(
                model=MODEL, input="what was it?", previous_response_id=first.id
            )
        assert client.responses.retrieve(second.id).model_dump() == second.model_dump()
    assert second.previous_response_id == first.id
    assert _kinds(model.exchanges[1].decoded) == ["user:Text", "assistant:Text", "user:Text"]  # type: ignore[arg-type]


def test_a_sqlite_store_keeps_conversations_over_a_restart(tmp_path: Any) -> None:
    model = ScriptedModel(ANTHROPIC, COMMAND)
    store = f"sqlite:///{tmp_path / 'responses.db'}"
    with proxy(model, "http", store=store, store_secret="kept") as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        first = client.responses.create(model=MODEL, input="remember 4711")
    with proxy(model, "inner", store=store, store_secret="kept") as url:  # as if restarted
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        second = client.responses.create(
            model=MODEL, input="what was it?", previous_response_id=first.id
        )
        assert client.responses.retrieve(first.id).model_dump() == first.model_dump()
    assert second.previous_response_id == first.id
    assert _kinds(model.exchanges[1].decoded) == ["user:Text", "assistant:Text", "user:Text"]  # type: ignore[arg-type]


def test_deleting_a_turn_ends_the_conversations_that_continue_it() -> None:
    model = ScriptedModel(CHAT, COMMAND)
    with proxy(model, "http") as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        first = client.responses.create(model=MODEL, input="one")
        second = client.responses.create(model=MODEL, input="two", previous_response_id=first.id)
        client.responses.delete(first.id)
        assert client.responses.retrieve(second.id).id == second.id  # still readable
        with pytest.raises(openai.BadRequestError) as info:
            client.responses.create(model=MODEL, input="three", previous_response_id=second.id)
    error = _error(info.value)
    assert error["code"] == "previous_response_not_found"
    assert first.id in error["message"]  # the turn that is missing
    assert len(model.exchanges) == 2
