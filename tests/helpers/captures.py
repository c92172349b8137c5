"""Recorded real provider traffic, read where it lives.

The recordings come from other public projects and are not part of this repository:
they sit in ``shared/fixtures/captures`` beside the checkout (``PROXAI_CAPTURES``
overrides the location). The suite runs without them: a test whose recording is
absent is skipped, and the reason says where recordings are expected. With
``PROXAI_REQUIRE_CAPTURES=1`` (set by ``.ci/run`` when the directory exists) an absent
recording fails instead, so CI cannot pass by skipping them.

Test ids come from ``MANIFEST`` (names only, no traffic), so a clone without the
recordings collects the same tests and reports them as skipped rather than losing them.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV_DIR = "PROXAI_CAPTURES"
ENV_REQUIRE = "PROXAI_REQUIRE_CAPTURES"

# The recordings the suite reads. ``test_the_recordings_the_suite_names_are_there``
# fails (when the directory exists) if one of them is not.
MANIFEST: tuple[str, ...] = (
    "anthropic_err_400_invalid_request",
    "anthropic_err_404_not_found_stream_request",
    "anthropic_json_cache_read",
    "anthropic_json_max_tokens",
    "anthropic_json_parallel_tool_use",
    "anthropic_json_redacted_thinking",
    "anthropic_json_text_basic",
    "anthropic_sse_parallel_tool_use",
    "anthropic_sse_text_basic",
    "anthropic_sse_thinking_signature_delta",
    "chat_err_401_invalid_api_key",
    "chat_json_cached_tokens",
    "chat_json_parallel_tool_calls",
    "chat_json_refusal",
    "chat_json_text_basic",
    "chat_sse_max_tokens_length",
    "chat_sse_n3_choices",
    "chat_sse_parallel_tool_calls",
    "chat_sse_text_basic_include_usage",
    "errors_from_issue_reports_FRAGMENTS",
    "gemini_err_404_model_not_found",
    "gemini_json_max_tokens",
    "gemini_json_max_tokens_thinking_empty",
    "gemini_json_refusal_prompt",
    "gemini_json_safety_settings",
    "gemini_json_text_basic",
    "gemini_json_thinking",
    "gemini_json_tools",
    "gemini_sse_max_tokens",
    "gemini_sse_refusal_prompt",
    "gemini_sse_text_basic",
    "gemini_sse_thinking",
    "gemini_sse_tool_call_thought_signature",
    "gemini_sse_tools",
    "responses_err_400_invalid_request",
    "responses_json_cached_tokens",
    "responses_json_refusal",
    "responses_json_text_basic",
    "responses_sse_incomplete_max_output_tokens",
    "responses_sse_parallel_function_calls",
    "responses_sse_reasoning_summary",
    "responses_sse_text_basic",
)
# Name prefixes of the protocols whose codecs are registered: ``capture_names()``
# without a prefix lists only these (``capture_names("gemini_")`` lists the Gemini ones).
PROTOCOL_PREFIXES: tuple[str, ...] = ("anthropic_", "chat_", "responses_", "gemini_")

# Node ids of the tests that read a recording, and of those skipped for lack of one
# (reported by tests/conftest.py at the end of the run).
USED: set[str] = set()
MISSING: set[str] = set()


def captures_dir() -> Path:
    override = os.environ.get(ENV_DIR)
    if override:
        return Path(override).expanduser().resolve()
    return ROOT.parent / "shared" / "fixtures" / "captures"


def capture_names(prefix: str = "") -> list[str]:
    """Names of the recordings starting with ``prefix`` (of a registered protocol when
    no prefix is given), whether or not they are present."""
    allowed = (prefix,) if prefix else PROTOCOL_PREFIXES
    return [n for n in MANIFEST if n.startswith(allowed)]


def _current_test() -> str | None:
    current = os.environ.get("PYTEST_CURRENT_TEST")
    return current.rsplit(" ", 1)[0] if current else None


def present(name: str) -> bool:
    """Whether the recording is there (for optional seeds read at import time)."""
    return (captures_dir() / f"{name}.json").is_file()


def path_of(name: str) -> Path:
    """The recording's file; skips the calling test (fails it under
    ``PROXAI_REQUIRE_CAPTURES=1``) when it is absent."""
    path = captures_dir() / f"{name}.json"
    test = _current_test()
    if path.is_file():
        if test:
            USED.add(test)
        return path
    reason = (
        f"recording {name}.json not found: recorded traffic is expected in "
        f"{captures_dir()} (shared/fixtures/captures beside the checkout, or ${ENV_DIR})"
    )
    if os.environ.get(ENV_REQUIRE) == "1":
        pytest.fail(reason, pytrace=False)
    if test:
        MISSING.add(test)
    pytest.skip(reason)


@cache
def _text(path: Path) -> str:
    return path.read_text()


def load(name: str) -> dict[str, Any]:
    """The recording as a fresh dict (callers may change it)."""
    data: dict[str, Any] = json.loads(_text(path_of(name)))
    return data


def response_body(name: str) -> bytes:
    body = load(name)["response"]["body"]
    return body.encode() if isinstance(body, str) else json.dumps(body).encode()


def request_body(name: str) -> bytes:
    return json.dumps(load(name)["request"]["body"]).encode()
