"""The real Claude Code, Codex and Gemini CLIs through the middleware, offline.

Each test runs one CLI as a subprocess against the middleware (uvicorn on 127.0.0.1),
in front of a scripted fake model speaking another protocol (tests/helpers/
scripted_model.py). The model calls the CLI's shell tool; the CLI really runs the
command (it writes a file and prints a marker); the model then quotes the tool output
and the test checks the CLI's final answer and the file. Everything the CLI sent and
received is recorded and shown when a test fails.

The CLIs come from ``scripts/install-clients.sh`` (into ``.clients/``). Without them the
tests skip, except under ``CI=true`` where a missing CLI is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi.codec import ProtocolName
from proxai_asgi.transport.upstream import Receive, Scope, Send
from tests.helpers.scripted_model import (
    FINAL_PREFIX,
    Recorded,
    Recorder,
    ScriptedModel,
    transcript,
)
from tests.helpers.servers import Server, serve

REPO = Path(__file__).resolve().parents[2]
CLIENTS_BIN = REPO / ".clients" / "node_modules" / ".bin"
CLI_TIMEOUT = 45.0  # seconds per CLI run; a healthy run takes one or two
MARKER = "proxai-e2e-ok"
# Prints the marker without containing it, so only a real run can produce it.
COMMAND = "printf 'proxai-%s-ok\\n' e2e | tee ran.txt"
PATCH_MARKER = "proxai-patch-ok"
PATCH = f"*** Begin Patch\n*** Add File: patched.txt\n+{PATCH_MARKER}\n*** End Patch\n"

CHAT: ProtocolName = "openai_chat_completions"
RESPONSES: ProtocolName = "openai_responses"
ANTHROPIC: ProtocolName = "anthropic_messages"
GEMINI: ProtocolName = "gemini_generate_content"


def cli(name: str) -> str:
    path = Path(os.environ.get(f"PROXAI_E2E_{name.upper()}") or CLIENTS_BIN / name)
    if not os.access(path, os.X_OK):
        why = f"{name} is not installed at {path} (run scripts/install-clients.sh)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)
    return str(path)


# ------------------------------------------------------------------ the stack


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    """The app the middleware wraps over HTTP: anything the CLI calls that the middleware
    does not serve lands here, as a 404 the recorder shows."""
    if scope["type"] != "http":
        return
    body = b'{"type":"error","error":{"type":"not_found_error","message":"not found"}}'
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 404, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# The proxy retries, fails over and continues cut answers by itself; these options
# leave a failure to the client instead, to test the client's own recovery from it
# (what a client sees when the proxy has nothing left to try).
PASS_FAILURES_ON: dict[str, Any] = {"max_retries": 0, "continuation": "off"}


@contextlib.contextmanager
def middleware_for(
    model: ScriptedModel,
    transport: str,
    *,
    websockets: bool = False,
    server: Server = "asyncio",
    upstream_options: dict[str, Any] | None = None,
    **options: Any,
) -> Iterator[tuple[str, Recorder]]:
    """The middleware in front of ``model``; yields its URL and the client recorder.

    ``http``: the model on its own loopback server, reached with httpx.
    ``inner``: the model is the wrapped app (``Upstream.inner_app``), no network hop.
    ``websockets``: the server also accepts WebSocket upgrades; ``server``: the
    middleware's uvicorn on asyncio with h11 or on uvloop with httptools; ``options`` go
    to ``ProxaiMiddleware``, ``upstream_options`` to the ``Upstream``.
    """
    up_options = upstream_options or {}
    if transport == "inner":
        inner = Upstream.inner_app(model.protocol, **up_options)
        recorder = Recorder(ProxaiMiddleware(model, upstream=inner, **options))
        with serve(recorder, websockets=websockets, server=server) as url:
            yield url, recorder
        return
    with serve(model) as upstream_url:
        # Anthropic and Google base URLs carry no version; OpenAI's do.
        base = upstream_url if model.protocol in (ANTHROPIC, GEMINI) else upstream_url + "/v1"
        upstream = Upstream(model.protocol, base, "sk-upstream-key", **up_options)
        recorder = Recorder(ProxaiMiddleware(_not_found, upstream=upstream, **options))
        with serve(recorder, websockets=websockets, server=server) as url:
            yield url, recorder


# ------------------------------------------------------------------- running


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    work: Path


def base_env(home: Path) -> dict[str, str]:
    """A clean environment: no inherited keys, proxies or user config."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_PROXY": "127.0.0.1,localhost",
    }


