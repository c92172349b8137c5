"""Where Gemini puts the model and the stream flag: in the URL.

Client paths: ``/{version}/models/{model}:{method}`` with version ``v1beta`` or ``v1``
(the SDKs' two), method ``generateContent``, ``streamGenerateContent`` (``?alt=sse``;
the query is the client's business, the answer is always SSE) or ``countTokens``.
Upstream URLs: the ``base_url`` as the google-genai SDK takes it (without a version:
``https://generativelanguage.googleapis.com``; one ending in ``/v1beta`` or ``/v1`` is
used as it is) plus the same shape, ``?alt=sse`` for a stream.
"""

from __future__ import annotations

import re

from ...codec import PathCall

VERSIONS = ("v1beta", "v1")
DEFAULT_VERSION = "v1beta"
_METHODS = {
    "generateContent": (False, "generate"),
    "streamGenerateContent": (True, "generate"),
    "countTokens": (False, "count_tokens"),
}
_METHOD_OF = {(False, "generate"): "generateContent", (True, "generate"): "streamGenerateContent"}
# What a model name may hold: it is put into the upstream URL, so a client must not be
# able to add a path, a query or a fragment there (ASGI paths arrive percent-decoded).
_MODEL = re.compile(r"[A-Za-z0-9._:@-]+")


def path_call(path: str) -> PathCall | None:
    version, sep, rest = path.lstrip("/").partition("/models/")
    if not sep or version not in VERSIONS:
        return None
    model, colon, method = rest.rpartition(":")
    found = _METHODS.get(method)
    if not colon or found is None or not _MODEL.fullmatch(model):
        return None
    stream, action = found
    return PathCall(model=model, stream=stream, action=action)  # type: ignore[arg-type]


def is_models_path(path: str) -> bool:
    """``GET /v1beta/models`` (Google's listing; ``/v1/models`` is OpenAI's too and is
    answered in Google's shape only when the client sends a Google key)."""
    return path.rstrip("/") in ("/v1beta/models",)


def versioned(base_url: str) -> str:
    if base_url.rstrip("/").rsplit("/", 1)[-1] in VERSIONS:
        return base_url.rstrip("/")
    return base_url.rstrip("/") + "/" + DEFAULT_VERSION


def upstream_url(base_url: str, call: PathCall | None) -> str:
    if call is None:
        return versioned(base_url) + "/models"
    if call.action == "count_tokens":
        return f"{versioned(base_url)}/models/{call.model}:countTokens"
    method = _METHOD_OF[(call.stream, "generate")]
    return f"{versioned(base_url)}/models/{call.model}:{method}" + (
        "?alt=sse" if call.stream else ""
    )
