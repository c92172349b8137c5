"""The sans-IO parts of stored_responses and stored_endpoints: item ids, paging,
the recorder."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from proxai_asgi.errors import ProxyError
from proxai_asgi.responses_state import stored_endpoints as se
from proxai_asgi.responses_state import stored_responses as sr


def items(n: int) -> list[msgspec.Raw]:
    return [
        msgspec.Raw(json.dumps({"id": f"it_{i}", "type": "message"}).encode()) for i in range(n)
    ]


def page(items_: list[msgspec.Raw], **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(se.paginate(items_, se.Page(**params)))
    result["ids"] = [i["id"] for i in result.pop("data")]
    return result


def test_pages_follow_the_order_and_say_when_more_lie_ahead() -> None:
    five = items(5)
    assert page(five, limit=2) == {
        "object": "list",
        "ids": ["it_4", "it_3"],
        "first_id": "it_4",
        "last_id": "it_3",
        "has_more": True,
    }
    assert page(five, limit=2, after="it_3")["ids"] == ["it_2", "it_1"]
    assert page(five, limit=2, after="it_1") | {"ids": None} == {
        "object": "list",
        "ids": None,
        "first_id": "it_0",
        "last_id": "it_0",
        "has_more": False,
    }
    assert page(five, limit=10, order="asc")["ids"] == ["it_0", "it_1", "it_2", "it_3", "it_4"]
    # before: the page just before the cursor, in the same order
    back = page(five, limit=2, order="asc", before="it_4")
    assert back["ids"] == ["it_2", "it_3"] and back["has_more"] is True
    assert page(five, limit=2, order="asc", before="it_1")["has_more"] is False
    # both cursors: the items between them
    assert page(five, limit=10, order="asc", after="it_0", before="it_3")["ids"] == [
        "it_1",
        "it_2",
    ]
    empty = page(five, after="it_0")
    assert empty["ids"] == [] and empty["first_id"] is None and empty["has_more"] is False


@pytest.mark.parametrize(
    ("query", "param"), [(b"limit=0", "limit"), (b"limit=101", "limit"), (b"order=up", "order")]
)
def test_bad_page_parameters_are_400s_naming_the_parameter(query: bytes, param: str) -> None:
    with pytest.raises(ProxyError) as info:
        se.page_params(query)
    assert info.value.status == 400 and info.value.param == param


def test_stored_input_items_get_ids_and_the_listed_shape() -> None:
    given = [
        {"role": "user", "content": "hi"},
        {"type": "message", "role": "assistant", "content": "hello"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok", "id": "fco_mine"},
    ]
    out = [json.loads(bytes(i)) for i in sr.with_ids(given)]
    assert out[0]["type"] == "message" and out[0]["id"].startswith("msg_")
    assert out[0]["content"] == [{"type": "input_text", "text": "hi"}]
    assert out[1]["content"] == [{"type": "output_text", "text": "hello", "annotations": []}]
    assert out[2]["id"] == "fco_mine"  # the client's own id is kept
    assert given[0] == {"role": "user", "content": "hi"}  # the request is not mutated


def _frame(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def test_the_recorder_keeps_the_terminal_snapshot_or_the_finished_items() -> None:
    created = {"id": "resp_1", "status": "in_progress", "output": []}
    item = {"id": "msg_1", "type": "message"}
    done = {"id": "resp_1", "status": "completed", "output": [item]}
    rec = sr.Recorder(stream=True)
    assert rec.feed(_frame("response.created", response=created), True) is None
    assert rec.feed(_frame("response.output_text.delta", delta="x"), True) is None
    assert rec.feed(_frame("response.output_item.done", item=item), True) is None
    # the snapshot's own bytes, not a re-encoding
    assert rec.feed(_frame("response.completed", response=done), True) == json.dumps(done).encode()
    cut = sr.Recorder(stream=True)
    cut.feed(
        _frame("response.created", response=created)
        + _frame("response.output_item.done", item=item),
        True,
    )
    assert json.loads(cut.abandoned() or b"") == {
        **created,
        "status": "cancelled",
        "output": [item],
    }
    assert sr.Recorder(stream=True).abandoned() is None  # nothing began: nothing kept
    whole = sr.Recorder(stream=False)
    assert whole.feed(b'{"id":', True) is None
    assert whole.feed(b'"resp_2"}', False) == b'{"id":"resp_2"}'
    assert whole.abandoned() is None  # a JSON answer is stored whole or not at all
