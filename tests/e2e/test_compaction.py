"""Codex compaction over upstreams that have none (Chat, Anthropic).

The ``openai`` SDK's ``responses.compact`` and an inline ``compaction_trigger`` against
the middleware (uvicorn on 127.0.0.1) in front of a scripted model: the model is asked
for a summary, the client gets a ``compaction`` item carrying it, and when the item
comes back the model reads the summary. Then the real Codex CLI (built-in provider,
over the WebSocket) compacts mid-turn and finishes from the summary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from proxai_asgi.responses_state.compaction import SUMMARY_HEADER, SUMMARY_PROMPT
from tests.e2e.test_real_clients import (
    ANTHROPIC,
    CHAT,
    COMMAND,
    MARKER,
    explain,
    middleware_for,
    run_codex,
)
from tests.helpers.scripted_model import FINAL_PREFIX, ScriptedModel

SUMMARY_MARK = "SUMMARY-OF:"
CASES = [
    pytest.param(CHAT, "http", id="chat-http"),
    pytest.param(CHAT, "inner", id="chat-inner"),
    pytest.param(ANTHROPIC, "http", id="anthropic-http"),
    pytest.param(ANTHROPIC, "inner", id="anthropic-inner"),
]


def _texts(request: c.Request) -> list[str]:
    out: list[str] = []
    for m in request.messages:
        for p in m.content:
            if isinstance(p, c.Text):
                out.append(p.text)
            elif isinstance(p, c.ToolResult):
                out += [q.text for q in p.content if isinstance(q, c.Text)]
    return out


@dataclass
class CompactingModel(ScriptedModel):
    """The scripted model, which also summarises when asked to (quoting the last
    thing it was told) and, given a summary, answers from it alone. Small usage on
    those answers, so a client with a tiny compaction limit compacts only once."""

    def answer(self, request: c.Request, n: int) -> c.Response:
        texts = _texts(request)
        small = c.Usage(input_tokens=10, output_tokens=5)
        if texts and texts[-1] == SUMMARY_PROMPT:
            said = texts[-2].strip().splitlines()[-1]
            reply = f"{SUMMARY_MARK} {said}"
        elif summaries := [t for t in texts if t.startswith(SUMMARY_HEADER)]:
            reply = FINAL_PREFIX + summaries[-1].split(SUMMARY_MARK, 1)[1].strip()
        else:
            return super().answer(request, n)
        content: list[c.Part] = [c.Text(text=reply)]
        return c.Response(id=f"scripted{n:04d}", model=request.model, content=content, usage=small)


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


HISTORY = [user("remember the word tangerine"), assistant("Noted."), user("the code is 4711")]


@pytest.mark.parametrize(("upstream", "transport"), CASES)
def test_compact_endpoint_round_trips_through_the_sdk(
    upstream: ProtocolName, transport: str
) -> None:
    model = CompactingModel(upstream, COMMAND)
    with middleware_for(model, transport) as (url, _):
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
        compacted = client.responses.compact(model="gpt-5.5", input=HISTORY)  # type: ignore[arg-type]
        # (The SDK types these as output items; the user messages are input-shaped.)
        output = [i.model_dump(exclude_none=True, warnings=False) for i in compacted.output]
        answer = client.responses.create(
            model="gpt-5.5", input=[*output, user("what was the code?")]
        )
    # The summary call: the whole history, then our request for a summary, no tools.
    asked = model.exchanges[0].decoded
    assert asked is not None and not asked.stream
    assert _texts(asked) == [
        "remember the word tangerine",
        "Noted.",
        "the code is 4711",
        SUMMARY_PROMPT,
    ]
    # The client's new history: its own messages, then one compaction item.
    assert [i["type"] for i in output] == ["message", "message", "compaction"]
    assert [i["role"] for i in output[:2]] == ["user", "user"]
    assert output[-1]["encrypted_content"].startswith("proxai1.")
    assert SUMMARY_MARK not in json.dumps(output)  # opaque to the client
    # Replayed, the item is the summary again, as text the upstream reads.
    replayed = model.exchanges[1].decoded
    assert replayed is not None
    texts = _texts(replayed)
    assert texts[2] == f"{SUMMARY_HEADER}{SUMMARY_MARK} the code is 4711"
    assert texts[-1] == "what was the code?"
    assert answer.output_text == FINAL_PREFIX + "the code is 4711"


@pytest.mark.parametrize(("upstream", "transport"), CASES[::3])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_compaction_trigger_is_answered_with_one_compaction_item(
    upstream: ProtocolName, transport: str, stream: bool
) -> None:
    model = CompactingModel(upstream, COMMAND)
    trigger = [*HISTORY, {"type": "compaction_trigger"}]
    with middleware_for(model, transport) as (url, recorder):
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
        if stream:
            with client.responses.stream(model="gpt-5.5", input=trigger) as events:  # type: ignore[arg-type]
                kinds = [e.type for e in events]
                response = events.get_final_response()
            assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
            assert "response.output_item.done" in kinds
        else:
            response = client.responses.create(model="gpt-5.5", input=trigger)  # type: ignore[arg-type]
    why = explain_http(recorder)
    assert response.status == "completed", why
    (item,) = response.output
    assert item.type == "compaction", why
    assert len(model.exchanges) == 1 and not model.exchanges[0].decoded.stream  # type: ignore[union-attr]
    assert _texts(model.exchanges[0].decoded)[-1] == SUMMARY_PROMPT  # type: ignore[arg-type]
    assert response.usage is not None and response.usage.output_tokens == 5


def explain_http(recorder: Any) -> str:
    return "\n".join(f"{r.line()} {bytes(r.response)[:1500]!r}" for r in recorder.seen)


def test_a_foreign_compaction_item_is_left_to_the_decoder() -> None:
    """A real OpenAI compaction item cannot be read here: dropped and reported, not
    mistaken for ours."""
    model = CompactingModel(CHAT, COMMAND)
    foreign = {"type": "compaction", "encrypted_content": "gAAAA-openai-opaque"}
    with middleware_for(model, "http") as (url, _):
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
        raw = client.responses.with_raw_response.create(
            model="gpt-5.5",
            input=[foreign, user("hi")],  # type: ignore[list-item]
        )
    assert "input.compaction" in raw.headers.get("x-proxai-dropped-fields", "")
    assert _texts(model.exchanges[0].decoded) == ["hi"]  # type: ignore[arg-type]


def test_the_summary_call_failing_is_the_clients_error() -> None:
    """The upstream refusing the summary call: its status, in the Responses shape."""
    model = CompactingModel(CHAT, COMMAND)
    with middleware_for(model, "http") as (url, _):
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
        with pytest.raises(openai.BadRequestError) as info:
            client.responses.compact(model="gpt-5.5", input=[{"role": "robot", "content": "x"}])  # type: ignore[list-item]
    assert info.value.status_code == 400
    assert model.exchanges == []


# ------------------------------------------------------------- the real Codex


@pytest.mark.parametrize("upstream", [CHAT, ANTHROPIC])
def test_codex_compacts_mid_turn_and_finishes_from_the_summary(
    tmp_path: Path, upstream: ProtocolName
) -> None:
    """A tiny auto-compaction limit: after the shell call, Codex asks for a compaction
    (``compaction_trigger`` over its WebSocket), replaces its history with our item and
    samples again; the model answers from the summary the item carried back."""
    model = CompactingModel(upstream, COMMAND)
    with middleware_for(model, "http", websockets=True) as (url, recorder):
        run = run_codex(url, tmp_path, builtin=True, compact_limit=50)
    why = explain(run, recorder, model)
    assert run.returncode == 0, why
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert "turn.completed" in [e["type"] for e in events], why
    items = [e["item"] for e in events if e["type"] == "item.completed"]
    commands = [i for i in items if i["type"] == "command_execution"]
    assert any(MARKER in i["aggregated_output"] for i in commands), why
    messages = [i["text"] for i in items if i["type"] == "agent_message"]
    assert messages[-1] == FINAL_PREFIX + MARKER, why
    # The upstream: the shell call, the summary call, the answer from the summary.
    asked = [x.decoded for x in model.exchanges]
    assert len(asked) == 3, why
    assert _texts(asked[1])[-1] == SUMMARY_PROMPT, why  # type: ignore[arg-type]
    final = _texts(asked[2])  # type: ignore[arg-type]
    assert any(t == f"{SUMMARY_HEADER}{SUMMARY_MARK} {MARKER}" for t in final), why
    assert [r.method for r in recorder.seen] == ["WS"], why
