"""Failover configuration of the standalone server: key pools, fallbacks and the
routing knobs, from TOML, the environment and the flags."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from proxai_asgi.server import config as cfg
from tests.test_cli import app_from

POOLED = """
[[upstreams]]
name = "claude"
protocol = "anthropic_messages"
base_url = "https://api.anthropic.com"
api_key_env = ["KEY_1", "KEY_2"]
first_content_timeout = 2.5
max_retries = 1
retry_budget = 5
max_retry_after = 3
key_cooldown = 60
target_cooldown = 4
continuation = "restart"

[[upstreams]]
name = "backup"
protocol = "openai_chat_completions"
base_url = "https://openrouter.ai/api/v1"
api_key_env = "OR_KEY"

[[upstreams]]
name = "gemini"
protocol = "gemini_generate_content"
base_url = "https://generativelanguage.googleapis.com"

[[routes]]
model = "claude-*"
upstream = "claude"
fallbacks = [
  { upstream = "backup", model = "anthropic/claude-sonnet-4.5" },
  { upstream = "gemini" },
]

[[routes]]
model = "*"
upstream = "backup"
"""
KEYS = {"KEY_1": "sk-ant-1", "KEY_2": "sk-ant-2", "OR_KEY": "sk-or-1"}


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "proxai.toml"
    path.write_text(text)
    return str(path)


def test_toml_key_pool_fallbacks_and_knobs_build_the_route(tmp_path: Path) -> None:
    app, _ = app_from(["--config", write(tmp_path, POOLED)], KEYS)
    claude, rest = app.router.routes
    assert claude.upstream.keys == ("sk-ant-1", "sk-ant-2")
    assert [m.key for m in claude.upstream.members] == ["sk-ant-1", "sk-ant-2"]
    up = claude.upstream
    assert (up.first_content_timeout, up.max_retries, up.retry_budget) == (2.5, 1, 5)
    assert (up.max_retry_after, up.key_cooldown, up.target_cooldown) == (3, 60, 4)
    assert up.continuation == "restart"
    backup, gemini = claude.fallbacks
    # A fallback is the named upstream itself: one object, one cooldown state.
    assert backup.upstream is rest.upstream and backup.model == "anthropic/claude-sonnet-4.5"
    assert gemini.upstream.protocol == "gemini_generate_content" and gemini.model is None
    assert rest.fallbacks == ()


def test_a_single_key_variable_is_still_one_key(tmp_path: Path) -> None:
    app, _ = app_from(["--config", write(tmp_path, POOLED)], KEYS)
    assert app.router.routes[1].upstream.api_key == "sk-or-1"


def test_an_unset_pool_variable_is_a_start_up_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(cfg.ConfigError, match=r"\$KEY_2 is not set") as info:
        app_from(["--config", write(tmp_path, POOLED)], {"KEY_1": "sk-ant-1", "OR_KEY": "x"})
    assert "sk-ant-1" not in str(info.value)


def test_environment_knobs_override_every_upstream(tmp_path: Path) -> None:
    env = {
        **KEYS,
        "PROXAI_FIRST_CONTENT_TIMEOUT": "0.5",
        "PROXAI_MAX_RETRIES": "0",
        "PROXAI_RETRY_BUDGET": "1.5",
        "PROXAI_MAX_RETRY_AFTER": "2",
        "PROXAI_KEY_COOLDOWN": "30",
        "PROXAI_TARGET_COOLDOWN": "1",
        "PROXAI_CONTINUATION": "off",
    }
    app, _ = app_from(["--config", write(tmp_path, POOLED)], env)
    claude, rest = app.router.routes
    for up in (claude.upstream, rest.upstream, claude.fallbacks[1].upstream):
        assert (up.first_content_timeout, up.max_retries, up.retry_budget) == (0.5, 0, 1.5)
        assert (up.max_retry_after, up.key_cooldown, up.target_cooldown) == (2, 30, 1)
        assert up.continuation == "off"


def test_flags_configure_a_key_pool_and_the_environment_knobs() -> None:
    flags = ["--upstream-protocol", "openai_chat_completions", "--api-key-env", "A, B"]
    env = {
        "PROXAI_UPSTREAM_URL": "http://127.0.0.1:9/v1",
        "A": "sk-a",
        "B": "sk-b",
        "PROXAI_MAX_RETRIES": "4",
    }
    app, _ = app_from(flags, env)
    (route,) = app.router.routes
    assert route.upstream.keys == ("sk-a", "sk-b") and route.upstream.max_retries == 4
    with pytest.raises(cfg.ConfigError, match=r"\$B is not set"):
        app_from(flags, {**env, "B": ""})


def test_defaults_need_no_option(tmp_path: Path) -> None:
    text = '[[upstreams]]\nname="a"\nprotocol="openai_chat_completions"\nbase_url="http://x/v1"\n'
    app, _ = app_from(["--config", write(tmp_path, text)])
    up = app.router.routes[0].upstream
    assert (up.max_retries, up.continuation, up.first_content_timeout) == (2, None, 10.0)


UP = '[[upstreams]]\nname="a"\nprotocol="openai_chat_completions"\nbase_url="http://x/v1"\n'
ROUTE = '[[routes]]\nmodel="*"\nupstream="a"\n'


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        (UP + ROUTE + 'fallbacks=[{upstream="ghost"}]', "fallbacks[0]"),
        (UP + ROUTE + 'fallbacks=[{upstrem="a"}]', "upstrem"),
        (UP + "api_key_env = []", "upstreams[0].api_key_env"),
        (UP + 'api_key_env = ["A", "A"]', "twice"),
        (UP + "api_key_env = [1]", "upstreams[0].api_key_env"),
        (UP + 'continuation = "maybe"', "continuation"),
        (UP + "max_retries = -1", "max_retries"),
        (UP + "first_content_timeout = 'soon'", "first_content_timeout"),
        (UP + "key_index = 1", "key_index"),
    ],
)
def test_invalid_failover_configuration_names_the_bad_key(
    tmp_path: Path, toml: str, needle: str
) -> None:
    with pytest.raises(cfg.ConfigError) as info:
        app_from(["--config", write(tmp_path, toml)], {"A": "k"})
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("name", "raw"),
    [("PROXAI_MAX_RETRIES", "many"), ("PROXAI_CONTINUATION", "sometimes")],
)
def test_an_invalid_environment_knob_names_the_variable(name: str, raw: str) -> None:
    env = {"PROXAI_UPSTREAM_URL": "http://127.0.0.1:9/v1", name: raw}
    with pytest.raises(cfg.ConfigError, match=name):
        app_from(["--upstream-protocol", "openai_chat_completions"], env)


def test_help_documents_pools_fallbacks_and_the_knobs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "proxai_asgi", "--help"], capture_output=True, text=True, timeout=30
    ).stdout
    for needle in ("fallbacks = [", 'api_key_env = ["VAR1", "VAR2"]', "$PROXAI_MAX_RETRIES"):
        assert needle in out
    assert "VAR1,VAR2" in out
