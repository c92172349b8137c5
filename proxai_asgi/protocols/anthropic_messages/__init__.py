"""Anthropic Messages (``POST /v1/messages``) codec.

Client side: Claude Code and the Anthropic SDKs. Upstream side: api.anthropic.com and
Anthropic-compatible servers. ``CODEC`` satisfies ``proxai_asgi.codec.Codec``.
"""

from __future__ import annotations

from ... import canonical as c
from ... import ratelimit
from ...codec import BodyAddressed, Codec, ProtocolName, UpstreamOptions
from ...errors import ProxyError, TranslationReport
from ...stream_tail import StreamTail
from . import epilogue as _epilogue
from . import errors, request, response, stream


class AnthropicMessagesCodec(BodyAddressed):
    name: ProtocolName = "anthropic_messages"
    client_paths: tuple[str, ...] = ("/v1/messages",)
    upstream_path: str = "/v1/messages"
    auth_header: bytes = b"x-api-key"
    supports_custom_tools: bool = False

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

    # ---- pass-through
    def stream_epilogue(self, tail: StreamTail, error: ProxyError | None) -> bytes:
        return _epilogue.stream_epilogue(tail, error)


CODEC: Codec = AnthropicMessagesCodec()

__all__ = ["CODEC", "AnthropicMessagesCodec"]
