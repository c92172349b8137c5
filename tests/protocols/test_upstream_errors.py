"""``protocols._kit.upstream_errors``: every codec reads a loose upstream error body
(not its own protocol's shape) the same way."""

from __future__ import annotations

import pytest

from proxai_asgi.codec import ProtocolName
from proxai_asgi.protocols import get_codec

PROTOCOLS: list[ProtocolName] = [
    "anthropic_messages",
    "openai_chat_completions",
    "openai_responses",
    "gemini_generate_content",
]

LOOSE = [
    (400, b'{"error": {"message": "bad", "type": "invalid_request_error", "param": "x"}}'),
    (402, b'{"type": "error", "error": {"type": "billing_error", "message": "pay"}}'),
    (500, b'{"error": {"message": "busy", "type": "overloaded_error"}}'),
    (429, b'{"error": {"message": "slow down", "code": "rate_limit_exceeded"}}'),
    (400, b'{"object": "error", "message": "vllm says no", "type": "BadRequestError"}'),
    (500, b'{"error": {"message": {"nested": true}}}'),
    (500, b'{"error": "plain string"}'),
    (422, b'{"detail": [{"loc": ["body"], "msg": "x"}]}'),
    (503, b"<html><body><h1>Service Unavailable</h1></body></html>"),
    (502, b""),
]


@pytest.mark.parametrize(("status", "body"), LOOSE)
def test_every_codec_reads_a_loose_error_body_the_same_way(status: int, body: bytes) -> None:
    """Anthropic's reader and OpenAI's once differed (a flat body's type, a nested
    message, a code, a param); Gemini's fell back to Anthropic's."""
    read = [get_codec(p).decode_error(status, body) for p in PROTOCOLS]
    seen = {(e.status, e.kind, e.message, e.param, e.code) for e in read}
    assert len(seen) == 1, seen


def test_the_anthropic_vocabulary_keeps_its_kinds() -> None:
    codec = get_codec("anthropic_messages")
    body = b'{"type": "error", "error": {"type": "billing_error", "message": "pay"}}'
    assert codec.decode_error(402, body).kind == "permission"
    body = b'{"error": {"message": "busy", "type": "overloaded_error"}}'
    assert codec.decode_error(500, body).kind == "overloaded"
