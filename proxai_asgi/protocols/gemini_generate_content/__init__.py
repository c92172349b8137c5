"""Google Gemini ``generateContent`` codec.

Client side: the ``google-genai`` SDKs and Gemini CLI. Upstream side:
generativelanguage.googleapis.com and Gemini-compatible servers. ``CODEC`` satisfies
``proxai_asgi.codec.Codec``. The model and the stream flag live in the URL, not in
the body (``/v1beta/models/{model}:streamGenerateContent?alt=sse``): the request
decoder takes them from the caller.
"""

from __future__ import annotations

import time

from ... import canonical as c
from ...codec import Codec, PathCall, ProtocolName, Served, UpstreamOptions
from ...errors import ProxyError, TranslationReport
from ...stream_tail import StreamTail
from .._kit import ratelimit
from . import epilogue, errors, models, paths, request, response, stream


class GeminiGenerateContentCodec:
    name: ProtocolName = "gemini_generate_content"
    model_in_path: bool = True
    system: str = "gcp.gemini"
    header_family: tuple[bytes, ...] = (b"x-goog-",)
    auth_header: bytes = b"x-goog-api-key"
    credential_headers: tuple[bytes, ...] = (b"x-goog-api-key",)
    listing_paths: tuple[str, ...] = ("/v1beta/models", "/v1/models")
    required_headers: tuple[tuple[bytes, bytes], ...] = ()
    wraps_custom_tools: bool = False
    serves_websocket: bool = False
    stateful: bool = False

    def serves(self, path: str) -> Served | None:
        call = paths.path_call(path)
        return None if call is None else Served(call.action, call)

    def takes_custom_tools(self, options: UpstreamOptions) -> bool:
        return False

    def inner_path(self, call: PathCall | None = None) -> str:
        return paths.upstream_url("", call)

    def upstream_url(self, base_url: str, call: PathCall | None = None) -> str:
        return paths.upstream_url(base_url, call)

    # ---- client side

    def decode_request(
        self, body: bytes, report: TranslationReport, model: str = "", stream: bool = False
    ) -> c.Request:
        return request.decode_request(body, report, model, stream)

    def encode_response(self, response_: c.Response, request_: c.Request) -> bytes:
        return response.encode_response(response_, request_)

    def stream_encoder(self, request_: c.Request) -> stream.GeminiStreamEncoder:
        return stream.GeminiStreamEncoder(request_)

    def encode_error(self, error: ProxyError) -> bytes:
        return errors.encode_error(error)

    # ---- upstream side

    def encode_request(
        self, request_: c.Request, report: TranslationReport, options: UpstreamOptions
    ) -> bytes:
        return request.encode_request(request_, report, options)

    def decode_response(self, body: bytes) -> c.Response:
        return response.decode_response(body)

    def stream_decoder(self) -> stream.GeminiStreamDecoder:
        return stream.GeminiStreamDecoder()

    def decode_error(self, status: int, body: bytes) -> ProxyError:
        return errors.decode_error(status, body)

    def rate_limit_headers(
        self, upstream_headers: list[tuple[bytes, bytes]], *, exhausted: bool
    ) -> list[tuple[bytes, bytes]]:
        # Google states no limits in headers (its errors carry RetryInfo): only the
        # wait, when the upstream gave one.
        wait = ratelimit.retry_after_seconds(upstream_headers, time.time())
        if wait is None or any(k == b"retry-after" for k, _ in upstream_headers):
            return []
        return [(b"retry-after", str(wait).encode())]

    # ---- side endpoints
    def count_tokens_request(self, body: bytes) -> c.Request:
        return request.count_tokens_request(body)

    def encode_token_count(self, tokens: int) -> bytes:
        return models.encode_token_count(tokens)

    def lists_models(self, path: str, headers: list[tuple[bytes, bytes]], query: bytes) -> bool:
        return models.lists_models(path, headers, query)

    def encode_model_list(self, names: list[str], query: bytes) -> bytes:
        return models.encode_model_list(names)

    def models_url(self, base_url: str) -> str:
        return models.models_url(base_url)

    def model_ids(self, body: bytes) -> list[str]:
        return models.model_ids(body)

    # ---- pass-through
    def stream_epilogue(self, tail: StreamTail, error: ProxyError | None) -> bytes:
        return epilogue.stream_epilogue(tail, error)


CODEC: Codec = GeminiGenerateContentCodec()

__all__ = ["CODEC", "GeminiGenerateContentCodec"]
