"""Every registered codec hands each kind of reasoning token back as it got it.

A provider accepts replayed reasoning only with its own token. Whatever kind of token
an answer holds, a client codec writes it so that reading the client's copy back (the
same code reads a client's replayed history) restores the same canonical fields: its
own kind as is, any other packed and unpacked. A codec whose protocol has nowhere to
put a token carries none, rather than some. Nothing here names a protocol: a new codec
is held to this by being registered.
"""

from __future__ import annotations

import pytest

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry
from proxai_asgi.codec import Codec, fold, unfold

from ._codec import decode_stream, encode_stream
from .test_conformance import CODECS, IDS

# One reasoning part per kind of token, as an upstream decoder leaves it.
KINDS = {
    "signature": c.Reasoning(text="I should list the files.", signature="EqQBCkYIBxgCsig"),
    "redacted": c.Reasoning(redacted="EvgFCkYIBxgCredacted"),
    "encrypted_content": c.Reasoning(
        text="Listing files.", summary=True, encrypted_content="gAAAAenc", item_id="rs_up_1"
    ),
    "thought_signature": c.Reasoning(summary=True, thought_signature="Q2lrQjBlMktidzU="),
}
REQUEST = c.Request(model="m", messages=[c.Message(role="user", content=[c.Text(text="ls")])])


def _answer(reasoning: c.Reasoning) -> c.Response:
    part = c.Reasoning(**{f: getattr(reasoning, f) for f in reasoning.__struct_fields__})
    return c.Response(
        id="resp-carry",
        model="m",
        content=[part, c.ToolCall(id="call_1", name="shell", arguments='{"cmd":"ls"}')],
        stop_reason="tool_use",
        usage=c.Usage(input_tokens=3, output_tokens=4),
    )


def _tokens(response: c.Response) -> dict[str, str]:
    found: dict[str, str] = {}
    for p in response.content:
        if type(p) is c.Reasoning:
            for name in reasoning_carry.OPAQUE:
                value = getattr(p, name)
                if value is not None:
                    assert name not in found, f"two parts carry a {name}"
                    found[name] = value
    return found


def _round_trips(codec: Codec, kind: str) -> list[c.Response]:
    answer = _answer(KINDS[kind])
    whole = codec.decode_response(codec.encode_response(answer, REQUEST))
    streamed = encode_stream(codec, unfold(answer), REQUEST)
    return [whole, fold(decode_stream(codec, streamed))]


def _carries_tokens(codec: Codec) -> bool:
    return any(_tokens(back) for kind in KINDS for back in _round_trips(codec, kind))


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_a_client_codec_gives_back_every_kind_of_token_it_was_given(
    codec: Codec, kind: str
) -> None:
    if not _carries_tokens(codec):
        pytest.skip(f"{codec.name} has no field for reasoning tokens")
    original = KINDS[kind]
    for back in _round_trips(codec, kind):
        assert _tokens(back) == {kind: getattr(original, kind)}
        (reasoning,) = [p for p in back.content if type(p) is c.Reasoning]
        if kind == "signature":
            assert reasoning.text == original.text  # the text it signs comes back with it
        if original.item_id is not None:
            assert reasoning.item_id == original.item_id


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_no_packed_value_is_left_in_a_canonical_field(codec: Codec, kind: str) -> None:
    for back in _round_trips(codec, kind):
        for p in back.content:
            if type(p) is c.Reasoning:
                for name in reasoning_carry.TOKENS:
                    assert not reasoning_carry.is_packed(getattr(p, name)), (name, p)


def test_most_codecs_carry_tokens() -> None:
    """The skip above is for a protocol with no field at all, not a way out."""
    assert sum(_carries_tokens(codec) for codec in CODECS) >= len(CODECS) - 1