def run_cli(argv: list[str], env: dict[str, str], work: Path) -> Run:
    """Run a CLI in its own process group; on timeout the whole group is killed."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=CLI_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{argv[0]} timed out after {CLI_TIMEOUT}s\nstdout: {out}\nstderr: {err}")
    finally:
        if proc.poll() is None:  # interrupted (pytest timeout, ^C): leave nothing behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return Run(proc.returncode, out, err, time.monotonic() - t0, work)


def workdirs(tmp_path: Path) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return home, work


CLAUDE_PROMPT = "Print the e2e marker with Bash, then tell me what it printed."


def run_claude(
    url: str,
    tmp_path: Path,
    *,
    prompt: str = CLAUDE_PROMPT,
    tools: str = "Bash",
    output_format: str = "json",
) -> Run:
    """Claude Code, print mode; ``output_format="stream-json"`` prints every message
    and tool result as a JSON line (with ``--verbose``)."""
    home, work = workdirs(tmp_path)
    env = base_env(home) | {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "dummy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    argv = [cli("claude"), "-p", prompt, "--output-format", output_format, "--allowedTools", tools]
    if output_format == "stream-json":
        argv.append("--verbose")
    return run_cli(argv, env, work)


CODEX_PROMPT = "Add patched.txt with apply_patch, then print the e2e marker and report it."


def run_codex(
    url: str,
    tmp_path: Path,
    *,
    stream_retries: int = 0,
    builtin: bool = False,
    compact_limit: int | None = None,
    web_search: str | None = None,
    prompt: str = CODEX_PROMPT,
) -> Run:
    """Codex against ``url``: through a custom provider (HTTP only), or with
    ``builtin=True`` as its built-in OpenAI provider at ``openai_base_url``, which
    talks the Responses WebSocket first and falls back to HTTP. ``compact_limit``
    sets ``model_auto_compact_token_limit`` (the built-in provider compacts remotely);
    ``web_search`` sets its ``web_search`` mode ("live": the hosted tool, searching)."""
    home, work = workdirs(tmp_path)
    codex_home = home / ".codex"
    codex_home.mkdir()
    provider = f"""
model_provider = "proxai"

[model_providers.proxai]
name = "proxai e2e"
base_url = "{url}/v1"
env_key = "PROXAI_E2E_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = {stream_retries}
"""
    if builtin:
        provider = f'openai_base_url = "{url}/v1"\n'
    if compact_limit is not None:
        provider = f"model_auto_compact_token_limit = {compact_limit}\n" + provider
    if web_search is not None:
        provider = f'web_search = "{web_search}"\n' + provider

    # A model Codex knows, so it sends what it sends real models (reasoning effort,
    # text.verbosity, the freeform apply_patch tool). Retries off unless asked: a
    # broken stream must fail the test, not be papered over by a retry.
    # danger-full-access: the commands are the scripted model's own, and the
    # workspace-write sandbox needs kernel features CI containers may not allow.
    # The [features] and update settings keep Codex off the network (no plugin,
    # app or update look-ups); only the loopback provider is contacted.
    (codex_home / "config.toml").write_text(
        f"""
model = "gpt-5.5"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
{provider}
[features]
plugins = false
remote_plugin = false
apps = false
in_app_updates = false

