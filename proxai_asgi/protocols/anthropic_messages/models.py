"""Anthropic's side endpoints: ``count_tokens`` and the models listing."""

from __future__ import annotations

from typing import Any

import msgspec

from ... import canonical as c
from ...errors import TranslationReport
from . import request

_enc = msgspec.json.Encoder()


def count_tokens_request(body: bytes) -> c.Request:
    """A ``count_tokens`` body is a Messages request without ``max_tokens``."""
    data = msgspec.json.decode(body)
    if isinstance(data, dict):
        data.setdefault("max_tokens", 1)
    return request.decode_request(_enc.encode(data), TranslationReport(lossy=True))


def encode_token_count(tokens: int) -> bytes:
    return _enc.encode({"input_tokens": tokens})


def lists_models(path: str, headers: list[tuple[bytes, bytes]], query: bytes) -> bool:
    """The ``Codec`` signature; only the headers tell an Anthropic client."""
    return any(k == b"anthropic-version" for k, _ in headers)


def encode_model_list(names: list[str], query: bytes) -> bytes:
    data: list[dict[str, Any]] = [
        {"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z"}
        for n in names
    ]
    return _enc.encode(
        {
            "data": data,
            "has_more": False,
            "first_id": names[0] if names else None,
            "last_id": names[-1] if names else None,
        }
    )


def models_url(base_url: str) -> str:
    return (base_url[:-3] if base_url.endswith("/v1") else base_url) + "/v1/models"


def model_ids(body: bytes) -> list[str]:
    data = msgspec.json.decode(body)
    return [m["id"] for m in data.get("data", []) if isinstance(m.get("id"), str)]
