"""One sub-package per wire protocol; each exposes ``CODEC``."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..codec import Codec, ProtocolName

_MODULES: dict[str, str] = {
    "openai_chat_completions": "openai_chat",
    "openai_responses": "openai_responses",
    "anthropic_messages": "anthropic_messages",
    "gemini_generate_content": "gemini_generate_content",
}
_CACHE: dict[str, Codec] = {}


def get_codec(name: ProtocolName) -> Codec:
    codec = _CACHE.get(name)
    if codec is None:
        module = import_module(f"{__name__}.{_MODULES[name]}")
        codec = module.CODEC
        _CACHE[name] = codec
    return codec