[analytics]
enabled = false
"""
    )
    env = base_env(home) | {"CODEX_HOME": str(codex_home), "PROXAI_E2E_KEY": "dummy"}
    if builtin:
        env["OPENAI_API_KEY"] = "dummy"
    argv = [cli("codex"), "exec", "--skip-git-repo-check", "--json"]
    return run_cli([*argv, prompt], env, work)


GEMINI_PROMPT = "Print the e2e marker with the shell tool, then tell me what it printed."


def run_gemini(url: str, tmp_path: Path, *, prompt: str = GEMINI_PROMPT) -> Run:
    """Gemini CLI, headless, with an API key and the base URL of the middleware
    (DESIGN.md: what the real clients send)."""
    home, work = workdirs(tmp_path)
    settings = home / ".gemini"
    settings.mkdir()
    (settings / "settings.json").write_text(
        json.dumps(
            {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": False},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            }
        )
    )
    env = base_env(home) | {
        "GEMINI_API_KEY": "dummy",
        "GOOGLE_GEMINI_BASE_URL": url,
        "GOOGLE_GENAI_API_VERSION": "v1beta",
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }
    argv = [cli("gemini"), "-m", "gemini-2.5-pro", "--yolo", "-o", "json"]
    argv += ["-p", prompt]
    return run_cli(argv, env, work)


# ----------------------------------------------------------------- checking


def explain(run: Run, recorder: Recorder, model: ScriptedModel) -> str:
    return (
        f"exit {run.returncode} after {run.seconds:.1f}s\n"
        f"stdout: {run.stdout[-3000:]}\nstderr: {run.stderr[-2000:]}\n"
        + transcript(recorder, model)
    )


def claude_result(run: Run, recorder: Recorder, model: ScriptedModel) -> dict[str, Any]:
    why = explain(run, recorder, model)
    assert run.returncode == 0, why
    result: dict[str, Any] = json.loads(run.stdout)
    assert result.get("is_error") is False and result.get("subtype") == "success", why
    assert FINAL_PREFIX + MARKER in result["result"], why
    assert (run.work / "ran.txt").read_text().strip() == MARKER, why
    assert not model.problems, why
    return result


def gemini_result(run: Run, recorder: Recorder, model: ScriptedModel) -> dict[str, Any]:
    why = explain(run, recorder, model)
    assert run.returncode == 0, why
    result: dict[str, Any] = json.loads(run.stdout[run.stdout.index("{") :])
    # Gemini CLI wraps a command's output ("Output: <stdout>" and its process group)
    answer = result["response"]
    assert answer.startswith(FINAL_PREFIX) and f"Output: {MARKER}" in answer, why
    assert (run.work / "ran.txt").read_text().strip() == MARKER, why
    assert not model.problems, why
    return result


def llm_calls(recorder: Recorder) -> list[Recorded]:
    return [
        r
        for r in recorder.seen
        if r.method == "POST"
        and r.path.endswith(
            ("/messages", "/responses", ":streamGenerateContent", ":generateContent")
        )
    ]


def assert_all_streamed(recorder: Recorder, why: str) -> None:
    """Every model call was streamed and answered with a stream: nothing was rescued by
    Claude Code's silent non-streaming fallback."""
    for r in llm_calls(recorder):
        assert r.json().get("stream") is True, f"{r.line()} was not streamed\n{why}"
        assert r.response_headers.get("content-type", "").startswith("text/event-stream"), why


def codex_events(run: Run, recorder: Recorder, model: ScriptedModel) -> list[dict[str, Any]]:
    why = explain(run, recorder, model)
    assert run.returncode == 0, why
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    kinds = [e["type"] for e in events]
    assert "turn.completed" in kinds and "turn.failed" not in kinds, why
    items = [e["item"] for e in events if e["type"] == "item.completed"]
    commands = [i for i in items if i["type"] == "command_execution"]
    assert any(i["exit_code"] == 0 and MARKER in i["aggregated_output"] for i in commands), why
    messages = [i["text"] for i in items if i["type"] == "agent_message"]
    assert messages and FINAL_PREFIX in messages[-1] and MARKER in messages[-1], why
    assert (run.work / "ran.txt").read_text().strip() == MARKER, why
    patched = run.work / "patched.txt"
    assert patched.exists() and patched.read_text().strip() == PATCH_MARKER, why
    assert not model.problems, why
    return events


