"""Gemini: what names a request's session (``Codec.session_hint``).

Gemini's clients send no session id. A ``cachedContent`` names a cache that lives
under one key, so it is the session; else the prefix: tool names, system instruction
and the contents up to the first user content (a content without a role is the
user's). Google's JSON accepts the proto (snake_case) field names too.
"""

from __future__ import annotations

import msgspec

from ...codec import SessionHint
from ...lazy_decoder import LazyDecoder
from .._kit import session

_EMPTY = msgspec.Raw()
_USER = (*session.USER, b"")


class _Body(msgspec.Struct, gc=False):
    cachedContent: msgspec.Raw = _EMPTY
    cached_content: msgspec.Raw = _EMPTY
    systemInstruction: msgspec.Raw = _EMPTY
    system_instruction: msgspec.Raw = _EMPTY
    tools: msgspec.Raw = _EMPTY
    contents: list[msgspec.Raw] = []


class _Content(msgspec.Struct, gc=False):
    parts: msgspec.Raw = _EMPTY


class _Name(msgspec.Struct, gc=False):
    name: msgspec.Raw = _EMPTY


class _Tool(msgspec.Struct, gc=False):
    functionDeclarations: list[_Name] | None = None
    function_declarations: list[_Name] | None = None


_body: LazyDecoder[_Body] = LazyDecoder(_Body)
_content: LazyDecoder[_Content] = LazyDecoder(_Content)
_tools: LazyDecoder[list[_Tool]] = LazyDecoder(list[_Tool])


def _names(tools: msgspec.Raw) -> list[bytes]:
    out: list[bytes] = []
    for tool in session.items(_tools, tools):
        declared = tool.functionDeclarations or tool.function_declarations
        # A built-in tool (googleSearch, codeExecution) counts as one, unnamed.
        out += [bytes(d.name) for d in declared] if declared else [b"builtin"]
    return out


def session_hint(body: bytes) -> SessionHint | None:
    try:
        req = _body.decode(body)
    except (msgspec.DecodeError, ValueError):  # not JSON, or not an object
        return None
    hint = session.explicit(b"cachedContent", req.cachedContent or req.cached_content)
    if hint is not None:
        return hint
    opening = session.opening(req.contents, _USER)
    if opening is None:
        return None
    system = req.systemInstruction or req.system_instruction
    content = session.one(_content, system)
    texts = session.content_texts(content.parts if content is not None else system)
    return session.prefix([*_names(req.tools), b"system", *texts, b"contents", *opening])
