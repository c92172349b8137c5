"""msgspec JSON decoders built on first use.

Building a ``msgspec.json.Decoder`` for a Struct type evaluates the annotations of
every Struct it reaches (string annotations, compiled one by one): several ms for a
protocol's request or stream types. Every codec is loaded when a middleware is built,
yet a deployment uses one side of most of them (Claude Code in front of an OpenAI
upstream never decodes an Anthropic response nor a Chat request), so each decoder is
built by the first body it decodes (``bench/import_time.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

_T = TypeVar("_T")


class LazyDecoder(Generic[_T]):
    """``msgspec.json.Decoder(type_)``, built by the first ``decode``; after it,
    ``decode`` is the built decoder's own method (no wrapper on the hot path)."""

    __slots__ = ("_type", "decode")

    def __init__(self, type_: Any) -> None:
        self._type = type_
        self.decode: Callable[[bytes | str], _T] = self._first_decode

    def _first_decode(self, data: bytes | str) -> _T:
        decoder: msgspec.json.Decoder[_T] = msgspec.json.Decoder(self._type)
        self.decode = decoder.decode
        return decoder.decode(data)
