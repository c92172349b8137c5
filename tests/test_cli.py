"""The standalone server: flags, environment, TOML, and the offline demo upstream."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from proxai_asgi.server import config as cfg
from proxai_asgi.server.cli import build_app, build_parser
from tests.helpers.servers import serve


def app_from(argv: list[str], env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return build_app(build_parser().parse_args(argv), env or {})


def test_help_explains_the_flags_and_the_demo() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "proxai_asgi", "--help"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0
    for flag in (
        "--config",
        "--upstream-url",
        "--upstream-protocol",
        "--api-key-env",
        "--demo-protocol",
    ):
        assert flag in out.stdout
    assert "demo upstream" in out.stdout


@pytest.mark.parametrize(
    "demo",
    [
        "openai_chat_completions",
        "openai_responses",
        "anthropic_messages",
        "gemini_generate_content",
    ],
)
def test_demo_proxy_answers_all_four_sdks_offline(demo: str) -> None:
    app, _ = app_from(["--demo-protocol", demo])
    with serve(app) as base:
        g = genai.Client(api_key="none", http_options=genai_types.HttpOptions(base_url=base))
        streamed = g.models.generate_content_stream(model="demo", contents="hey there")
        assert "".join(r.text or "" for r in streamed) == "You said: hey there"
        o = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        chat = o.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "hello"}]
        )
        assert chat.choices[0].message.content == "You said: hello"
        with o.responses.stream(model="demo", input="hello there") as s:
            assert s.get_final_response().output_text == "You said: hello there"
        a = anthropic.Anthropic(base_url=base, api_key="none", max_retries=0)
        with a.messages.stream(
            model="demo", max_tokens=50, messages=[{"role": "user", "content": "hi you"}]
        ) as ms:
            assert ms.get_final_text() == "You said: hi you"


def test_demo_calls_a_declared_tool_and_reads_its_result() -> None:
    app, _ = app_from(["--demo-protocol", "anthropic_messages"])
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    with serve(app) as base:
        o = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        msgs: list[dict[str, object]] = [{"role": "user", "content": 'call lookup {"q": "x"}'}]
        first = o.chat.completions.create(model="demo", messages=msgs, tools=tools)  # type: ignore[arg-type]
        (call,) = first.choices[0].message.tool_calls or []
        assert call.function.name == "lookup" and json.loads(call.function.arguments) == {"q": "x"}
        assert first.choices[0].finish_reason == "tool_calls"
        msgs += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "42"},
        ]
        second = o.chat.completions.create(model="demo", messages=msgs, tools=tools)  # type: ignore[arg-type]
        assert second.choices[0].message.content == "Tool lookup returned: 42"


def test_flags_and_environment_configure_one_upstream() -> None:
    app, server = app_from(
        [
            "--upstream-protocol",
            "anthropic_messages",
            "--port",
            "9999",
            "--model-rewrite",
            "claude-x",
        ],
        {"PROXAI_UPSTREAM_URL": "https://example.invalid", "PROXAI_API_KEY": "sk-ant-env"},
    )
    (route,) = app.router.routes
    assert route.model_rewrite == "claude-x"
    assert route.upstream.url == "https://example.invalid/v1/messages"
    assert route.upstream.api_key == "sk-ant-env"
    assert server.port == 9999


def test_standalone_server_uses_the_lean_pool_unless_told_httpx(tmp_path: Path) -> None:
    flags = ["--upstream-protocol", "openai_chat_completions"]
    env = {"PROXAI_UPSTREAM_URL": "http://127.0.0.1:9/v1"}
    assert app_from(flags, env)[0].lean is not None
    assert app_from([*flags, "--httpx"], env)[0].lean is None
    path = tmp_path / "proxai.toml"
    path.write_text("[server]\nlean_http = false\n")
    app, server = app_from(["--config", str(path), *flags], env)
    assert server.lean_http is False and app.lean is None


def test_the_responses_websocket_can_be_turned_off(tmp_path: Path) -> None:
    flags = ["--upstream-protocol", "openai_chat_completions"]
    env = {"PROXAI_UPSTREAM_URL": "http://127.0.0.1:9/v1"}
    assert app_from(flags, env)[0].responses_websocket is True
    assert app_from([*flags, "--no-websocket"], env)[0].responses_websocket is False
    path = tmp_path / "proxai.toml"
    path.write_text("[server]\nresponses_websocket = false\n")
    assert app_from(["--config", str(path), *flags], env)[0].responses_websocket is False


def test_toml_config_builds_routes_with_keys_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "proxai.toml"
    path.write_text(
        """
[server]
port = 8181
prefix = "/llm"

[[upstreams]]
name = "claude"
protocol = "anthropic_messages"
base_url = "https://api.anthropic.com/v1"
api_key_env = "MY_KEY"
default_max_tokens = 1024

[[upstreams]]
name = "vllm"
protocol = "openai_chat_completions"
base_url = "http://127.0.0.1:8000/v1"

[[routes]]
model = "claude-*"
upstream = "claude"

