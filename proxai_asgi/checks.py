"""Checks on a decoded request that every protocol's API makes, run on the canonical
request before a translated request goes upstream.

All three APIs reject a tool result that answers no tool call and image or document
data that is not base64. A codec decoding one message at a time cannot see the first;
the second would otherwise reach the upstream re-encoded (a data URL, a base64 source)
and come back as the upstream's error in the upstream's words, or be accepted by a
lenient server. Pass-through requests are not checked: their bytes are the upstream's
to judge.
"""

from __future__ import annotations

import itertools
from collections.abc import Container

from . import canonical as c
from .errors import ProxyError

# Far deeper than any real request (tool schemas nest a dozen levels), far below the
# interpreter's recursion limit that the JSON decoders run into.
DEFAULT_MAX_JSON_DEPTH = 256
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1

# The part types ``check_request`` tells apart (one unpacking per request, not five
# attribute look-ups).
_PART_TYPES = (c.ToolCall, c.ToolResult, c.Image, c.File, c.Text)

# The base64 alphabet (standard and URL-safe), padding, and the whitespace MIME
# encoders insert: lenient on form, strict on content.
_BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_= \t\r\n"


def check_request(request: c.Request, *, lossy: bool = False, settled: bool = False) -> None:
    """Raise a 400 ``ProxyError`` for what no target API accepts: a ``tool_choice``
    naming a tool that is not in ``tools``, a tool result answering no call, media data
    that is not base64.

    ``lossy``: the client may refer to state this stateless proxy dropped
    (``previous_response_id``, item references), so unmatched tool results are left
    to the upstream.

    ``settled``: the decoder that made ``request`` vouched, in the walk it made anyway,
    that the messages hold no image or document and that every tool result answers a
    call among them (``TranslationReport.settled``): the walk below would find nothing,
    so only ``tool_choice`` is checked.

    The first error in conversation order is the one raised. A tool result may answer
    a call anywhere in the conversation, so results are judged once every call is
    known: one pass collects calls and results (the usual request has no media), and
    only a request with an image or document at message level takes a second pass in
    order. Parts are told apart by ``type(p) is``: ``isinstance`` against a msgspec
    Struct class that does not match costs ~70 ns (its metaclass takes CPython's
    slow path), a type identity test ~15 ns.
    """
    choice = request.tool_choice
    if (
        choice is not None
        and choice.mode == "tool"
        and choice.name not in {t.name for t in request.tools}
    ):
        raise ProxyError.invalid(
            f"tool_choice names the tool {choice.name!r}, which is not in tools",
            param="tool_choice",
        )
    if settled:
        return
    calls: set[str] = set()
    results: list[c.ToolResult] = []
    media = False
    call, result, image, file, text = _PART_TYPES
    add, append = calls.add, results.append
    for m in request.messages:
        for p in m.content:
            if type(p) is text:  # (most parts, and none to check)
                continue
            if type(p) is call:
                add(p.id)
            elif type(p) is result:
                append(p)
            elif type(p) is image or type(p) is file:
                media = True
    if not media:
        for p in results:  # _check_result inline: it runs once per result of the history
            if not lossy and p.call_id not in calls:
                _unanswered(p)
            for q in p.content:
                if type(q) is not text and (type(q) is image or type(q) is file):
                    _check_media(q)
        return
    for m in request.messages:
        for p in m.content:
            if type(p) is c.ToolResult:
                _check_result(p, calls, lossy)
            elif type(p) is c.Image or type(p) is c.File:
                _check_media(p)


def settles(parts: list[c.Part], asked: Container[str] = ()) -> bool:
    """Whether ``check_request``'s walk would find nothing in ``parts``: no image or
    document, and tool results that answer one of ``asked`` (ids of calls the decoder
    knows are in the conversation) and hold no media. Decoders vouch with it for what
    their general paths built; their usual turns are settled by construction."""
    call, result, image, file, text = _PART_TYPES
    for p in parts:
        if type(p) is text or type(p) is call:
            continue
        if type(p) is image or type(p) is file:
            return False
        if type(p) is result:
            if p.call_id not in asked:
                return False
            for q in p.content:
                if type(q) is image or type(q) is file:
                    return False
    return True


def settle(messages: list[c.Message], asked: Container[str] = ()) -> bool:
    """``settles`` for each of ``messages`` (the turns one wire message became)."""
    for m in messages:  # noqa: SIM110 (a loop: no generator made per turn)
        if not settles(m.content, asked):
            return False
    return True


def _unanswered(p: c.ToolResult) -> None:
    raise ProxyError.invalid(
        f"tool result for call id {p.call_id!r} answers no tool call in the "
        "conversation (each tool result must follow the tool call it answers)"
    )


def _check_result(p: c.ToolResult, calls: set[str], lossy: bool) -> None:
    if not lossy and p.call_id not in calls:
        _unanswered(p)
    for q in p.content:
        if type(q) is c.Image or type(q) is c.File:
            _check_media(q)


def _check_media(p: c.Image | c.File) -> None:
    kind = "image" if type(p) is c.Image else "document"
    if p.data is not None and not _is_base64(p.data):
        raise ProxyError.invalid(f"{kind} data is not valid base64")
    if p.url is not None and p.url[:5].lower() == "data:":
        head, sep, data = p.url.partition(",")
        if not sep or not head.endswith(";base64"):
            raise ProxyError.invalid(
                f"{kind} data URL is malformed; expected data:<media type>;base64,<data>"
            )
        if not _is_base64(data):
            raise ProxyError.invalid(f"{kind} data URL is not valid base64")


def _is_base64(data: str) -> bool:
    try:
        raw = data.encode("ascii")
    except UnicodeEncodeError:
        return False
    return not raw.translate(None, _BASE64)


def json_too_deep(body: bytes, limit: int) -> bool:
    """Whether the JSON ``body`` nests arrays and objects more than ``limit`` deep.

    A few C-speed passes, no decoding: bodies with at most ``limit`` brackets are
    answered by counting; otherwise string contents are cut out (escaped backslashes
    and quotes first, then every other quote-delimited segment) and the depth is the
    highest running sum over the brackets left. Invalid JSON may be misjudged; its
    decoder rejects it anyway.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    if b'"' in body:
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")
        body = b"".join(body.split(b'"')[::2])
    brackets = body.translate(None, _NOT_BRACKETS)
    return (
        len(brackets) > limit
        and max(itertools.accumulate(map(_STEP.__getitem__, brackets))) > limit
    )
