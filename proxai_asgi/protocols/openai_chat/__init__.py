"""OpenAI Chat Completions codec: ``CODEC`` declares which module does each part of
``proxai_asgi.codec.Codec``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from ...codec import Action, BodyAddressed, Codec, ProtocolName, UpstreamOptions, nothing_to_resume
from ...stream_tail import TAIL_BYTES
from .._kit import ratelimit
from .._kit.openai_family import OpenAIFamily
from . import epilogue, errors, relayed, request, response, session, usage_ask
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
    usage_tail_bytes: int = TAIL_BYTES
    search_results_last: bool = False
    session_hint = staticmethod(session.session_hint)  # headers: the family's
    # A final assistant message is continued by some Chat servers (vLLM asked with
    # ``continue_final_message``, llama.cpp) and answered anew by others (OpenAI,
    # vLLM by default): prefilled there, the answer's start would be sent twice. So
    # restart, which releases only what extends the text sent; set
    # ``UpstreamOptions.continuation = "prefill"`` for a server known to continue.
    continues: Literal["prefill", "restart"] = "restart"

    def takes_custom_tools(self, options: UpstreamOptions) -> bool:
        # OpenAI has them; most Chat-compatible servers do not.
        return options.native_custom_tools

    def hosts_web_search(self, options: UpstreamOptions) -> bool:
        # Only OpenAI's search models search (``web_search_options``); a Chat
        # server in general does not: the proxy runs the search for it.
        return False

    # ---- client side
    decode_request = staticmethod(request.decode_request)
    encode_response = staticmethod(response.encode_response)
    stream_encoder = ChatStreamEncoder
    encode_error = staticmethod(encode_openai_error)

    # ---- upstream side
    encode_request = staticmethod(request.encode_request)
    decode_response = staticmethod(response.decode_response)
    stream_decoder = ChatStreamDecoder
    decode_error = staticmethod(decode_openai_error)
    rate_limit_headers = staticmethod(ratelimit.for_openai_client)
    failure_hint = staticmethod(errors.openai_failure_hint)
    stream_failure_hint = staticmethod(errors.openai_stream_failure_hint)
    rate_limit_wait = staticmethod(errors.openai_rate_limit_wait)

    # ---- pass-through
    stream_complete = staticmethod(epilogue.stream_complete)
    resume = staticmethod(nothing_to_resume)
    stream_epilogue = staticmethod(epilogue.stream_epilogue)
    relayed_usage = staticmethod(relayed.relayed_usage)
    relayed_stream_usage = staticmethod(relayed.relayed_stream_usage)
    ask_usage = staticmethod(usage_ask.ask_usage)


CODEC: Codec = ChatCompletionsCodec()

__all__ = ["CODEC", "ChatCompletionsCodec", "decode_openai_error", "encode_openai_error"]
