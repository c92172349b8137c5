"""Error shapes of the three client protocols, checked strictly."""

from __future__ import annotations

from typing import Any

ANTHROPIC_ERROR_TYPES = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "api_error",
        "overloaded_error",
    }
)


def error_problem(protocol: str, body: Any) -> str | None:
    """What is wrong with ``body`` as ``protocol``'s error body; None when it is right
    (including a non-empty message)."""
    if not isinstance(body, dict):
        return f"not a JSON object: {body!r:.200}"
    if protocol == "anthropic_messages":
        err = body.get("error")
        if body.get("type") != "error" or not isinstance(err, dict):
            return f"not an Anthropic error: {body!r:.200}"
        if err.get("type") not in ANTHROPIC_ERROR_TYPES:
            return f"unknown Anthropic error type {err.get('type')!r}"
    elif protocol == "gemini_generate_content":
        err = body.get("error")
        if not isinstance(err, dict) or set(err) != {"code", "message", "status"}:
            return f"not a Google error with code, message and status: {body!r:.200}"
        if not isinstance(err["code"], int) or not str(err["status"]).isupper():
            return f"Google error code or status malformed: {err!r:.200}"
    else:
        err = body.get("error")
        if not isinstance(err, dict) or set(err) != {"message", "type", "param", "code"}:
            return f"not an OpenAI error with all four keys: {body!r:.200}"
        if not isinstance(err["type"], str):
            return f"OpenAI error type is not a string: {err!r:.200}"
    message = err.get("message")
    if not isinstance(message, str) or not message.strip():
        return f"empty error message: {body!r:.200}"
    return None


def error_message(protocol: str, body: Any) -> str:
    """``body``'s message after asserting it is ``protocol``'s error shape."""
    problem = error_problem(protocol, body)
    assert problem is None, problem
    return str(body["error"]["message"])
