"""The oracle for ``checks.check_request``: its walk as it was before decoders could
vouch for a request (``TranslationReport.settled``), every message and part looked at.
Kept here, not imported from the package, so that a change to the package's walk is
compared against this one and cannot change both sides at once."""

from __future__ import annotations

import re

from proxai_asgi import canonical as c
from proxai_asgi.errors import ProxyError

_BASE64 = re.compile(r"[A-Za-z0-9+/\-_= \t\r\n]*")
_DATA_URL = re.compile(r"(?P<head>[dD][aA][tT][aA]:[^,]*)(?P<comma>,)?(?P<data>.*)", re.DOTALL)


def full_check(request: c.Request, *, lossy: bool = False) -> None:
    """tool_choice first; then, in conversation order, a tool result answering no call
    anywhere in the conversation (unless ``lossy``) or media data that is not base64."""
    choice = request.tool_choice
    declared = {t.name for t in request.tools}
    if choice is not None and choice.mode == "tool" and choice.name not in declared:
        raise ProxyError.invalid(
            f"tool_choice names the tool {choice.name!r}, which is not in tools",
            param="tool_choice",
        )
    calls = {p.id for m in request.messages for p in m.content if isinstance(p, c.ToolCall)}
    for m in request.messages:
        for p in m.content:
            if isinstance(p, c.ToolResult):
                if not lossy and p.call_id not in calls:
                    raise ProxyError.invalid(
                        f"tool result for call id {p.call_id!r} answers no tool call in the "
                        "conversation (each tool result must follow the tool call it answers)"
                    )
                for q in p.content:
                    if isinstance(q, (c.Image, c.File)):
                        _media(q)
            elif isinstance(p, (c.Image, c.File)):
                _media(p)


def _media(p: c.Image | c.File) -> None:
    """Data must be base64 (any of its alphabets, padding, MIME whitespace); so must a
    data URL's, which must say ``;base64`` before its first comma."""
    what = "image" if isinstance(p, c.Image) else "document"
    if p.data is not None and not _BASE64.fullmatch(p.data):
        raise ProxyError.invalid(f"{what} data is not valid base64")
    url = _DATA_URL.fullmatch(p.url or "")
    if url is None:
        return
    if url["comma"] is None or not url["head"].endswith(";base64"):
        raise ProxyError.invalid(
            f"{what} data URL is malformed; expected data:<media type>;base64,<data>"
        )
    if not _BASE64.fullmatch(url["data"]):
        raise ProxyError.invalid(f"{what} data URL is not valid base64")
