"""Client values on their way into a URL, a header or a log line: validated or escaped
first, so that a request can never add a path, a query, a header or a log line.

The model of a path-addressed protocol (Gemini: ``/v1beta/models/{model}:...``) is one
URL path segment from Google's model-id alphabet; header values hold no CR, LF or NUL;
text for logs and our own headers has its non-printable characters escaped.
"""

from __future__ import annotations

import re

from .errors import ProxyError

# Google's model ids (gemini-2.5-flash, gemma-3-27b-it, learnlm-2.0-flash-experimental)
# and what Gemini-compatible servers name models: letters, digits, ".", "_", "-", and
# the path characters ":" and "@" (Google reads the method after the last ":", as
# ``paths.path_call`` does). No "/" (another segment), "?" or "#" (a query, a
# fragment), "%" (an encoded one), whitespace or controls; "." and ".." are dot segments.
_SEGMENT = re.compile(r"[A-Za-z0-9._:@-]{1,256}")
# C0 controls, DEL: never in a model (they forge log lines, break headers and URLs).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# In a header value: C0 controls other than tab, and DEL (CR and LF would end the line).
_UNSENDABLE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


def is_path_segment(model: str) -> bool:
    """``model`` can be put into a URL path as one segment, as it is."""
    return _SEGMENT.fullmatch(model) is not None and model not in (".", "..")


def check_model_segment(model: str) -> None:
    """A 400 naming ``model`` unless it is one path segment."""
    if not is_path_segment(model):
        raise ProxyError.invalid(
            f"model: {loggable(model)!r} is not a valid model name here (letters, digits, "
            "'.', '_', '-', ':' and '@' only)",
            param="model",
        )


def check_model(model: str) -> None:
    """A 400 naming ``model`` when it holds control characters (any upstream)."""
    if _CONTROL.search(model):
        raise ProxyError.invalid(
            "model: control characters are not allowed in a model name", param="model"
        )


def check_header_values(headers: list[tuple[bytes, bytes]]) -> None:
    """A 400 when a header value holds a control character: CR or LF, sent, would add
    headers of the client's choice to our request; HTTP libraries refuse the others."""
    if not _UNSENDABLE.search(b" ".join([v for _, v in headers])):
        return  # one search on every request; the loop only to name the header
    for name, value in headers:
        if _UNSENDABLE.search(value):
            raise ProxyError.invalid(
                f"the value of header {loggable(name.decode('latin-1'))!r} holds a control "
                "character"
            )


def check_query_key(key: bytes) -> None:
    """A 400 naming ``key`` for a ``?key=`` credential that cannot be a header value
    (control characters once percent-decoded, surrounding whitespace)."""
    if _UNSENDABLE.search(key) or key != key.strip(b" \t"):
        raise ProxyError.invalid(
            "key: the API key holds control characters or surrounding whitespace",
            param="key",
        )


def loggable(text: str) -> str:
    """``text`` with its non-printable characters escaped (newlines, CR, NUL, the
    Unicode line separators): fit for a log line, a span attribute, a header."""
    if text.isprintable():
        return text
    return text.encode("unicode_escape").decode("ascii")
