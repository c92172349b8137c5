"""Translated exchanges when things go wrong, and the fields clients send every day."""

from __future__ import annotations

import gzip
import json

import anthropic
import httpx
import openai
import pytest

from tests.helpers.captures import load, response_body
from tests.helpers.servers import FakeUpstream, Reply, reply_from_capture, sse_frames
from tests.helpers.validate_anthropic import validate_anthropic_stream
from tests.helpers.validate_chat import validate_chat_stream
from tests.helpers.validate_responses import validate_responses_stream

from .conftest import Stack

CLIENT = {
    "anthropic_messages": (
        "/v1/messages",
        {
            "model": "m",
            "max_tokens": 50,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
    ),
    "openai_chat_completions": (
        "/v1/chat/completions",
        {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    ),
    "openai_responses": ("/v1/responses", {"model": "m", "stream": True, "input": "hi"}),
}
SSE = [("content-type", "text/event-stream")]


def post_stream(base: str, client: str) -> bytes:
    path, body = CLIENT[client]
    r = httpx.post(base + path, json=body, timeout=20)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    return r.content


def assert_terminal_error(client: str, body: bytes, needle: str) -> None:
    """The stream ended with the client protocol's own terminal error."""
    if client == "anthropic_messages":
        s = validate_anthropic_stream(body)
        assert s.error is not None and needle in s.error["message"]
    elif client == "openai_chat_completions":
        c = validate_chat_stream(body)
        assert c.error is not None and needle in c.error["message"]
        assert body.endswith(b"data: [DONE]\n\n")
    else:
        r = validate_responses_stream(body)
        assert r.error is not None and needle in r.error["message"]
        assert r.response is not None and r.response["status"] == "failed"


def cut(name: str, keep: int) -> Reply:
    """A capture's stream cut after ``keep`` frames (no terminal event)."""
    rep = reply_from_capture(name)
    rep.chunks = rep.chunks[:keep]
    return rep


ANTHROPIC_OVERLOADED = (
    b'event: error\ndata: {"type":"error","error":{"details":null,"type":"overloaded_error",'
    b'"message":"Overloaded"} }\n\n'
)


@pytest.mark.parametrize("client", ["openai_chat_completions", "openai_responses"])
@pytest.mark.parametrize("transport", ["http", "inner"])
def test_mid_stream_upstream_error_event_ends_the_client_stream_with_its_own_error(
    stack: Stack, fake: FakeUpstream, client: str, transport: str
) -> None:
    frames = [*sse_frames(response_body("anthropic_sse_text_basic"))[:3], ANTHROPIC_OVERLOADED]
    fake.push(Reply(200, SSE, frames))
    base = stack.proxy(fake, "anthropic_messages", inner=transport == "inner", max_retries=0)
    assert_terminal_error(client, post_stream(base, client), "Overloaded")


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize(
    ("client", "upstream", "capture"),
    [
        ("anthropic_messages", "openai_chat_completions", "chat_sse_parallel_tool_calls"),
        ("openai_responses", "openai_chat_completions", "chat_sse_text_basic_include_usage"),
        ("openai_chat_completions", "openai_responses", "responses_sse_text_basic"),
        ("anthropic_messages", "openai_responses", "responses_sse_parallel_function_calls"),
        ("openai_chat_completions", "anthropic_messages", "anthropic_sse_parallel_tool_use"),
        ("openai_responses", "anthropic_messages", "anthropic_sse_thinking_signature_delta"),
    ],
)
def test_upstream_stream_that_ends_before_its_terminal_event_is_a_terminal_error(
    stack: Stack,
    fake: FakeUpstream,
    client: str,
    upstream: str,
    capture: str,
    inner: bool,
) -> None:
    fake.push(cut(capture, 6))
    base = stack.proxy(fake, upstream, inner=inner)  # type: ignore[arg-type]
    assert_terminal_error(client, post_stream(base, client), "")


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize("client", ["anthropic_messages", "openai_responses"])
def test_upstream_stream_stall_ends_with_a_timeout_error_from_the_idle_limit(
    stack: Stack,
    fake: FakeUpstream,
    client: str,
    inner: bool,
) -> None:
    rep = reply_from_capture("chat_sse_parallel_tool_calls")
    rep.stall_after, rep.stall = 3, 3.0  # three frames, then silence
    fake.push(rep)
    base = stack.proxy(fake, "openai_chat_completions", stream_idle_timeout=0.5, inner=inner)
    body = post_stream(base, client)
    # The idle limit ended it (its words), while the upstream was still silent.
    assert_terminal_error(client, body, "sent nothing")
    assert not fake.finished.is_set()


@pytest.mark.parametrize("server", ["asyncio", "uvloop"])
@pytest.mark.parametrize("transport", ["http", "inner"])
def test_client_disconnect_cancels_a_translated_upstream_stream(
    stack: Stack, fake: FakeUpstream, transport: str, server: str
) -> None:
    """Whichever server runs the middleware: uvicorn on asyncio with h11, or on uvloop
    with httptools (each tells the app of a disconnect its own way)."""
    fake.push(reply_from_capture("chat_sse_max_tokens_length", delay=0.2))
    base = stack.proxy(fake, "openai_chat_completions", inner=transport == "inner", server=server)
    path, body = CLIENT["anthropic_messages"]
    with httpx.stream("POST", base + path, json=body) as r:
        for chunk in r.iter_raw():
            if chunk:
                break
    assert fake.cancelled.wait(5)
    # The upstream learnt of it mid-answer: it never finished sending.
    assert not fake.finished.is_set()


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_upstream_rate_limit_keeps_status_retry_after_and_message_in_client_shape(
    stack: Stack,
    fake: FakeUpstream,
    inner: bool,
) -> None:
    frag = load("errors_from_issue_reports_FRAGMENTS")["fragments"][1]
    fake.push(
        Reply(
            429,
            [("content-type", "application/json"), ("retry-after", "13")],
            [frag["body"].encode()],
        )
    )
    base = stack.proxy(fake, "anthropic_messages", inner=inner, max_retries=0)
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.RateLimitError) as info:
        o.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert info.value.response.headers["retry-after"] == "13"
    body = info.value.response.json()
    assert "20,000 input tokens per minute" in body["error"]["message"]
    assert set(body["error"]) == {"message", "type", "param", "code"}


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_openai_rate_limit_reaches_an_anthropic_client_as_rate_limit_error(
    stack: Stack,
    fake: FakeUpstream,
    inner: bool,
) -> None:
    frag = load("errors_from_issue_reports_FRAGMENTS")["fragments"][2]
    fake.push(Reply(429, [("content-type", "application/json")], [frag["body"].encode()]))
    base = stack.proxy(fake, "openai_chat_completions", inner=inner)
    a = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
    with pytest.raises(anthropic.RateLimitError) as info:
        a.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert info.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]


