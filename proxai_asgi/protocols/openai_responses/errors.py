"""Responses errors share the OpenAI error shape with Chat Completions:
``{"error": {"message", "type", "param", "code"}}`` (``protocols/_kit/openai_errors.py``)."""

from __future__ import annotations

from .._kit.openai_errors import (
    decode_openai_error,
    encode_openai_error,
    openai_failure_hint,
    openai_rate_limit_wait,
    openai_stream_failure_hint,
)

__all__ = [
    "decode_openai_error",
    "encode_openai_error",
    "openai_failure_hint",
    "openai_rate_limit_wait",
    "openai_stream_failure_hint",
]
