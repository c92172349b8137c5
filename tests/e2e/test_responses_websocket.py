"""The Responses WebSocket transport (what Codex's built-in OpenAI provider speaks).

A real WebSocket client (the ``websockets`` package) against the middleware served by
uvicorn on 127.0.0.1, in front of a scripted Chat or Anthropic model (over HTTP and as
the wrapped app); then the real Codex CLI with its built-in provider pointed at the
proxy: the whole shell-tool loop over the socket, and the HTTP fallback after a 426.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from proxai_asgi import ProxaiMiddleware, Upstream
from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from tests.e2e.test_real_clients import (
    ANTHROPIC,
    CHAT,
    COMMAND,
    MARKER,
    PASS_FAILURES_ON,
    PATCH,
    _not_found,
    codex_events,
    explain,
    middleware_for,
    run_codex,
)
from tests.helpers.scripted_model import CALL_ID_PREFIX, FINAL_PREFIX, Recorder, ScriptedModel
from tests.helpers.servers import FakeUpstream, Reply, serve

EXEC_TOOL = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a shell command",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
CASES = [
    pytest.param(CHAT, "http", id="chat-http"),
    pytest.param(CHAT, "inner", id="chat-inner"),
    pytest.param(ANTHROPIC, "http", id="anthropic-http"),
    pytest.param(ANTHROPIC, "inner", id="anthropic-inner"),
]


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://", 1) + "/v1/responses"


def create(**fields: Any) -> str:
    body = {"type": "response.create", "model": "gpt-5.5", "store": False, "stream": True}
    return json.dumps(body | fields)


def answer(ws: ClientConnection) -> list[dict[str, Any]]:
    """The frames of one answer, up to its terminal event or wrapped error."""
    frames: list[dict[str, Any]] = []
    for _ in range(10_000):  # bounded: an answer is far shorter
        frame = json.loads(ws.recv(timeout=30))
        frames.append(frame)
        if frame["type"] in ("response.completed", "response.failed", "error"):
            return frames
    raise AssertionError(f"no terminal frame in {len(frames)} frames")


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


@pytest.fixture
def socket_for() -> Iterator[Any]:
    """Opens the middleware in front of a scripted model and a socket to it."""
    with ExitStack() as stack:

        def open_(
            model: ScriptedModel, transport: str, **options: Any
        ) -> tuple[ClientConnection, Recorder]:
            cm = middleware_for(model, transport, websockets=True, **options)
            url, recorder = stack.enter_context(cm)
            headers = {"Authorization": "Bearer sk-client", "OpenAI-Beta": "responses_websockets=1"}
            ws = connect(ws_url(url), additional_headers=headers, open_timeout=10)
            return stack.enter_context(ws), recorder

        yield open_


@pytest.mark.parametrize("server", ["asyncio", "uvloop"])
@pytest.mark.parametrize(("upstream", "transport"), CASES)
def test_a_tool_loop_chains_on_the_connection(
    socket_for: Any, upstream: ProtocolName, transport: str, server: str
) -> None:
    """Warm-up without the upstream, then a tool call and its result sent as only the
    new item with ``previous_response_id``: the upstream gets the whole conversation.
    On uvicorn's asyncio/h11 server and on its uvloop/httptools one."""
    model = ScriptedModel(upstream, COMMAND)
    ws, _ = socket_for(model, transport, server=server)

    ws.send(create(input=[user("print the marker")], tools=[EXEC_TOOL], generate=False))
    warm = answer(ws)
    assert [f["type"] for f in warm] == ["response.created", "response.completed"]
    assert warm[-1]["response"]["output"] == [] and model.exchanges == []

    ws.send(create(previous_response_id=warm[-1]["response"]["id"], input=[], tools=[EXEC_TOOL]))
    first = answer(ws)
    assert first[0]["type"] == "response.created" and first[-1]["type"] == "response.completed"
    calls = [i for i in first[-1]["response"]["output"] if i["type"] == "function_call"]
    assert [(i["name"], json.loads(i["arguments"])) for i in calls] == [
        ("exec_command", {"cmd": COMMAND})
    ]
    done = [f["item"] for f in first if f["type"] == "response.output_item.done"]
    assert done == first[-1]["response"]["output"]

    result = {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": MARKER}
    ws.send(
        create(previous_response_id=first[-1]["response"]["id"], input=[result], tools=[EXEC_TOOL])
    )
    second = answer(ws)
    assert second[-1]["type"] == "response.completed"
    text = second[-1]["response"]["output"][-1]["content"][0]["text"]
    assert text == FINAL_PREFIX + MARKER

    # Upstream side: the second call carried the user turn, the call and its result.
    assert len(model.exchanges) == 2
    last = model.exchanges[-1].decoded
    assert last is not None
    parts = [p for m in last.messages for p in m.content]
    assert any(isinstance(p, c.Text) and p.text == "print the marker" for p in parts)
    assert any(isinstance(p, c.ToolCall) and p.id.startswith(CALL_ID_PREFIX) for p in parts)
    assert any(isinstance(p, c.ToolResult) and p.call_id == calls[0]["call_id"] for p in parts)


@pytest.mark.parametrize(("upstream", "transport"), CASES[::3])
def test_errors_are_wrapped_error_frames_and_the_connection_lives_on(
    socket_for: Any, upstream: ProtocolName, transport: str
) -> None:
    model = ScriptedModel(upstream, COMMAND)
    ws, _ = socket_for(model, transport)

    ws.send(create(previous_response_id="resp_unknown", input=[user("hi")]))
    (frame,) = answer(ws)
    assert frame["type"] == "error" and frame["status"] == 400
    assert frame["error"]["code"] == "previous_response_not_found"
    assert frame["error"]["param"] == "previous_response_id"

    ws.send("{not json")
    (frame,) = answer(ws)
    assert frame["status"] == 400 and frame["error"]["type"] == "invalid_request_error"

    ws.send(json.dumps({"type": "response.cancel"}))
    (frame,) = answer(ws)
    assert frame["status"] == 400 and frame["error"]["param"] == "type"

    ws.send(b"\x00binary")
    (frame,) = answer(ws)
    assert frame["status"] == 400 and "binary" in frame["error"]["message"]

    # An acknowledgement needs no answer: the next frame read is the next answer's.
    ws.send(json.dumps({"type": "response.processed", "response_id": "resp_x"}))

    # The HTTP pipeline's own 400 (no model), in the same wrapped frame.
    ws.send(json.dumps({"type": "response.create", "input": "hi"}))
    (frame,) = answer(ws)
    assert frame["status"] == 400 and frame["error"]["param"] == "model"
    assert model.exchanges == []

    ws.send(create(input="hello"))
    assert answer(ws)[-1]["type"] == "response.completed"
    assert len(model.exchanges) == 1


def test_an_upstream_error_keeps_its_status() -> None:
    """A 4xx from the upstream comes back with that status, as Codex maps it to HTTP."""
    model = ScriptedModel(CHAT, COMMAND)
    with serve(model) as upstream_url:
        # A base URL the scripted model has no route under: it answers 404.
        proxy = ProxaiMiddleware(_not_found, upstream=Upstream(CHAT, upstream_url + "/nope"))
        with serve(proxy, websockets=True) as url, connect(ws_url(url)) as ws:
            ws.send(create(input="hi"))
            (frame,) = answer(ws)
    assert frame["type"] == "error" and frame["status"] == 404
    assert "no route" in frame["error"]["message"]


def test_disabled_websockets_answer_426(socket_for: Any) -> None:
    model = ScriptedModel(CHAT, COMMAND)
    with pytest.raises(InvalidStatus) as info:
        socket_for(model, "http", responses_websocket=False)
    assert info.value.response.status_code == 426
    assert b"websockets_disabled" in info.value.response.body


# ------------------------------------------------------------- the real Codex

# (upstream, transport, reasoning): with reasoning, the model checks that its thinking
# signatures come back through the connection's remembered output.
CODEX_CASES = [
    pytest.param(CHAT, "http", False, id="chat-http"),
    pytest.param(ANTHROPIC, "http", False, id="anthropic-http"),
    pytest.param(ANTHROPIC, "inner", True, id="anthropic-inner-reasoning"),
]


@pytest.mark.parametrize(("upstream", "transport", "reasoning"), CODEX_CASES)
def test_codex_builtin_provider_runs_its_tool_loop_over_the_socket(
    tmp_path: Path, upstream: ProtocolName, transport: str, reasoning: bool
) -> None:
    model = ScriptedModel(
        upstream, COMMAND, pre_steps=[("apply_patch", {"input": PATCH})], reasoning=reasoning
    )
    with middleware_for(model, transport, websockets=True) as (url, recorder):
        run = run_codex(url, tmp_path, builtin=True)
    codex_events(run, recorder, model)
    why = explain(run, recorder, model)
    assert [r.method for r in recorder.seen] == ["WS"], why  # no HTTP fallback, no POST
    (socket,) = recorder.seen
    assert socket.status == 101, why
    assert socket.headers.get("openai-beta", "").startswith("responses_websockets="), why
    frames = [json.loads(f) for f in socket.frames_in]
    assert all(f["type"] == "response.create" for f in frames), why
    assert frames[0].get("generate") is False, why  # Codex's warm-up
    assert all(f.get("previous_response_id") for f in frames[1:]), why
    assert len(model.exchanges) == 3, why  # apply_patch, the command, the answer
    completed = [f for f in socket.frames_out if '"type":"response.completed"' in f]
    assert len(completed) == 4, why


def test_codex_falls_back_to_http_at_the_first_426(tmp_path: Path) -> None:
    model = ScriptedModel(CHAT, COMMAND, pre_steps=[("apply_patch", {"input": PATCH})])
    with middleware_for(model, "http", websockets=True, responses_websocket=False) as (
        url,
        recorder,
    ):
        run = run_codex(url, tmp_path, builtin=True)
    codex_events(run, recorder, model)
    why = explain(run, recorder, model)
    methods = [r.method for r in recorder.seen]
    assert methods == ["WS", "POST", "POST", "POST"], why
    assert recorder.seen[0].status == 426, why


def _chat_chunk(delta: dict[str, Any]) -> bytes:
    chunk = {
        "id": "chatcmpl-ws",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def test_a_client_leaving_mid_answer_cancels_the_upstream(caplog: pytest.LogCaptureFixture) -> None:
    """The socket closes while the upstream is still streaming: the upstream request
    is closed too (nothing left running for a client that is gone), quietly."""
    chunks = [_chat_chunk({"role": "assistant", "content": "Hel"}), _chat_chunk({"content": "lo"})]
    sse = [("content-type", "text/event-stream")]
    fake = FakeUpstream([Reply(200, sse, chunks, stall_after=1, stall=60)])
    with serve(fake) as upstream_url:
        proxy = ProxaiMiddleware(_not_found, upstream=Upstream(CHAT, upstream_url + "/v1"))
        with serve(proxy, websockets=True) as url:
            with connect(ws_url(url)) as ws:
                ws.send(create(input="hi"))
                first = json.loads(ws.recv(timeout=30))
                assert first["type"] == "response.created"
            assert fake.cancelled.wait(30)
    assert not fake.finished.is_set()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_codex_retries_a_broken_stream_on_a_new_socket(tmp_path: Path) -> None:
    """A cut Anthropic stream reaches Codex as ``response.failed`` over the socket; Codex
    drops that connection, opens another (whose state starts empty, so it sends the
    whole conversation again) and completes the turn there."""
    model = ScriptedModel(
        ANTHROPIC, COMMAND, pre_steps=[("apply_patch", {"input": PATCH})], break_streams=1
    )
    with middleware_for(
        model, "http", websockets=True, upstream_options=PASS_FAILURES_ON
    ) as (url, recorder):
        run = run_codex(url, tmp_path, builtin=True)
    codex_events(run, recorder, model)
    why = explain(run, recorder, model)
    assert [r.method for r in recorder.seen] == ["WS", "WS"], why
    broken, retry = recorder.seen
    assert json.loads(broken.frames_out[-1])["type"] == "response.failed", why
    first = json.loads(retry.frames_in[0])
    assert "previous_response_id" not in first or first.get("generate") is False, why


@pytest.mark.parametrize(("upstream", "transport"), CASES[::3])
def test_a_frame_can_continue_a_response_stored_over_http(
    socket_for: Any, upstream: ProtocolName, transport: str
) -> None:
    """A turn answered over HTTP (stored) continued from a WebSocket frame: the
    connection has no such response of its own, so the store supplies it; then the
    connection's own last response chains as before."""
    import openai

    model = ScriptedModel(upstream, COMMAND)
    ws, _ = socket_for(model, transport)
    url = f"http://127.0.0.1:{ws.remote_address[1]}/v1"
    client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
    stored = client.responses.create(model="gpt-5.5", input="remember 4711")
    ws.send(create(previous_response_id=stored.id, input=[user("what was it?")]))
    second = answer(ws)
    assert second[-1]["type"] == "response.completed", second[-1]
    ws.send(create(previous_response_id=second[-1]["response"]["id"], input=[user("and?")]))
    third = answer(ws)
    assert third[-1]["type"] == "response.completed", third[-1]
    texts = [
        [p.text for m in x.decoded.messages for p in m.content if isinstance(p, c.Text)]  # type: ignore[union-attr]
        for x in model.exchanges
    ]
    assert texts[1][0] == "remember 4711" and texts[1][-1] == "what was it?"
    assert texts[2][0] == "remember 4711" and texts[2][-1] == "and?"
    assert len(texts[2]) == len(texts[1]) + 2  # the socket's answer, the new question
