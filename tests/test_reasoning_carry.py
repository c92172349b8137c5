"""The carrier envelope: what a client codec packs, and what comes back from it."""

from __future__ import annotations

import pytest

from proxai_asgi import canonical as c
from proxai_asgi import reasoning_carry as carry

ALL_OWN = ("signature", "redacted", "encrypted_content", "thought_signature")


@pytest.mark.parametrize(
    "part",
    [
        c.Reasoning(text="thinking", signature="sig-1"),
        c.Reasoning(text="", signature="sig-over-nothing"),
        c.Reasoning(redacted="blob"),
        c.Reasoning(text="sum", summary=True, encrypted_content="enc", item_id="rs_1"),
        c.Reasoning(summary=True, thought_signature="c2ln"),
    ],
)
def test_every_kind_of_token_comes_back_from_its_carrier(part: c.Reasoning) -> None:
    packed = carry.pack_tokens(part, part.text)
    assert carry.is_packed(packed)
    back = carry.restore(packed, part.text, part.summary)
    assert back == part


def test_the_signed_text_wins_over_what_the_client_replayed() -> None:
    packed = carry.pack_tokens(c.Reasoning(text="raw thinking", signature="sig"), "raw thinking")
    back = carry.restore(packed, "a summary of it", True)
    assert back == c.Reasoning(text="raw thinking", summary=False, signature="sig")
    back = carry.restore(packed, "", True)  # the client dropped the text
    assert back is not None and back.text == "raw thinking"


def test_the_client_item_id_stays_unless_the_carrier_has_one() -> None:
    sig = carry.pack_tokens(c.Reasoning(signature="s"), "t")
    assert carry.restore(sig, "t", False, "rs_client") == c.Reasoning(
        text="t", signature="s", item_id="rs_client"
    )
    enc = carry.pack_tokens(c.Reasoning(encrypted_content="e", item_id="rs_up"))
    back = carry.restore(enc, "", True, "rs_client")
    assert back is not None and back.item_id == "rs_up"


def test_own_tokens_go_out_as_they_are_and_foreign_ones_packed() -> None:
    own = c.Reasoning(text="t", encrypted_content="enc", item_id="rs_1")
    assert carry.client_token(own, ("encrypted_content", "item_id"), "encrypted_content") == "enc"
    other = c.Reasoning(text="t", signature="sig")
    packed = carry.client_token(other, ("encrypted_content", "item_id"), "encrypted_content")
    assert carry.unpack(packed) == {"signature": "sig", "t": "t"}
    assert carry.client_token(c.Reasoning(text="t"), ("signature",), "signature") is None
    for name in ALL_OWN:
        part = c.Reasoning()
        setattr(part, name, "x")
        assert not carry.foreign(part, ALL_OWN)
        assert carry.foreign(part, ())


@pytest.mark.parametrize(
    ("legacy", "expected"),
    [
        (
            {"p": "anthropic", "signature": "sig", "t": "thinking"},
            c.Reasoning(text="thinking", signature="sig"),
        ),
        ({"p": "anthropic", "redacted": "blob"}, c.Reasoning(redacted="blob")),
        (
            {"p": "openai", "encrypted_content": "enc", "id": "rs_9"},
            c.Reasoning(text="x", encrypted_content="enc", item_id="rs_9"),
        ),
        ({"p": "gemini", "s": "c2ln"}, c.Reasoning(text="x", thought_signature="c2ln")),
        (  # a Gemini signature that had been packed inside an Anthropic-shaped carrier
            {"p": "anthropic", "signature": carry.pack({"p": "gemini", "s": "c2ln"}), "t": ""},
            c.Reasoning(text="x", thought_signature="c2ln"),
        ),
    ],
)
def test_carriers_packed_by_earlier_versions_still_come_back(
    legacy: dict[str, str], expected: c.Reasoning
) -> None:
    assert carry.restore(carry.pack(legacy), "x", False) == expected


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "EqQBCkYIBxgC-a-provider-token",
        carry.PREFIX + "not base64 !!",
        carry.pack({"p": "compaction", "summary": "what happened"}),
        carry.pack({"signature": 7}),
    ],
)
def test_what_is_not_a_carrier_of_tokens_restores_nothing(value: str | None) -> None:
    assert carry.restore(value, "t", True) is None
