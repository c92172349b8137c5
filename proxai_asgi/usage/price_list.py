"""The default price table: the providers' public list prices (standard tier, USD per
million tokens; ``server_tool_request`` in USD per request).

``DEFAULT_VERSION`` names the day these were last checked against the sources below;
an operator who negotiated other prices overrides them (``prices.load_prices``).

Each entry: its names (the first is the entry's own; the rest are aliases the
providers publish), and its prices. A model id the providers date (``gpt-4o-2024-08-06``,
``claude-sonnet-4-5-20250929``) finds its entry once the date is taken off
(``prices.base_name``); ``patterns`` catches the other spellings.
"""

from __future__ import annotations

from typing import Any

DEFAULT_VERSION = "proxai-default-2026-11-28"

# --- OpenAI. Source: https://developers.openai.com/api/docs/pricing (standard tier;
# text tokens), checked 2026-11-28. No cache-write charge (caching is automatic);
# reasoning tokens are output tokens at the output price. Web search tool calls:
# $10 per 1,000 calls (the search content tokens are billed as input tokens).
_OPENAI_SEARCH = 0.01

# --- Anthropic. Source: https://platform.claude.com/docs/en/about-claude/pricing
# ("Model pricing": base input, 5m cache writes, 1h cache writes, cache hits, output),
# checked 2026-11-28. Web search: $10 per 1,000 searches; web fetch has no charge of
# its own (its content is billed as input tokens), so only searches are counted.
_ANTHROPIC_SEARCH = 0.01

# --- Google Gemini. Source: https://ai.google.dev/gemini-api/docs/pricing (paid tier,
# standard; text/image/video input), checked 2026-11-28. Output prices include the
# thinking tokens. Prompts over 200k tokens are billed at the ``long_context`` prices
# on every token of the request (2.5 Pro, 3 Pro). Context-cache storage (per hour) and
# grounding ($35 per 1,000 grounded prompts past the free allowance) are not per
# response and are not priced here.


def _p(
    input: float,
    output: float,
    cache_read: float | None = None,
    cache_write_5m: float | None = None,
    cache_write_1h: float | None = None,
    server_tool_request: float | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"input": input, "output": output}
    for key, value in (
        ("cache_read", cache_read),
        ("cache_write_5m", cache_write_5m),
        ("cache_write_1h", cache_write_1h),
        ("server_tool_request", server_tool_request),
    ):
        if value is not None:
            out[key] = value
    return out


def _claude(input: float, output: float) -> dict[str, Any]:
    """Anthropic's cache multipliers: writes 1.25x (5 m) and 2x (1 h), hits 0.1x."""
    read, write_5m, write_1h = (round(input * m, 6) for m in (0.1, 1.25, 2.0))
    return _p(input, output, read, write_5m, write_1h, _ANTHROPIC_SEARCH)


def _openai(input: float, cached: float, output: float) -> dict[str, Any]:
    return _p(input, output, cached, server_tool_request=_OPENAI_SEARCH)


DEFAULT_MODELS: dict[str, dict[str, Any]] = {
    # OpenAI
    "gpt-5": _openai(1.25, 0.125, 10.0),
    "gpt-5-mini": _openai(0.25, 0.025, 2.0),
    "gpt-5-nano": _openai(0.05, 0.005, 0.40),
    "gpt-5.1": _openai(1.25, 0.125, 10.0),
    "gpt-5-codex": _openai(1.25, 0.125, 10.0),
    "gpt-4.1": _openai(2.0, 0.50, 8.0),
    "gpt-4.1-mini": _openai(0.40, 0.10, 1.60),
    "gpt-4.1-nano": _openai(0.10, 0.025, 0.40),
    "gpt-4o": _openai(2.50, 1.25, 10.0),
    "gpt-4o-mini": _openai(0.15, 0.075, 0.60),
    "o3": _openai(2.0, 0.50, 8.0),
    "o3-mini": _openai(1.10, 0.55, 4.40),
    "o4-mini": _openai(1.10, 0.275, 4.40),
    # Anthropic (the 4.x aliases ``claude-sonnet-4-0`` etc. are listed as names)
    "claude-opus-4-7": _claude(5.0, 25.0),
    "claude-opus-4-6": _claude(5.0, 25.0),
    "claude-opus-4-5": _claude(5.0, 25.0),
    "claude-opus-4-1": _claude(15.0, 75.0),
    "claude-opus-4": {**_claude(15.0, 75.0), "names": ["claude-opus-4-0"]},
    "claude-sonnet-4-6": _claude(3.0, 15.0),
    "claude-sonnet-4-5": _claude(3.0, 15.0),
    "claude-sonnet-4": {**_claude(3.0, 15.0), "names": ["claude-sonnet-4-0"]},
    "claude-3-7-sonnet": _claude(3.0, 15.0),
    "claude-haiku-4-5": _claude(1.0, 5.0),
    "claude-3-5-haiku": _claude(0.80, 4.0),
    "claude-3-haiku": _p(0.25, 1.25, 0.03, 0.30, 0.50, _ANTHROPIC_SEARCH),
    "claude-3-opus": _claude(15.0, 75.0),
    # Google Gemini
    "gemini-2.5-pro": {
        **_p(1.25, 10.0, 0.125),
        "long_context": {"threshold": 200_000, "input": 2.50, "output": 15.0, "cache_read": 0.25},
    },
    "gemini-2.5-flash": {**_p(0.30, 2.50, 0.03), "patterns": ["gemini-2.5-flash-preview-*"]},
    "gemini-2.5-flash-lite": {
        **_p(0.10, 0.40, 0.01),
        "patterns": ["gemini-2.5-flash-lite-preview-*"],
    },
    "gemini-2.0-flash": {**_p(0.10, 0.40, 0.025), "patterns": ["gemini-2.0-flash-0*"]},
    "gemini-2.0-flash-lite": {**_p(0.075, 0.30), "patterns": ["gemini-2.0-flash-lite-0*"]},
    "gemini-3-pro-preview": {
        **_p(2.0, 12.0, 0.20),
        "long_context": {"threshold": 200_000, "input": 4.0, "output": 18.0, "cache_read": 0.40},
    },
}
