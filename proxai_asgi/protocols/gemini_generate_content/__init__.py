"""Google Gemini ``generateContent`` codec.

Client side: the ``google-genai`` SDKs and Gemini CLI. Upstream side:
generativelanguage.googleapis.com and Gemini-compatible servers. ``CODEC`` declares
which module does each part of ``proxai_asgi.codec.Codec``. The model and the stream
flag live in the URL, not in the body
(``/v1beta/models/{model}:streamGenerateContent?alt=sse``): the request decoder takes
them from the caller.
"""

from __future__ import annotations

from typing import Literal

from ...codec import (
    Codec,
    ProtocolName,
    UpstreamOptions,
    nothing_to_resume,
    usage_always_reported,
)
from ...stream_tail import TAIL_BYTES
from .._kit import ratelimit
from . import epilogue, errors, models, paths, relayed, request, response, session
from .stream import GeminiStreamDecoder, GeminiStreamEncoder


class GeminiGenerateContentCodec:
    name: ProtocolName = "gemini_generate_content"
    model_in_path: bool = True
    system: str = "gcp.gemini"
    operation: str = "generate_content"
    header_family: tuple[bytes, ...] = (b"x-goog-",)
    auth_header: bytes = b"x-goog-api-key"
    credential_headers: tuple[bytes, ...] = (b"x-goog-api-key",)
    listing_paths: tuple[str, ...] = ("/v1beta/models", "/v1/models")
    required_headers: tuple[tuple[bytes, bytes], ...] = ()
    wraps_custom_tools: bool = False
    serves_websocket: bool = False
    stateful: bool = False
    usage_tail_bytes: int = TAIL_BYTES
    search_results_last: bool = True  # grounding metadata on the last chunk
    session_headers: tuple[bytes, ...] = ()  # its clients send none
    session_hint = staticmethod(session.session_hint)
    # Whether a final model turn is continued or answered anew is not documented
    # for every model: restart, which can only release what extends the text sent.
    continues: Literal["prefill", "restart"] = "restart"

    def takes_custom_tools(self, options: UpstreamOptions) -> bool:
        return False

    def hosts_web_search(self, options: UpstreamOptions) -> bool:
        # Google Search grounding (``googleSearch``), unless the operator has the proxy search
        return not options.proxy_search

    serves = staticmethod(paths.serves)
    inner_path = staticmethod(paths.inner_path)
    upstream_url = staticmethod(paths.upstream_url)

    # ---- client side
    decode_request = staticmethod(request.decode_request)
    encode_response = staticmethod(response.encode_response)
    stream_encoder = GeminiStreamEncoder
    encode_error = staticmethod(errors.encode_error)

    # ---- upstream side
    encode_request = staticmethod(request.encode_request)
    decode_response = staticmethod(response.decode_response)
    stream_decoder = GeminiStreamDecoder
    decode_error = staticmethod(errors.decode_error)
    rate_limit_headers = staticmethod(ratelimit.for_gemini_client)
    failure_hint = staticmethod(errors.failure_hint)
    stream_failure_hint = staticmethod(errors.stream_failure_hint)
    rate_limit_wait = staticmethod(errors.rate_limit_wait)

    # ---- side endpoints
    count_tokens_request = staticmethod(request.count_tokens_request)
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


CODEC: Codec = GeminiGenerateContentCodec()

__all__ = ["CODEC", "GeminiGenerateContentCodec"]
