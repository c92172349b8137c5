"""Anthropic Messages (``POST /v1/messages``) codec.

Client side: Claude Code and the Anthropic SDKs. Upstream side: api.anthropic.com and
Anthropic-compatible servers. ``CODEC`` satisfies ``proxai_asgi.codec.Codec``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ... import canonical as c
from ...codec import Action, BodyAddressed, Codec, ProtocolName, UpstreamOptions
from ...errors import ProxyError, TranslationReport
from ...stream_tail import StreamTail
from .._kit import ratelimit
from . import epilogue as _epilogue
from . import errors, models, request, response, stream

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
    header_family: tuple[bytes, ...] = (b"anthropic-",)
    auth_header: bytes = b"x-api-key"
    credential_headers: tuple[bytes, ...] = (b"x-api-key",)
    listing_paths: tuple[str, ...] = ("/v1/models",)
    required_headers: tuple[tuple[bytes, bytes], ...] = ((b"anthropic-version", ANTHROPIC_VERSION),)
    wraps_custom_tools: bool = False
    serves_websocket: bool = False
    stateful: bool = False

    def takes_custom_tools(self, options: UpstreamOptions) -> bool:
        return False

    # ---- client side

    def decode_request(self, body: bytes, report: TranslationReport) -> c.Request:
        return request.decode_request(body, report)

    def encode_response(self, response_: c.Response, request_: c.Request) -> bytes:
        return response.encode_response(response_, request_)

    def stream_encoder(self, request_: c.Request) -> stream.AnthropicStreamEncoder:
        return stream.AnthropicStreamEncoder(request_)

    def encode_error(self, error: ProxyError) -> bytes:
        return errors.encode_error(error)

    # ---- upstream side

    def encode_request(
        self, request_: c.Request, report: TranslationReport, options: UpstreamOptions
    ) -> bytes:
        return request.encode_request(request_, report, options)

    def decode_response(self, body: bytes) -> c.Response:
        return response.decode_response(body)

    def stream_decoder(self) -> stream.AnthropicStreamDecoder:
        return stream.AnthropicStreamDecoder()

    def decode_error(self, status: int, body: bytes) -> ProxyError:
        return errors.decode_error(status, body)

    def rate_limit_headers(
        self, upstream_headers: list[tuple[bytes, bytes]], *, exhausted: bool
    ) -> list[tuple[bytes, bytes]]:
        return ratelimit.for_anthropic_client(upstream_headers, exhausted=exhausted)

    # ---- side endpoints
    def count_tokens_request(self, body: bytes) -> c.Request:
        return models.count_tokens_request(body)

    def encode_token_count(self, tokens: int) -> bytes:
        return models.encode_token_count(tokens)

    def lists_models(self, path: str, headers: list[tuple[bytes, bytes]], query: bytes) -> bool:
        return models.lists_models(headers)

    def encode_model_list(self, names: list[str], query: bytes) -> bytes:
        return models.encode_model_list(names)

    def models_url(self, base_url: str) -> str:
        return models.models_url(base_url)

    def model_ids(self, body: bytes) -> list[str]:
        return models.model_ids(body)

    # ---- pass-through
    def stream_epilogue(self, tail: StreamTail, error: ProxyError | None) -> bytes:
        return _epilogue.stream_epilogue(tail, error)


CODEC: Codec = AnthropicMessagesCodec()

__all__ = ["CODEC", "AnthropicMessagesCodec"]
