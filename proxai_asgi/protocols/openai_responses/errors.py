"""Responses errors share the OpenAI error shape with Chat Completions:
``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

from ..openai_chat.errors import decode_openai_error, encode_openai_error

__all__ = ["decode_openai_error", "encode_openai_error"]
