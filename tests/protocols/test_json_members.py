"""The top-level members of a JSON object found in its bytes (``json_members``), as
the model rewrite and the Chat usage ask use them: strings with escaped quotes,
backslash runs and brackets, nested containers, whitespace and repeated keys."""

from __future__ import annotations

import json

import pytest

from proxai_asgi.protocols._kit.json_members import last_member, members, with_member_first
from proxai_asgi.serving.model_rewrite import rewrite_model

TRICKY = (
    b'{ "a" : "x\\"}]{[" , "b":[1,{"c":"\\\\"},[]], "c":{"d":{"e":"\\\\\\"}"}} ,'
    b'"n": -1.5e3,"t":true, "z" :null}'
)


def test_every_member_is_found_with_its_exact_value_bytes() -> None:
    found = {json.loads(k): TRICKY[i:end] for k, i, end in members(TRICKY)}
    assert list(found) == list(json.loads(TRICKY))
    for k, v in json.loads(TRICKY).items():
        assert json.loads(found[k]) == v  # each span is exactly its value
    assert found["n"] == b"-1.5e3" and found["z"] == b"null"


def test_the_last_of_repeated_keys_is_found_and_nested_keys_are_not_members() -> None:
    body = b'{"a":{"k":1},"k":2,"k" :[3]}'
    span = last_member(body, b'"k"')
    assert span is not None and body[span[0] : span[1]] == b"[3]"
    assert last_member(body, b'"x"') is None
    inner = last_member(body, b'"k"', body.index(b"{", 1))
    assert inner is not None and body[inner[0] : inner[1]] == b"1"


def test_a_member_is_added_first_with_a_comma_only_when_others_follow() -> None:
    assert with_member_first(b'{"a":1}', b'"m":2') == b'{"m":2,"a":1}'
    assert with_member_first(b" { } ", b'"m":2') == b' {"m":2 } '


@pytest.mark.parametrize("body", [TRICKY, b'{"model":"old","x":{"model":"nested"}}'])
def test_the_model_rewrite_changes_only_the_top_level_model(body: bytes) -> None:
    out = json.loads(rewrite_model(body, "new"))
    assert out["model"] == "new"
    assert {k: v for k, v in out.items() if k != "model"} == {
        k: v for k, v in json.loads(body).items() if k != "model"
    }


def test_an_unterminated_body_is_an_error_not_a_hang() -> None:
    with pytest.raises((ValueError, IndexError)):
        last_member(b'{"a":"never ends', b'"b"')
    with pytest.raises((ValueError, IndexError)):
        last_member(b'{"a":[1,2', b'"b"')
