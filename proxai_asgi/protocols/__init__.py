"""The registry of codecs: one sub-package per wire protocol, each exposing ``CODEC``.

This is the one place outside a codec's own folder that names protocols: a new
protocol is a folder and one line in ``_MODULES`` (and its name in the public
``ProtocolName`` type). Codecs are imported on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from ._kit import search_results

if TYPE_CHECKING:
    from ..codec import Codec, ProtocolName

_MODULES: dict[str, str] = {
    "openai_chat_completions": "openai_chat",
    "openai_responses": "openai_responses",
    "anthropic_messages": "anthropic_messages",
    "gemini_generate_content": "gemini_generate_content",
}
# Whose shape a models listing is answered in, most specific claim first (a Google
# path or key, an ``anthropic-version`` header); the last claims every request.
_LISTING_ORDER = ("gemini_generate_content", "anthropic_messages", "openai_chat_completions")
_CACHE: dict[str, Codec] = {}


def get_codec(name: ProtocolName) -> Codec:
    codec = _CACHE.get(name)
    if codec is None:
        module = import_module(f"{__name__}.{_MODULES[name]}")
        codec = module.CODEC
        _CACHE[name] = codec
    return codec


def all_codecs() -> list[Codec]:
    return [get_codec(name) for name in _MODULES]  # type: ignore[arg-type]


def model_listing(path: str, headers: list[tuple[bytes, bytes]], query: bytes) -> Codec:
    """The codec whose shape a models-listing request asks for."""
    for name in _LISTING_ORDER:
        codec = get_codec(name)  # type: ignore[arg-type]
        if codec.lists_models(path, headers, query):
            return codec
    raise AssertionError("the last codec of _LISTING_ORDER claims every listing")


def holds_search_placeholder(body: bytes) -> bool:
    """A request body holds the proxy's own search-result placeholder (written into an
    answer the client replays): it is translated even toward an upstream of its own
    protocol, whose provider would refuse the placeholder as its own opaque content."""
    return search_results.holds_placeholder(body)
