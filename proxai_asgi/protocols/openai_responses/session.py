"""Responses: what names a request's session (``Codec.session_hint``).

Codex sends its conversation id as ``prompt_cache_key`` (and in headers, which the
family declares); other clients are known by their prefix: tool names, instructions
and the input up to the first user message. A string ``input`` is that message, so a
conversation that starts with one and continues with a list of items keeps its
session. (A ``previous_response_id`` continues where it was stored: routing's part.)
"""

from __future__ import annotations

import msgspec

from ...codec import SessionHint
from ...lazy_decoder import LazyDecoder
from .._kit import session

_EMPTY = msgspec.Raw()


class _Head(msgspec.Struct, gc=False):
    prompt_cache_key: msgspec.Raw = _EMPTY
    instructions: msgspec.Raw = _EMPTY
    tools: msgspec.Raw = _EMPTY


class _Body(_Head, gc=False):
    input: list[msgspec.Raw] = []


class _TextBody(_Head, gc=False):
    """A body whose ``input`` is not a list (a string: the first user message)."""

    input: msgspec.Raw = _EMPTY


_body: LazyDecoder[_Body] = LazyDecoder(_Body)
_text_body: LazyDecoder[_TextBody] = LazyDecoder(_TextBody)


def session_hint(body: bytes) -> SessionHint | None:
    req: _Head
    try:
        req = _body.decode(body)
    except (msgspec.DecodeError, ValueError):  # a string input, or not a body at all
        try:
            req = _text_body.decode(body)
        except (msgspec.DecodeError, ValueError):
            return None
    hint = session.explicit(b"prompt_cache_key", req.prompt_cache_key)
    if hint is not None:
        return hint
    opening = None
    if isinstance(req, _Body):
        opening = session.opening(req.input, session.USER)
    elif isinstance(req, _TextBody) and (first := session.string(req.input)):
        opening = [session.USER[0], first]
    if opening is None:
        return None
    tools = session.tool_names(req.tools)
    instructions = session.content_texts(req.instructions)
    return session.prefix([*tools, b"instructions", *instructions, b"input", *opening])
