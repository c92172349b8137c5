"""Anthropic Messages: what names a request's session (``Codec.session_hint``).

Claude Code sends its session id in a header (``HEADERS``) and in ``metadata.user_id``;
other clients are known by their prefix: tool names, system text and the first user
message (the order of Anthropic's prompt cache).
"""

from __future__ import annotations

import msgspec

from ...codec import SessionHint
from ...lazy_decoder import LazyDecoder
from .._kit import session

HEADERS = (b"x-claude-code-session-id",)
_EMPTY = msgspec.Raw()


class _Body(msgspec.Struct, gc=False):
    metadata: msgspec.Raw = _EMPTY
    system: msgspec.Raw = _EMPTY
    tools: msgspec.Raw = _EMPTY
    messages: list[msgspec.Raw] = []


class _Metadata(msgspec.Struct, gc=False):
    user_id: msgspec.Raw = _EMPTY


_body: LazyDecoder[_Body] = LazyDecoder(_Body)
_metadata: LazyDecoder[_Metadata] = LazyDecoder(_Metadata)


def session_hint(body: bytes) -> SessionHint | None:
    try:
        req = _body.decode(body)
    except (msgspec.DecodeError, ValueError):  # not JSON, or not an object
        return None
    meta = session.one(_metadata, req.metadata)
    if meta is not None and (hint := session.explicit(b"metadata.user_id", meta.user_id)):
        return hint
    opening = session.opening(req.messages, session.USER)
    if opening is None:
        return None
    parts = session.tool_names(req.tools)
    parts.append(b"system")
    parts += session.content_texts(req.system)
    return session.prefix([*parts, b"messages", *opening])