@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_overloaded_529_reaches_an_anthropic_client_as_overloaded_error(
    stack: Stack,
    fake: FakeUpstream,
    inner: bool,
) -> None:
    body = b'{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}'
    fake.push(Reply(529, [("content-type", "application/json")], [body]))
    base = stack.proxy(fake, "openai_responses", inner=inner)
    r = httpx.post(
        base + "/v1/messages",
        json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
    )
    assert r.status_code == 529
    assert r.json()["error"]["type"] == "overloaded_error"


def test_dropped_fields_are_reported_in_a_response_header(stack: Stack, fake: FakeUpstream) -> None:
    fake.push(reply_from_capture("chat_json_text_basic"))
    base = stack.proxy(fake, "openai_chat_completions")
    r = httpx.post(
        base + "/v1/messages?beta=true",
        headers={"accept": "application/json"},
        json={
            "model": "m",
            "max_tokens": 20,
            "context_management": {"edits": []},
            "system": [
                {"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}
            ],
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    assert r.status_code == 200
    dropped = r.headers["x-proxai-dropped-fields"]
    assert "context_management" in dropped
    sent = fake.seen[0].json()
    assert "context_management" not in sent


def test_n_greater_than_one_toward_anthropic_is_a_400_naming_the_field(
    stack: Stack, fake: FakeUpstream
) -> None:
    base = stack.proxy(fake, "anthropic_messages")
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        o.chat.completions.create(model="m", n=2, messages=[{"role": "user", "content": "x"}])
    assert info.value.body["param"] == "n"  # type: ignore[index]
    assert fake.seen == []


def test_lossy_upstream_drops_and_reports_instead_of_rejecting(
    stack: Stack, fake: FakeUpstream
) -> None:
    fake.push(reply_from_capture("anthropic_json_text_basic"))
    base = stack.proxy(fake, "anthropic_messages", lossy=True)
    r = httpx.post(
        base + "/v1/chat/completions",
        json={
            "model": "m",
            "n": 2,
            "logprobs": True,
            "messages": [{"role": "user", "content": "x"}],
        },
    )
    assert r.status_code == 200
    assert {"n", "logprobs"} <= set(r.headers["x-proxai-dropped-fields"].split(", "))


def test_codex_custom_tool_is_wrapped_for_anthropic_and_unwrapped_for_the_client(
    stack: Stack, fake: FakeUpstream
) -> None:
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"
    tool_use = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [
            {"type": "tool_use", "id": "toolu_01", "name": "apply_patch", "input": {"input": patch}}
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    fake.push(Reply(200, [("content-type", "application/json")], [json.dumps(tool_use).encode()]))
    base = stack.proxy(fake, "anthropic_messages")
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    grammar = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF'
    resp = o.responses.create(
        model="m",
        input=[
            {"type": "message", "role": "developer", "content": "You are Codex."},
            {"type": "message", "role": "user", "content": "add a file"},
        ],
        tools=[
            {
                "type": "custom",
                "name": "apply_patch",
                "description": "Edit files.",
                "format": {"type": "grammar", "syntax": "lark", "definition": grammar},
            }
        ],
        store=False,
        include=["reasoning.encrypted_content"],
        prompt_cache_key="abc",
    )
    (item,) = resp.output
    assert item.type == "custom_tool_call"
    assert item.name == "apply_patch" and item.input == patch  # type: ignore[union-attr]
    sent = fake.seen[0].json()
    (tool,) = sent["tools"]
    assert tool["name"] == "apply_patch"
    assert tool["input_schema"]["properties"]["input"]["type"] == "string"
    assert grammar in tool["description"]
    # a Responses client's prompt, with the cache breakpoint Anthropic needs
    ephemeral = {"type": "ephemeral"}
    assert sent["system"] == [
        {"type": "text", "text": "You are Codex.", "cache_control": ephemeral}
    ]


def test_codex_custom_tool_stream_unwraps_to_a_custom_tool_call_item(
    stack: Stack, fake: FakeUpstream
) -> None:
    patch = "*** Begin Patch\n*** End Patch"
    chunks = [
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "apply_patch", "arguments": ""},
                            }
                        ],
                    },
                    "finish_reason": None,
                }
            ],
        },
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "function": {"arguments": json.dumps({"input": patch})[:12]},
                            }
                        ]
                    },
                    "finish_reason": None,
                }
            ],
        },
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "function": {"arguments": json.dumps({"input": patch})[12:]},
                            }
                        ]
                    },
                    "finish_reason": None,
                }
            ],
        },
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
        },
    ]
    frames = [b"data: " + json.dumps(ch).encode() + b"\n\n" for ch in chunks] + [
        b"data: [DONE]\n\n"
    ]
    fake.push(Reply(200, SSE, frames))
    base = stack.proxy(fake, "openai_chat_completions")
    r = httpx.post(
        base + "/v1/responses",
        json={
            "model": "m",
            "stream": True,
            "input": "patch it",
            "tools": [{"type": "custom", "name": "apply_patch", "description": "Edit."}],
        },
    )
    s = validate_responses_stream(r.content)
    assert s.response is not None
    (item,) = s.response["output"]
    assert item["type"] == "custom_tool_call" and item["input"] == patch
    assert fake.seen[0].json()["tools"][0]["type"] == "function"


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "httpx"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_gzip_compressed_upstream_answer_is_decoded_before_translation(
    stack: Stack, fake: FakeUpstream, lean: bool, stream: bool
) -> None:
    """An upstream that compresses although the translated request did not ask it to."""
    capture = "chat_sse_text_basic_include_usage" if stream else "chat_json_text_basic"
    plain = reply_from_capture(capture)
    packed = gzip.compress(b"".join(plain.chunks))
    half = len(packed) // 2  # two chunks: the inflater must carry state across them
    fake.push(
        Reply(200, [*plain.headers, ("content-encoding", "gzip")], [packed[:half], packed[half:]])
    )
    base = stack.proxy(fake, "openai_chat_completions", lean_http=lean)
    path, body = CLIENT["anthropic_messages"]
    r = httpx.post(base + path, json={**body, "stream": stream}, timeout=20)
    assert r.status_code == 200, r.text
    if stream:
        s = validate_anthropic_stream(r.content)
        assert s.error is None and s.stop_reason == "end_turn"
        assert "".join(b.text for b in s.blocks)
    else:
        assert r.json()["content"][0]["text"]
    if lean:  # httpx asks for gzip itself; the lean pool asks for none
        assert fake.seen[-1].headers.get("accept-encoding") == "identity"
