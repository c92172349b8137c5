"""A call's ``args`` through the Gemini codec, as real clients send them, over both
transports, streamed and not: a google-genai history reaches other upstreams with the
same object, and a Chat history reaches Gemini with the object its arguments hold, on
the first turn and when the same call is sent again (the codec keeps arguments encoded
through content-keyed look-ups, ``json_objects``). Args that are not an object are a
400 in Google's shape that names them, with nothing sent upstream."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from google import genai
from google.genai import types

from tests.helpers.servers import FakeUpstream, reply_from_capture

from .conftest import Stack

ARGS: dict[str, Any] = {"path": "src/a.py", "opts": {"limit": 2, "tags": ["x", "y"]}, "n": 1.5}
COMPACT = json.dumps(ARGS, separators=(",", ":"))
SPACED = json.dumps(ARGS, indent=1)  # as some clients write arguments

_REPLIES = {
    ("anthropic_messages", False): "anthropic_json_text_basic",
    ("anthropic_messages", True): "anthropic_sse_text_basic",
    ("openai_chat_completions", False): "chat_json_text_basic",
    ("openai_chat_completions", True): "chat_sse_text_basic_include_usage",
    ("gemini_generate_content", False): "gemini_json_text_basic",
    ("gemini_generate_content", True): "gemini_sse_text_basic",
}

_transports = pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
_streams = pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])


def _genai(base: str) -> genai.Client:
    return genai.Client(api_key="k", http_options=types.HttpOptions(base_url=base))


@_streams
@_transports
@pytest.mark.parametrize("upstream", ["anthropic_messages", "openai_chat_completions"])
def test_a_google_genai_call_reaches_other_upstreams_with_its_args(
    stack: Stack, fake: FakeUpstream, upstream: str, inner: bool, stream: bool
) -> None:
    g = _genai(stack.proxy(fake, upstream, inner=inner))  # type: ignore[arg-type]
    call = types.FunctionCall(id="call_1", name="read", args=ARGS)
    answer = types.FunctionResponse(id="call_1", name="read", response={"output": "done"})
    history = [
        types.Content(role="user", parts=[types.Part(text="go")]),
        types.Content(
            role="model", parts=[types.Part(text="reading"), types.Part(function_call=call)]
        ),
        types.Content(role="user", parts=[types.Part(function_response=answer)]),
    ]
    for _ in range(2):  # the same call again: from the look-up
        fake.push(reply_from_capture(_REPLIES[upstream, stream]))
        if stream:
            assert list(g.models.generate_content_stream(model="m", contents=history))
        else:
            assert g.models.generate_content(model="m", contents=history).text
        sent = fake.seen[-1]
        assistant = sent.json()["messages"][1]
        if upstream == "anthropic_messages":
            (use,) = [b for b in assistant["content"] if b["type"] == "tool_use"]
            assert use["input"] == ARGS
            assert sent.body.count(b'"input":' + COMPACT.encode()) == 1
        else:
            (tool_call,) = assistant["tool_calls"]
            assert tool_call["function"]["arguments"] == COMPACT


@_streams
@_transports
def test_a_chat_call_reaches_gemini_as_the_object_its_arguments_hold(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    base = stack.proxy(fake, "gemini_generate_content", inner=inner)
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    function = {"name": "read", "arguments": SPACED}
    messages: Any = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "reading",
            "tool_calls": [{"id": "call_1", "type": "function", "function": function}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "done"},
    ]
    for _ in range(2):  # the same call again: from the look-up
        fake.push(reply_from_capture(_REPLIES["gemini_generate_content", stream]))
        if stream:
            assert list(o.chat.completions.create(model="m", messages=messages, stream=True))
        else:
            assert o.chat.completions.create(model="m", messages=messages).choices
        sent = fake.seen[-1]
        (part,) = [p for p in sent.json()["contents"][1]["parts"] if "functionCall" in p]
        assert part["functionCall"] == {"name": "read", "args": ARGS, "id": "call_1"}
        assert sent.body.count(b'"args":' + COMPACT.encode() + b',"id":"call_1"') == 1


@_transports
@pytest.mark.parametrize("args", ["[1]", '"text"', "2"])
def test_args_that_are_not_an_object_are_a_400_naming_them(
    stack: Stack, fake: FakeUpstream, inner: bool, args: str
) -> None:
    base = stack.proxy(fake, "openai_chat_completions", inner=inner)
    body = (
        '{"contents":[{"role":"user","parts":[{"text":"go"}]},'
        '{"role":"model","parts":[{"functionCall":{"name":"read","args":' + args + "}}]}]}"
    )
    for _ in range(2):  # (nothing is kept from a refusal)
        r = httpx.post(
            f"{base}/v1beta/models/m:generateContent",
            content=body,
            headers={"content-type": "application/json", "x-goog-api-key": "k"},
            timeout=30,
        )
        assert r.status_code == 400
        error = r.json()["error"]
        assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400
        assert "contents[1].parts[0].functionCall.args" in error["message"]
    assert fake.seen == []
