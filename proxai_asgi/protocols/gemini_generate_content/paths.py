"""Where Gemini puts the model and the stream flag: in the URL.

Client paths: ``/{version}/models/{model}:{method}`` with version ``v1beta`` or ``v1``
(the SDKs' two), method ``generateContent``, ``streamGenerateContent`` (``?alt=sse``;
the query is the client's business, the answer is always SSE) or ``countTokens``.
Upstream URLs: the ``base_url`` as the google-genai SDK takes it (without a version:
``https://generativelanguage.googleapis.com``; one ending in ``/v1beta`` or ``/v1`` is
used as it is) plus the same shape, ``?alt=sse`` for a stream.
"""

from __future__ import annotations

from ...client_values import check_model_segment
from ...codec import PathCall, Served

VERSIONS = ("v1beta", "v1")
DEFAULT_VERSION = "v1beta"
_METHODS = {
    "generateContent": (False, "generate"),
    "streamGenerateContent": (True, "generate"),
    "countTokens": (False, "count_tokens"),
}
_METHOD_OF = {(False, "generate"): "generateContent", (True, "generate"): "streamGenerateContent"}


def path_call(path: str) -> PathCall | None:
    """The call a Gemini path names. Its model is the client's, as the path has it
    (ASGI paths arrive percent-decoded): checked by the exchange, which answers an
    unsafe one with a 400 (``client_values.check_model_segment``)."""
    version, sep, rest = path.lstrip("/").partition("/models/")
    if not sep or version not in VERSIONS:
        return None
    model, colon, method = rest.rpartition(":")
    found = _METHODS.get(method)
    if not colon or found is None or not model:
        return None
    stream, action = found
    return PathCall(model=model, stream=stream, action=action)  # type: ignore[arg-type]


def serves(path: str) -> Served | None:
    """The method a client path names, with the call its URL names."""
    call = path_call(path)
    return None if call is None else Served(call.action, call)


def is_models_path(path: str) -> bool:
    """``GET /v1beta/models`` (Google's listing; ``/v1/models`` is OpenAI's too and is
    answered in Google's shape only when the client sends a Google key)."""
    return path.rstrip("/") in ("/v1beta/models",)


def versioned(base_url: str) -> str:
    if base_url.rstrip("/").rsplit("/", 1)[-1] in VERSIONS:
        return base_url.rstrip("/")
    return base_url.rstrip("/") + "/" + DEFAULT_VERSION


def upstream_url(base_url: str, call: PathCall | None = None) -> str:
    """The URL (or, with ``base_url=""``, the path) of a call; a model that is not one
    path segment is a 400, whoever named it (a client's path or body, a route)."""
    if call is None:
        return versioned(base_url) + "/models"
    check_model_segment(call.model)
    if call.action == "count_tokens":
        return f"{versioned(base_url)}/models/{call.model}:countTokens"
    method = _METHOD_OF[(call.stream, "generate")]
    return f"{versioned(base_url)}/models/{call.model}:{method}" + (
        "?alt=sse" if call.stream else ""
    )


def inner_path(call: PathCall | None = None) -> str:
    """The path an in-process upstream is called on: the URL without a base."""
    return upstream_url("", call)