# -------------------------------------------------------------------- tests

# (upstream protocol, transport, reasoning). The same-protocol case is the control:
# pass-through, so a failure there is the scripted model's, not a translator's.
CLAUDE_CASES = [
    pytest.param(GEMINI, "http", True, id="gemini-http-reasoning"),
    pytest.param(GEMINI, "inner", False, id="gemini-inner"),
    pytest.param(CHAT, "http", False, id="chat-http"),
    pytest.param(RESPONSES, "http", False, id="responses-http"),
    pytest.param(CHAT, "inner", True, id="chat-inner-reasoning"),
    pytest.param(RESPONSES, "inner", True, id="responses-inner-reasoning"),
    pytest.param(ANTHROPIC, "http", True, id="anthropic-passthrough-reasoning"),
]
CODEX_CASES = [
    pytest.param(GEMINI, "http", True, id="gemini-http-reasoning"),
    pytest.param(GEMINI, "inner", False, id="gemini-inner"),
    pytest.param(ANTHROPIC, "http", False, id="anthropic-http"),
    pytest.param(CHAT, "http", False, id="chat-http"),
    pytest.param(ANTHROPIC, "inner", True, id="anthropic-inner-reasoning"),
    pytest.param(CHAT, "inner", True, id="chat-inner-reasoning"),
    pytest.param(RESPONSES, "http", True, id="responses-passthrough-reasoning"),
]


@pytest.mark.parametrize(("upstream", "transport", "reasoning"), CLAUDE_CASES)
def test_claude_code_runs_bash_through_the_middleware(
    tmp_path: Path, upstream: ProtocolName, transport: str, reasoning: bool
) -> None:
    model = ScriptedModel(upstream, COMMAND, reasoning=reasoning)
    with middleware_for(model, transport) as (url, recorder):
        run = run_claude(url, tmp_path)
    claude_result(run, recorder, model)
    assert_all_streamed(recorder, explain(run, recorder, model))
    assert len(llm_calls(recorder)) >= 2  # the tool call, then the final answer


@pytest.mark.parametrize(("upstream", "transport", "reasoning"), CODEX_CASES)
def test_codex_patches_and_runs_a_command_through_the_middleware(
    tmp_path: Path, upstream: ProtocolName, transport: str, reasoning: bool
) -> None:
    model = ScriptedModel(
        upstream, COMMAND, pre_steps=[("apply_patch", {"input": PATCH})], reasoning=reasoning
    )
    with middleware_for(model, transport) as (url, recorder):
        run = run_codex(url, tmp_path)
    codex_events(run, recorder, model)
    assert len(llm_calls(recorder)) == 3, explain(run, recorder, model)


GEMINI_CASES = [
    pytest.param(CHAT, "http", False, id="chat-http"),
    pytest.param(ANTHROPIC, "http", True, id="anthropic-http-reasoning"),
    pytest.param(CHAT, "inner", True, id="chat-inner-reasoning"),
    pytest.param(ANTHROPIC, "inner", False, id="anthropic-inner"),
    pytest.param(RESPONSES, "http", True, id="responses-http-reasoning"),
    pytest.param(GEMINI, "http", True, id="gemini-passthrough-reasoning"),
]


@pytest.mark.parametrize(("upstream", "transport", "reasoning"), GEMINI_CASES)
def test_gemini_cli_runs_a_shell_command_through_the_middleware(
    tmp_path: Path, upstream: ProtocolName, transport: str, reasoning: bool
) -> None:
    model = ScriptedModel(upstream, COMMAND, reasoning=reasoning)
    with middleware_for(model, transport) as (url, recorder):
        run = run_gemini(url, tmp_path)
    gemini_result(run, recorder, model)
    calls = llm_calls(recorder)
    assert len(calls) >= 2, explain(run, recorder, model)  # the tool call, then the answer
    assert all(r.path.startswith("/v1beta/models/") for r in calls)


