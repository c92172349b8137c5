"""Chat Completions errors: the OpenAI error shape, shared with Responses
(``protocols/_kit/openai_errors.py``)."""

from __future__ import annotations

from .._kit.openai_errors import (
    decode_openai_error,
    encode_openai_error,
    kind_from_fields,
    openai_failure_hint,
    openai_rate_limit_wait,
    openai_stream_failure_hint,
    status_from_fields,
)

__all__ = [
    "decode_openai_error",
    "encode_openai_error",
    "kind_from_fields",
    "openai_failure_hint",
    "openai_rate_limit_wait",
    "openai_stream_failure_hint",
    "status_from_fields",
]
