"""OpenAI Responses codec: ``CODEC`` declares which module does each part of
``proxai_asgi.codec.Codec``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from ...codec import (
    Action,
    BodyAddressed,
    Codec,
    ProtocolName,
    UpstreamOptions,
    usage_always_reported,
)
from ...stream_tail import USAGE_TAIL_BYTES
from .._kit import ratelimit
from .._kit.openai_family import OpenAIFamily
from . import epilogue, errors, relayed, request, response, session
from .errors import decode_openai_error, encode_openai_error
from .resume import resume_encoder
from .stream import ResponsesStreamDecoder, ResponsesStreamEncoder


class ResponsesCodec(OpenAIFamily, BodyAddressed):
    name: ProtocolName = "openai_responses"
    paths: Mapping[str, Action] = {
        "/v1/responses": "generate",
        "/responses": "generate",
        "/v1/responses/compact": "compact",
        "/responses/compact": "compact",
        # Codex's standalone web search (``web_search = "live"``)
        "/v1/alpha/search": "search",
        "/alpha/search": "search",
    }
    upstream_path: str = "/responses"
    wraps_custom_tools: bool = True
    serves_websocket: bool = True
    stateful: bool = True
    usage_tail_bytes: int = USAGE_TAIL_BYTES  # response.completed repeats the answer
    search_results_last: bool = False
    session_hint = staticmethod(session.session_hint)  # headers: the family's
    # Responses has no prefill: a final assistant item is context, not a start.
    continues: Literal["prefill", "restart"] = "restart"

    def takes_custom_tools(self, options: UpstreamOptions) -> bool:
        return True

    def hosts_web_search(self, options: UpstreamOptions) -> bool:
        # the hosted ``web_search`` tool, unless the operator has the proxy search
        return not options.proxy_search

    # ---- client side
    decode_request = staticmethod(request.decode_request)
    encode_response = staticmethod(response.encode_response)
    stream_encoder = ResponsesStreamEncoder
    encode_error = staticmethod(encode_openai_error)

    # ---- upstream side
    encode_request = staticmethod(request.encode_request)
    decode_response = staticmethod(response.decode_response)
    stream_decoder = ResponsesStreamDecoder
    decode_error = staticmethod(decode_openai_error)
    rate_limit_headers = staticmethod(ratelimit.for_openai_client)
    failure_hint = staticmethod(errors.openai_failure_hint)
    stream_failure_hint = staticmethod(errors.openai_stream_failure_hint)
    rate_limit_wait = staticmethod(errors.openai_rate_limit_wait)

    # ---- pass-through
    stream_complete = staticmethod(epilogue.stream_complete)
    resume = staticmethod(resume_encoder)
    stream_epilogue = staticmethod(epilogue.stream_epilogue)
    relayed_usage = staticmethod(relayed.relayed_usage)
    relayed_stream_usage = staticmethod(relayed.relayed_stream_usage)
    ask_usage = staticmethod(usage_always_reported)


CODEC: Codec = ResponsesCodec()

__all__ = ["CODEC", "ResponsesCodec"]
