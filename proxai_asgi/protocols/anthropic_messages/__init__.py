"""Anthropic Messages (``POST /v1/messages``) codec.

Client side: Claude Code and the Anthropic SDKs. Upstream side: api.anthropic.com and
Anthropic-compatible servers. ``CODEC`` declares which module does each part of
``proxai_asgi.codec.Codec``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from ...codec import (
    Action,
    BodyAddressed,
    Codec,
    ProtocolName,
    UpstreamOptions,
    nothing_to_resume,
    usage_always_reported,
)
from ...stream_tail import TAIL_BYTES
from .._kit import ratelimit
from . import epilogue, errors, models, relayed, request, response, session
from .stream import AnthropicStreamDecoder, AnthropicStreamEncoder

ANTHROPIC_VERSION = b"2023-06-01"


class AnthropicMessagesCodec(BodyAddressed):
    name: ProtocolName = "anthropic_messages"
    paths: Mapping[str, Action] = {
        "/v1/messages": "generate",
        "/messages": "generate",
        "/v1/messages/count_tokens": "count_tokens",
        "/messages/count_tokens": "count_tokens",
    }
    upstream_path: str = "/v1/messages"
    system: str = "anthropic"
    operation: str = "chat"
    header_family: tuple[bytes, ...] = (b"anthropic-",)
    auth_header: bytes = b"x-api-key"
    credential_headers: tuple[bytes, ...] = (b"x-api-key",)
    listing_paths: tuple[str, ...] = ("/v1/models",)
    required_headers: tuple[tuple[bytes, bytes], ...] = ((b"anthropic-version", ANTHROPIC_VERSION),)
    wraps_custom_tools: bool = False
    serves_websocket: bool = False
    stateful: bool = False
    usage_tail_bytes: int = TAIL_BYTES
    search_results_last: bool = False
    session_headers: tuple[bytes, ...] = session.HEADERS
    session_hint = staticmethod(session.session_hint)
    # Anthropic continues a final assistant turn (some newest models reject it:
    # ``UpstreamOptions.continuation = "restart"`` for those).
    continues: Literal["prefill", "restart"] = "prefill"

    def takes_custom_tools(self, options: UpstreamOptions) -> bool:
        return False

    def hosts_web_search(self, options: UpstreamOptions) -> bool:
        # Anthropic's ``web_search_*`` server tool, unless the operator has the proxy search
        return not options.proxy_search

    # ---- client side
    decode_request = staticmethod(request.decode_request)
    encode_response = staticmethod(response.encode_response)
    stream_encoder = AnthropicStreamEncoder
    encode_error = staticmethod(errors.encode_error)

    # ---- upstream side
    encode_request = staticmethod(request.encode_request)
    decode_response = staticmethod(response.decode_response)
    stream_decoder = AnthropicStreamDecoder
    decode_error = staticmethod(errors.decode_error)
    rate_limit_headers = staticmethod(ratelimit.for_anthropic_client)
    failure_hint = staticmethod(errors.failure_hint)
    stream_failure_hint = staticmethod(errors.stream_failure_hint)
    rate_limit_wait = staticmethod(errors.rate_limit_wait)

    # ---- side endpoints
    count_tokens_request = staticmethod(models.count_tokens_request)
    encode_token_count = staticmethod(models.encode_token_count)
    lists_models = staticmethod(models.lists_models)
    encode_model_list = staticmethod(models.encode_model_list)
    models_url = staticmethod(models.models_url)
    model_ids = staticmethod(models.model_ids)

    # ---- pass-through
    stream_complete = staticmethod(epilogue.stream_complete)
    resume = staticmethod(nothing_to_resume)
    stream_epilogue = staticmethod(epilogue.stream_epilogue)
    relayed_usage = staticmethod(relayed.relayed_usage)
    relayed_stream_usage = staticmethod(relayed.relayed_stream_usage)
    ask_usage = staticmethod(usage_always_reported)


CODEC: Codec = AnthropicMessagesCodec()

__all__ = ["CODEC", "AnthropicMessagesCodec"]