def test_claude_code_loads_a_deferred_tool_through_chat(tmp_path: Path) -> None:
    """ToolSearch answers with ``tool_reference`` blocks, which have no Chat shape; the
    loaded tool must still reach the upstream's tool list and the loop carry on."""
    search = ("ToolSearch", {"query": "select:WebFetch", "max_results": 5})
    model = ScriptedModel(CHAT, COMMAND, pre_steps=[search])
    with middleware_for(model, "http") as (url, recorder):
        run = run_claude(url, tmp_path)
    claude_result(run, recorder, model)
    last = model.exchanges[-1].decoded
    assert last is not None and "WebFetch" in {t.name for t in last.tools}


def test_claude_code_falls_back_to_json_after_a_broken_stream(tmp_path: Path) -> None:
    """A Chat stream cut before finish_reason reaches Claude Code as an Anthropic
    ``event: error``; it retries without streaming, which must work as well."""
    model = ScriptedModel(CHAT, COMMAND, break_streams=1)
    with middleware_for(model, "http", upstream_options=PASS_FAILURES_ON) as (url, recorder):
        run = run_claude(url, tmp_path)
    claude_result(run, recorder, model)
    why = explain(run, recorder, model)
    first, retry = llm_calls(recorder)[:2]
    assert b"event: error" in first.response, why
    assert b"message_stop" not in first.response, why
    assert retry.json()["stream"] is False, why
    assert json.loads(retry.response)["stop_reason"] == "tool_use", why


@pytest.mark.parametrize("transport", ["http", "inner"])
def test_claude_code_backs_off_after_a_rate_limit_and_completes(
    tmp_path: Path, transport: str
) -> None:
    """A Chat upstream's 429 (``retry-after-ms``, ``x-ratelimit-*``) reaches Claude
    Code with ``retry-after`` and ``anthropic-ratelimit-*``; it waits and retries."""
    model = ScriptedModel(CHAT, COMMAND, rate_limited=1)
    with middleware_for(model, transport, upstream_options=PASS_FAILURES_ON) as (url, recorder):
        run = run_claude(url, tmp_path)
    claude_result(run, recorder, model)
    why = explain(run, recorder, model)
    first, retry = llm_calls(recorder)[:2]
    assert b"rate_limit_error" in first.response, why
    assert first.status == 429, why
    assert first.response_headers["retry-after"] == "1", why
    assert first.response_headers["anthropic-ratelimit-requests-limit"] == "500", why
    assert first.response_headers["anthropic-ratelimit-requests-remaining"] == "0", why
    assert retry.json()["messages"] == first.json()["messages"], why
    assert model.exchanges[0].status == 429 and model.exchanges[1].status == 200, why


def test_codex_retries_after_a_broken_stream(tmp_path: Path) -> None:
    """A cut Anthropic stream reaches Codex as ``response.failed``; Codex retries the
    turn, and the conversation completes."""
    model = ScriptedModel(
        ANTHROPIC, COMMAND, pre_steps=[("apply_patch", {"input": PATCH})], break_streams=1
    )
    with middleware_for(model, "http", upstream_options=PASS_FAILURES_ON) as (url, recorder):
        run = run_codex(url, tmp_path, stream_retries=1)
    codex_events(run, recorder, model)
    first = llm_calls(recorder)[0].response
    assert b"event: response.failed" in first, explain(run, recorder, model)
    assert b"response.completed" not in first


def test_claude_code_with_an_upstream_that_writes_title_case_headers(tmp_path: Path) -> None:
    """Go's net/http (Ollama), Node and llama.cpp write ``Content-Type``; header names
    are case-insensitive, and the stream must be translated as a stream."""
    model = ScriptedModel(CHAT, COMMAND, title_case_headers=True)
    with middleware_for(model, "http") as (url, recorder):
        run = run_claude(url, tmp_path)
    claude_result(run, recorder, model)
    assert_all_streamed(recorder, explain(run, recorder, model))
    for r in llm_calls(recorder):
        assert b"event: error" not in r.response, explain(run, recorder, model)
