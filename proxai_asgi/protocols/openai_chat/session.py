"""Chat Completions: what names a request's session (``Codec.session_hint``).

``prompt_cache_key`` (OpenAI's own cache routing key) when the client sends one, else
the prefix: tool names and the messages up to the first user message (system and
developer messages included).
"""

from __future__ import annotations

import msgspec

from ...codec import SessionHint
from ...lazy_decoder import LazyDecoder
from .._kit import session

_EMPTY = msgspec.Raw()


class _Body(msgspec.Struct, gc=False):
    prompt_cache_key: msgspec.Raw = _EMPTY
    tools: msgspec.Raw = _EMPTY
    messages: list[msgspec.Raw] = []


class _Name(msgspec.Struct, gc=False):
    name: msgspec.Raw = _EMPTY


class _Tool(msgspec.Struct, gc=False):
    type: msgspec.Raw = _EMPTY
    function: _Name | None = None
    custom: _Name | None = None


_body: LazyDecoder[_Body] = LazyDecoder(_Body)
_tools: LazyDecoder[list[_Tool]] = LazyDecoder(list[_Tool])


def _name(tool: _Tool) -> bytes:
    named = tool.function or tool.custom
    return bytes(named.name if named is not None and named.name else tool.type)


def session_hint(body: bytes) -> SessionHint | None:
    try:
        req = _body.decode(body)
    except (msgspec.DecodeError, ValueError):  # not JSON, or not an object
        return None
    hint = session.explicit(b"prompt_cache_key", req.prompt_cache_key)
    if hint is not None:
        return hint
    opening = session.opening(req.messages, session.USER)
    if opening is None:
        return None
    tools = [_name(t) for t in session.items(_tools, req.tools)]
    return session.prefix([*tools, b"messages", *opening])
