"""Gemini's side endpoints: ``countTokens`` and the models listing."""

from __future__ import annotations

import msgspec

from . import paths

_enc = msgspec.json.Encoder()
_METHODS = ["generateContent", "streamGenerateContent", "countTokens"]


def encode_token_count(tokens: int) -> bytes:
    return _enc.encode({"totalTokens": tokens})


def lists_models(path: str, headers: list[tuple[bytes, bytes]], query: bytes) -> bool:
    """``GET /v1beta/models``, or ``/v1/models`` (OpenAI's path too) asked with a
    Google key."""
    if paths.is_models_path(path):
        return True
    return any(k == b"x-goog-api-key" for k, _ in headers) or b"key=" in query


def encode_model_list(names: list[str], query: bytes) -> bytes:
    models = [
        {"name": f"models/{n}", "displayName": n, "supportedGenerationMethods": _METHODS}
        for n in names
    ]
    return _enc.encode({"models": models})


def models_url(base_url: str) -> str:
    return paths.upstream_url(base_url, None)  # {version}/models


def model_ids(body: bytes) -> list[str]:
    data = msgspec.json.decode(body)
    return [
        m["name"].removeprefix("models/")
        for m in data.get("models", [])
        if isinstance(m.get("name"), str)
    ]
