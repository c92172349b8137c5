"""What the real Claude Code, Codex and Gemini CLIs send names one session per
conversation (``routing.affinity.session_of``): every model call of one run (a tool
loop of two or three turns) gets the same session, and a second run another — from
their session headers, from their bodies alone, and from the prefix alone (the
explicit field taken out), so that each source holds on its own.

The CLIs run as in ``test_real_clients.py`` (skipped when they are not installed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proxai_asgi.codec import ProtocolName
from proxai_asgi.protocols import get_codec
from proxai_asgi.routing.affinity import session_of
from tests.e2e.test_real_clients import (
    CHAT,
    COMMAND,
    PATCH,
    Recorded,
    llm_calls,
    middleware_for,
    run_claude,
    run_codex,
    run_gemini,
)
from tests.helpers.scripted_model import ScriptedModel

# client -> (its protocol, how to run it, the body field that names its session)
CLIENTS: dict[str, tuple[ProtocolName, Any, str | None]] = {
    "claude": ("anthropic_messages", run_claude, "metadata"),
    "codex": ("openai_responses", run_codex, "prompt_cache_key"),
    "gemini": ("gemini_generate_content", run_gemini, None),
}


def _calls(client: str, tmp_path: Path) -> list[Recorded]:
    steps = [("apply_patch", {"input": PATCH})] if client == "codex" else []
    model = ScriptedModel(CHAT, COMMAND, pre_steps=steps)
    tmp_path.mkdir()
    with middleware_for(model, "inner") as (url, recorder):
        run = CLIENTS[client][1](url, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    calls = llm_calls(recorder)
    assert len(calls) >= 2, [r.line() for r in recorder.seen]  # a tool loop: two turns or more
    return calls


def _sessions(client: str, calls: list[Recorded]) -> dict[str, set[str | None]]:
    protocol, _, field = CLIENTS[client]
    codec = get_codec(protocol)
    out: dict[str, set[str | None]] = {"headers": set(), "body": set(), "prefix": set()}
    for call in calls:
        headers = [(k.encode(), v.encode()) for k, v in call.headers.items()]
        out["headers"].add(session_of(codec, headers, call.request, b"dummy"))
        out["body"].add(session_of(codec, [], call.request, b"dummy"))
        bare = json.loads(call.request)
        bare.pop(field or "", None)
        out["prefix"].add(session_of(codec, [], json.dumps(bare).encode(), b"dummy"))
    return out


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_real_clients_turns_share_a_session_and_its_runs_do_not(
    client: str, tmp_path: Path
) -> None:
    first = _sessions(client, _calls(client, tmp_path / "one"))
    second = _sessions(client, _calls(client, tmp_path / "two"))
    for source in first:
        assert len(first[source]) == 1 and None not in first[source], source
        assert len(second[source]) == 1, source
        assert first[source] != second[source], source
    if client != "gemini":  # Gemini CLI sends no session header: its body names it
        assert first["headers"] != first["body"] != first["prefix"]