[[routes]]
model = "*"
upstream = "vllm"
model_rewrite = "Qwen/Qwen3-8B"
"""
    )
    app, server = app_from(["--config", str(path)], {"MY_KEY": "sk-ant-1"})
    assert server.port == 8181 and app.prefix == "/llm"
    claude, vllm = app.router.routes
    assert claude.upstream.api_key == "sk-ant-1" and claude.upstream.default_max_tokens == 1024
    # An Anthropic base_url given with its version still reaches /v1/messages once.
    assert claude.upstream.url == "https://api.anthropic.com/v1/messages"
    assert vllm.upstream.url == "http://127.0.0.1:8000/v1/chat/completions"
    assert app.router.select("claude-sonnet-4-5") is claude
    assert app.router.select("gpt-4o") is vllm


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        (
            '[[upstreams]]\nname="a"\nprotocol="openai_chat_completions"\nbase_url="http://x"\nprotocl=1',
            "protocl",
        ),
        ('[[upstreams]]\nname="a"\nprotocol="nope"\nbase_url="http://x"', "protocol"),
        (
            '[[upstreams]]\nname="a"\nprotocol="openai_responses"\nbase_url="http://x"\napi_key="sk"',
            "upstreams[0].api_key",
        ),
        ('[[routes]]\nmodel="*"\nupstream="ghost"', "routes[0].upstream"),
        ("[server]\nport = 'eighty'", "port"),
    ],
)
def test_invalid_configuration_names_the_bad_key(tmp_path: Path, toml: str, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(toml)
    with pytest.raises(cfg.ConfigError, match=None) as info:
        app_from(["--config", str(path)])
    assert needle in str(info.value)


def test_missing_key_variable_is_a_start_up_error(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[[upstreams]]\nname="a"\nprotocol="anthropic_messages"\nbase_url="http://x"\napi_key_env="NOPE"'
    )
    with pytest.raises(cfg.ConfigError, match="NOPE"):
        app_from(["--config", str(path)])


def test_access_log_lines_never_show_a_query_key() -> None:
    from proxai_asgi.server.cli import RedactQueryKeys

    line = '%s - "%s %s HTTP/%s" %d'
    path = "/v1beta/models/m:streamGenerateContent?key=AIzaSECRET&alt=sse"
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, "", 0, line, ("127.0.0.1:5", "POST", path, "1.1", 200), None
    )
    assert RedactQueryKeys().filter(record)
    message = record.getMessage()
    assert "AIzaSECRET" not in message
    assert "?key=[redacted]&alt=sse" in message


def test_the_response_store_comes_from_flags_environment_or_toml(tmp_path: Path) -> None:
    from proxai_asgi.store import MemoryStore
    from proxai_asgi.store.redis import RedisStore
    from proxai_asgi.store.sqlite import SQLiteStore

    flags = ["--upstream-protocol", "openai_chat_completions"]
    env = {"PROXAI_UPSTREAM_URL": "http://127.0.0.1:9/v1"}
    default = app_from(flags, env)[0].stored.store
    assert isinstance(default, MemoryStore) and default.max_entries == 10_000
    db = tmp_path / "responses.db"
    by_flag = app_from([*flags, "--store", f"sqlite:///{db}"], env)[0].stored.store
    assert isinstance(by_flag, SQLiteStore) and by_flag.path == str(db)
    by_env = app_from(flags, {**env, "PROXAI_STORE": "redis://127.0.0.1:1/2"})[0].stored.store
    assert isinstance(by_env, RedisStore)
    assert app_from(flags, {**env, "PROXAI_STORE": "off"})[0].stored.store is None
    path = tmp_path / "proxai.toml"
    path.write_text(
        '[store]\nurl = "memory"\nttl = 60\nmax_entries = 5\nmax_bytes = 1000\n'
        'secret_env = "FLEET_SECRET"\n'
    )
    app, _ = app_from(["--config", str(path), *flags], {**env, "FLEET_SECRET": "s3"})
    store = app.stored.store
    assert isinstance(store, MemoryStore)
    assert (store.ttl, store.max_entries, store.max_bytes) == (60, 5, 1000)
    assert app.stored.owners.key == b"s3"  # the owner hash key, from the named variable
    with pytest.raises(cfg.ConfigError, match="FLEET_SECRET"):
        app_from(["--config", str(path), *flags], env)
    path.write_text('[store]\nurl = "postgres://db"\n')
    with pytest.raises(cfg.ConfigError, match=r"store\.url"):
        app_from(["--config", str(path), *flags], env)


def test_the_cli_sqlite_store_keeps_conversations_over_a_restart_without_a_secret(
    tmp_path: Path,
) -> None:
    """No PROXAI_STORE_SECRET: the owner key is kept in the SQLite file, so a restarted
    server continues a client's conversation, and another key still cannot."""
    argv = ["--store", f"sqlite:///{tmp_path / 'responses.db'}"]
    with serve(app_from(argv)[0]) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
        first = client.responses.create(model="demo", input="remember 4711")
    with serve(app_from(argv)[0]) as url:  # the restarted server
        other = openai.OpenAI(base_url=url + "/v1", api_key="sk-other", max_retries=0)
        with pytest.raises(openai.NotFoundError):
            other.responses.retrieve(first.id)
        with pytest.raises(openai.BadRequestError):
            other.responses.create(model="demo", input="steal", previous_response_id=first.id)
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
        second = client.responses.create(
            model="demo", input="what was it?", previous_response_id=first.id
        )
        assert client.responses.retrieve(first.id).id == first.id
    assert second.previous_response_id == first.id
