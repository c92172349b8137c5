"""OpenAI Chat Completions codec."""

from __future__ import annotations

from collections.abc import Mapping

from ... import canonical as c
from ...codec import Action, BodyAddressed, Codec, ProtocolName, UpstreamOptions
from ...errors import ProxyError, TranslationReport
from ...stream_tail import StreamTail
from .._kit import ratelimit
from .._kit.openai_family import OpenAIFamily
from . import epilogue as _epilogue
from . import request as _request
from . import response as _response
from .errors import decode_openai_error, encode_openai_error
from .stream import ChatStreamDecoder, ChatStreamEncoder


class ChatCompletionsCodec(OpenAIFamily, BodyAddressed):
    name: ProtocolName = "openai_chat_completions"
    paths: Mapping[str, Action] = {
        "/v1/chat/completions": "generate",
        "/chat/completions": "generate",
    }
    upstream_path: str = "/chat/completions"
    wraps_custom_tools: bool = False
    serves_websocket: bool = False
    stateful: bool = False

    def takes_custom_tools(self, options: UpstreamOptions) -> bool:
        # OpenAI has them; most Chat-compatible servers do not.
        return options.native_custom_tools

    # ---- client side
    def decode_request(self, body: bytes, report: TranslationReport) -> c.Request:
        return _request.decode_request(body, report)

    def encode_response(self, response: c.Response, request: c.Request) -> bytes:
        return _response.encode_response(response, request)

    def stream_encoder(self, request: c.Request) -> ChatStreamEncoder:
        return ChatStreamEncoder(request)

    def encode_error(self, error: ProxyError) -> bytes:
        return encode_openai_error(error)

    # ---- upstream side
    def encode_request(
        self, request: c.Request, report: TranslationReport, options: UpstreamOptions
    ) -> bytes:
        return _request.encode_request(request, report, options)

    def decode_response(self, body: bytes) -> c.Response:
        return _response.decode_response(body)

    def stream_decoder(self) -> ChatStreamDecoder:
        return ChatStreamDecoder()

    def decode_error(self, status: int, body: bytes) -> ProxyError:
        return decode_openai_error(status, body)

    def rate_limit_headers(
        self, upstream_headers: list[tuple[bytes, bytes]], *, exhausted: bool
    ) -> list[tuple[bytes, bytes]]:
        return ratelimit.for_openai_client(upstream_headers, exhausted=exhausted)

    # ---- pass-through
    def stream_epilogue(self, tail: StreamTail, error: ProxyError | None) -> bytes:
        return _epilogue.stream_epilogue(tail, error)


CODEC: Codec = ChatCompletionsCodec()

__all__ = ["CODEC", "ChatCompletionsCodec", "decode_openai_error", "encode_openai_error"]
