"""Protocol-neutral errors. Each codec renders a ``ProxyError`` in its own wire shape."""

from __future__ import annotations

import re
from typing import Literal

import msgspec

ErrorKind = Literal[
    "invalid_request",
    "authentication",
    "permission",
    "not_found",
    "request_too_large",
    "rate_limit",
    "api_error",
    "overloaded",
    "timeout",
    "bad_gateway",
    "not_implemented",
]

# The kind a bare HTTP status implies, when the upstream body says nothing better.
_KIND_BY_STATUS: dict[int, ErrorKind] = {
    400: "invalid_request",
    401: "authentication",
    403: "permission",
    404: "not_found",
    413: "request_too_large",
    422: "invalid_request",
    429: "rate_limit",
    500: "api_error",
    501: "not_implemented",
    502: "bad_gateway",
    503: "overloaded",
    504: "timeout",
    529: "overloaded",
}


def kind_for_status(status: int) -> ErrorKind:
    if status in _KIND_BY_STATUS:
        return _KIND_BY_STATUS[status]
    return "invalid_request" if 400 <= status < 500 else "api_error"


_SCRIPT = re.compile(rb"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(rb"<[^>]*>")
_SPACE = re.compile(r"\s+")


def text_error_message(status: int, body: bytes) -> str:
    """The message for an error body that is not JSON (a proxy's HTML page, plain
    text, nothing): the status and the first words of its text, without markup,
    scripts or styles."""
    text = _TAG.sub(b" ", _SCRIPT.sub(b" ", body[: 64 * 1024])).decode("utf-8", "replace")
    excerpt = _SPACE.sub(" ", text).strip()[:300].strip()
    return (
        f"upstream returned HTTP {status}: {excerpt}"
        if excerpt
        else f"upstream returned HTTP {status}"
    )


class ProxyError(Exception):
    """An error to show the client: HTTP status, neutral kind, message, and for the
    OpenAI shape the optional ``param`` and ``code``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: ErrorKind | None = None,
        param: str | None = None,
        code: str | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind: ErrorKind = kind or kind_for_status(status)
        self.param = param
        self.code = code
        # Upstream headers worth keeping on an error (retry-after, request ids).
        self.headers = headers or []

    @classmethod
    def invalid(cls, message: str, param: str | None = None) -> ProxyError:
        """The client's request is not one its provider would take (400)."""
        return cls(400, message, kind="invalid_request", param=param)

    @classmethod
    def bad_gateway(cls, message: str) -> ProxyError:
        """The upstream answered something its protocol cannot contain (502)."""
        return cls(502, message, kind="bad_gateway")

    def __repr__(self) -> str:
        return f"ProxyError({self.status}, {self.kind}, {self.message!r})"


class ResponseAborted(Exception):
    """The response to the client started and cannot be completed (its upstream body
    was cut short): raised out of the middleware so the server drops the connection,
    which is the only way left to tell the client its body is incomplete."""


class TranslationReport(msgspec.Struct, gc=False):
    """Collects what a translation dropped; rejects what must not be dropped silently.

    ``reject`` raises a 400 naming the field unless the upstream opted into lossy
    translation, in which case the field is dropped and reported like any other.
    (A Struct: one is made for every request, in half the time of a class's
    ``__init__``; ``dropped`` holds strings only, so the cycle collector can skip it.)
    """

    lossy: bool = False
    dropped: list[str] = msgspec.field(default_factory=list)
    # Set by a client decoder whose message walk saw no media and paired every tool
    # result with a call: ``checks.check_request`` need not walk the messages again.
    settled: bool = False

    def drop(self, field: str) -> None:
        if field not in self.dropped:
            self.dropped.append(field)

    def reject(self, field: str, why: str) -> None:
        if self.lossy:
            self.drop(field)
            return
        raise ProxyError.invalid(f"{field}: {why}", param=field)
