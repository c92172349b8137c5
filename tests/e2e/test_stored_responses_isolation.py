"""Issue 26: one tenant's stored conversation never reaches another.

Upstreams repeat their ids (Ollama's ``chatcmpl-<0..998>``, fixed test ids): the
model here answers every request with the same id. Stored ids are minted by the
proxy, so two clients (another key, or the same key) never share a record: neither's
continuation sends the other's turns upstream, a DELETE by one leaves the other's,
and a continued answer never points at itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.responses import Response

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from proxai_asgi.store import MemoryStore, ResponseStore
from proxai_asgi.store.redis import RedisStore
from proxai_asgi.store.sqlite import SQLiteStore
from tests.e2e.test_stored_responses import ANTHROPIC, CHAT, COMMAND, MODEL, proxy
from tests.helpers.redis_server import redis_server
from tests.helpers.scripted_model import ScriptedModel

GEMINI: ProtocolName = "gemini_generate_content"
SECRET = "my password is hunter2"
MINTED = re.compile(r"resp_[0-9a-f]{48}")


class FixedIdModel(ScriptedModel):
    """Every answer has the same id, as some upstreams do."""

    def answer(self, request: c.Request, n: int) -> c.Response:
        response = super().answer(request, n)
        response.id = "chatcmpl-7"
        return response


def create(client: openai.OpenAI, stream: bool, **kw: Any) -> Response:
    """One answer; a stream's events must all name the id its final response has."""
    if not stream:
        return client.responses.create(model=MODEL, **kw)
    events = list(client.responses.create(model=MODEL, stream=True, **kw))
    final: Response = events[-1].response  # type: ignore[union-attr]
    assert events[0].response.id == final.id  # type: ignore[union-attr]
    for e in events:
        if e.type == "response.output_item.done" and e.item.type == "message":
            assert e.item.id.startswith("msg_" + final.id[len("resp_") :])
    return final


def texts(model: ScriptedModel, n: int) -> str:
    """Everything the upstream read in its n-th request, as text."""
    decoded = model.exchanges[n].decoded
    assert decoded is not None
    return " ".join(p.text for m in decoded.messages for p in m.content if isinstance(p, c.Text))


def two_tenants(url: str, model: ScriptedModel, stream: bool, same_key: bool) -> None:
    keys = ("sk-shared", "sk-shared") if same_key else ("sk-tenant-x", "sk-tenant-y")
    x = openai.OpenAI(base_url=url, api_key=keys[0], max_retries=0)
    y = openai.OpenAI(base_url=url, api_key=keys[1], max_retries=0)
    y1 = create(y, stream, input="hello, I am Y")
    x1 = create(x, stream, input=SECRET)
    y2 = create(y, stream, input="what did I say?", previous_response_id=y1.id)
    assert SECRET not in texts(model, 2)
    assert "hello, I am Y" in texts(model, 2)
    for r in (x1, y1):
        assert MINTED.fullmatch(r.id), r.id
        assert all(item.id and r.id[len("resp_") :] in item.id for item in r.output)
    assert x1.id != y1.id
    assert y2.id != y1.id and y2.previous_response_id == y1.id  # never self-pointing
    x2 = create(x, stream, input="and me?", previous_response_id=x1.id)
    assert SECRET in texts(model, 3) and "hello, I am Y" not in texts(model, 3)
    assert x2.id not in (x1.id, y1.id, y2.id)
    # A DELETE by one never deletes the other's.
    x.responses.delete(x1.id)
    assert y.responses.retrieve(y1.id).id == y1.id
    y3 = create(y, stream, input="once more", previous_response_id=y2.id)
    assert y3.id not in (y1.id, y2.id)
    assert texts(model, 4).count("hello, I am Y") == 1  # the chain once, no loop
    x.close()
    y.close()


@pytest.mark.parametrize("same_key", [False, True], ids=["two_keys", "one_key"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("upstream", [CHAT, ANTHROPIC, GEMINI], ids=["chat", "anthropic", "gemini"])
def test_stored_ids_are_minted_not_upstream_ids(
    upstream: ProtocolName, transport: str, stream: bool, same_key: bool
) -> None:
    model = FixedIdModel(upstream, COMMAND)
    with proxy(model, transport) as url:
        two_tenants(url, model, stream, same_key)


@contextmanager
def engine(name: str, tmp_path: Path) -> Iterator[ResponseStore]:
    if name == "memory":
        yield MemoryStore()
    elif name == "sqlite":
        yield SQLiteStore(str(tmp_path / "stored.db"))
    else:
        with redis_server() as server:
            yield RedisStore(server.url)


@pytest.mark.parametrize("same_key", [False, True], ids=["two_keys", "one_key"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_stored_ids_are_minted_not_upstream_ids_on_every_engine(
    tmp_path: Path, store: str, stream: bool, same_key: bool
) -> None:
    model = FixedIdModel(CHAT, COMMAND)
    with engine(store, tmp_path) as kept, proxy(model, "http", store=kept) as url:
        two_tenants(url, model, stream, same_key)


@pytest.mark.parametrize("store", ["memory", "sqlite", "redis"])
def test_store_bounds_per_owner_a_flooding_tenant_leaves_others_continuable(
    tmp_path: Path, store: str
) -> None:
    model = ScriptedModel(ANTHROPIC, COMMAND)
    options = {"max_owner_entries": 3}
    kept: ResponseStore
    with engine(store, tmp_path) as base:
        # the same engine, with a per-owner bound of 3 (and for memory a store-wide
        # bound a flood would otherwise fill)
        if isinstance(base, MemoryStore):
            kept = MemoryStore(max_entries=5, **options)
        elif isinstance(base, SQLiteStore):
            kept = SQLiteStore(base.path, **options)
        else:
            assert isinstance(base, RedisStore)
            kept = RedisStore(base.url, **options)
        with proxy(model, "http", store=kept) as url:
            a = openai.OpenAI(base_url=url, api_key="sk-tenant-a", max_retries=0)
            b = openai.OpenAI(base_url=url, api_key="sk-tenant-b", max_retries=0)
            first = b.responses.create(model=MODEL, input="B's own conversation")
            for i in range(8):
                a.responses.create(model=MODEL, input=f"flood {i}")
            b.responses.create(model=MODEL, input="go on", previous_response_id=first.id)
            assert "B's own conversation" in texts(model, 9)
            a.close()
            b.close()


@pytest.mark.parametrize("previous", ["resp_x:owner", "../resp_1", "r" * 300])
def test_a_previous_id_no_store_can_hold_is_not_found_without_asking_the_store(
    previous: str,
) -> None:
    model = ScriptedModel(CHAT, COMMAND)
    with proxy(model, "inner") as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model=MODEL, input="hi", previous_response_id=previous)
        client.close()
    error = caught.value.response.json()["error"]
    assert error["code"] == "previous_response_not_found" and len(error["message"]) < 120
    assert model.exchanges == []
