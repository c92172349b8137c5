"""The middleware served by uvicorn on uvloop with httptools: what uvicorn runs on by
itself when they are installed (``uvicorn[standard]``, ``proxai-asgi[server]``).

uvloop's transports are not ``asyncio.Transport`` subclasses, and httptools frames
bodies and reports disconnects its own way; the default transport (the lean pool)
once answered every request with a 500 there. Here: each pair of Chat and Anthropic
(two pass-throughs, two translations), over the HTTP upstream and the wrapped app,
streamed and not, through the official SDKs, and a pass-through's bytes. On the same
server elsewhere: https upstreams and a refused certificate (``test_http1_tls.py``),
client disconnects (``test_passthrough.py``, ``test_translated_faults.py``) and the
Responses WebSocket tool loop (``test_responses_websocket.py``)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.helpers import expect
from tests.helpers.captures import load
from tests.helpers.servers import FakeUpstream, reply_from_capture

from .conftest import Stack
from .test_translation import assert_same_gist, call_client

PROTOCOLS = ["openai_chat_completions", "anthropic_messages"]
CAPTURES = {
    ("openai_chat_completions", True): "chat_sse_parallel_tool_calls",
    ("openai_chat_completions", False): "chat_json_parallel_tool_calls",
    ("anthropic_messages", True): "anthropic_sse_parallel_tool_use",
    ("anthropic_messages", False): "anthropic_json_parallel_tool_use",
}
PATHS = {"openai_chat_completions": "/v1/chat/completions", "anthropic_messages": "/v1/messages"}


@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("upstream", PROTOCOLS)
@pytest.mark.parametrize("client", PROTOCOLS)
def test_on_uvloop_each_client_receives_what_the_upstream_answered(
    stack: Stack, fake: FakeUpstream, client: str, upstream: str, stream: bool, transport: str
) -> None:
    name = CAPTURES[(upstream, stream)]
    fake.push(reply_from_capture(name))
    base = stack.proxy(fake, upstream, inner=transport == "inner", server="uvloop")  # type: ignore[arg-type]
    got = call_client(client, base, stream)
    assert_same_gist(got, expect.from_capture(name))
    assert len(fake.seen) == 1 and fake.seen[0].path.endswith(PATHS[upstream].removeprefix("/v1"))


@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_on_uvloop_a_pass_through_answer_arrives_byte_for_byte(
    stack: Stack, fake: FakeUpstream, stream: bool, transport: str
) -> None:
    name = CAPTURES[("anthropic_messages", stream)]
    record = load(name)
    fake.push(reply_from_capture(name))
    base = stack.proxy(fake, "anthropic_messages", inner=transport == "inner", server="uvloop")
    body = record["request"]["body"]
    with httpx.stream("POST", base + "/v1/messages", json=body, timeout=10) as r:
        got = b"".join(r.iter_raw())
        status = r.status_code
    want = record["response"]["body"]  # what the fake upstream sends (``reply_from_capture``)
    assert status == record["response"]["status"]
    assert got == (want.encode() if isinstance(want, str) else json.dumps(want).encode())
