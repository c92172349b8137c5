"""What the codecs share to name a request's session from its body (``Codec.session_hint``).

Cost matters: it runs on every request of a route with a key pool or a fallback. Each
codec decodes its body once into a Struct of ``msgspec.Raw`` fields (unknown fields
skipped; a Raw is a slice of the body, nothing decoded; the messages a list of them),
and only a body without an explicit session field pays for a second look at the few
values of its prefix.

The prefix is what a provider's prompt cache is keyed on, in its order — tool names,
system text, the messages up to the first user message — read as the raw JSON of each
text, so the cache breakpoints a client moves between turns (``cache_control``) and the
shape it wraps a text in (a string, or a list of text parts) do not change it. Values
from the client go only into a hash.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

import msgspec

from ...codec import SessionHint
from ...lazy_decoder import LazyDecoder

try:  # hashlib's own blake2b, without the OpenSSL start-up cost of importing hashlib
    from _blake2 import blake2b
except ImportError:  # pragma: no cover (a CPython built without it)
    from hashlib import blake2b

PREFIX = b"prefix"
_EMPTY = msgspec.Raw()
_T = TypeVar("_T")
USER = (b'"user"',)  # the raw JSON of the role that opens a conversation


class _Part(msgspec.Struct, gc=False):
    """A content part of any of the four protocols: its text (Anthropic, Chat,
    Responses, Gemini all name it ``text``) or, for another part, its kind."""

    text: msgspec.Raw = _EMPTY
    type: msgspec.Raw = _EMPTY


class _Message(msgspec.Struct, gc=False):
    """A message of any of the four protocols: its role and its content (Gemini:
    ``parts``)."""

    role: msgspec.Raw = _EMPTY
    content: msgspec.Raw = _EMPTY
    parts: msgspec.Raw = _EMPTY


class _Tool(msgspec.Struct, gc=False):
    """A tool as Anthropic and Responses declare one: a function's name, or the kind
    of a built-in tool."""

    name: msgspec.Raw = _EMPTY
    type: msgspec.Raw = _EMPTY


_parts: LazyDecoder[list[_Part]] = LazyDecoder(list[_Part])
_tools: LazyDecoder[list[_Tool]] = LazyDecoder(list[_Tool])
_message: LazyDecoder[_Message] = LazyDecoder(_Message)


def string(raw: msgspec.Raw) -> bytes | None:
    """The raw JSON of a non-empty string value, or None (absent, empty, not a string:
    a client's odd value names no session rather than failing the request)."""
    data = bytes(raw)
    return data if data[:1] == b'"' and data != b'""' else None


def explicit(source: bytes, raw: msgspec.Raw) -> SessionHint | None:
    value = string(raw)
    return None if value is None else SessionHint(source, value)


def one(decoder: LazyDecoder[_T], raw: msgspec.Raw) -> _T | None:
    """An object field read with ``decoder``; absent or of another shape: None."""
    if not raw:
        return None
    try:
        return decoder.decode(raw)
    except (msgspec.DecodeError, ValueError):
        return None


def items(decoder: LazyDecoder[list[_T]], raw: msgspec.Raw) -> list[_T]:
    """A list field read with ``decoder``; absent, null or of another shape: empty."""
    if not raw:
        return []
    try:
        return decoder.decode(raw)
    except (msgspec.DecodeError, ValueError):
        return []


def tool_names(tools: msgspec.Raw) -> list[bytes]:
    """The names of ``tools`` where each names itself (Anthropic, Responses)."""
    return [bytes(t.name or t.type) for t in items(_tools, tools)]


def content_texts(raw: msgspec.Raw) -> list[bytes]:
    """The texts of a message's content: a string, or a list of parts (a part without
    text counts by its kind). Anything else counts as its raw JSON."""
    data = bytes(raw)
    if data[:1] != b"[":
        return [data] if data else []
    try:
        parts = _parts.decode(data)
    except (msgspec.DecodeError, ValueError):  # ValueError: not a list of objects
        return [data]
    return [bytes(p.text) if p.text else bytes(p.type) for p in parts]


def opening(messages: list[msgspec.Raw], user: tuple[bytes, ...]) -> list[bytes] | None:
    """The role and texts of each message up to the first whose role (its raw JSON) is
    one of ``user``, or None when there is no such message: a conversation is known by
    how it starts, which its later turns only extend. The body's decoder left each
    message raw (a list of slices costs next to nothing over skipping the list); only
    the opening ones are read."""
    out: list[bytes] = []
    for raw in messages:
        try:
            m = _message.decode(raw)
        except (msgspec.DecodeError, ValueError):  # not an object: counts as it is
            out.append(bytes(raw))
            continue
        role = bytes(m.role)
        opens = role in user
        out.append(user[0] if opens else role)  # every spelling of the user's role alike
        out += content_texts(m.content or m.parts)
        if opens:
            return out
    return None


def prefix(parts: Iterable[bytes]) -> SessionHint:
    """The prefix's parts as one hint, each length-prefixed so that no two different
    sequences hash alike."""
    h = blake2b(digest_size=16)
    for part in parts:
        h.update(b"%d:" % len(part))
        h.update(part)
    return SessionHint(PREFIX, h.digest())
