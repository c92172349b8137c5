"""What OpenAI's two protocols (Chat Completions and Responses) share as members of
one provider family: header names, the models listing, the telemetry system."""

from __future__ import annotations

from typing import Any

import msgspec

from ... import canonical as c

SYSTEM = "openai"
HEADER_FAMILY = (b"openai-", b"x-stainless-")
_enc = msgspec.json.Encoder()


def encode_model_list(names: list[str], query: bytes) -> bytes:
    listing: dict[str, Any] = {
        "object": "list",
        "data": [{"id": n, "object": "model", "created": 0, "owned_by": "proxai"} for n in names],
    }
    # Codex's model manager asks with ?client_version=... and reads {"models": [...]}.
    if b"client_version=" in query:
        listing["models"] = [{"slug": n, "display_name": n} for n in names]
    return _enc.encode(listing)


def models_url(base_url: str) -> str:
    return base_url + "/models"


def model_ids(body: bytes) -> list[str]:
    data = msgspec.json.decode(body)
    return [m["id"] for m in data.get("data", []) if isinstance(m.get("id"), str)]


class OpenAIFamily:
    """What a codec of the family declares alike: identity and side endpoints (no
    token-count endpoint: OpenAI has none)."""

    system: str = SYSTEM
    operation: str = "chat"
    header_family: tuple[bytes, ...] = HEADER_FAMILY
    auth_header: bytes = b"authorization"
    credential_headers: tuple[bytes, ...] = (b"api-key",)  # Azure OpenAI's
    listing_paths: tuple[str, ...] = ("/v1/models", "/models")
    required_headers: tuple[tuple[bytes, bytes], ...] = ()
    # Codex names its session in both spellings, over either protocol.
    session_headers: tuple[bytes, ...] = (b"session-id", b"session_id")

    def count_tokens_request(self, body: bytes) -> c.Request:
        raise NotImplementedError("OpenAI protocols serve no token count")

    def encode_token_count(self, tokens: int) -> bytes:
        raise NotImplementedError("OpenAI protocols serve no token count")

    def lists_models(self, path: str, headers: list[tuple[bytes, bytes]], query: bytes) -> bool:
        return True  # the shape every OpenAI-compatible client reads

    encode_model_list = staticmethod(encode_model_list)
    models_url = staticmethod(models_url)
    model_ids = staticmethod(model_ids)
