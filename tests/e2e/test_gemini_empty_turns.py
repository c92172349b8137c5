"""A Gemini request whose only user turn is an empty text, after a system instruction
(a real client's request, with tools in mode ``ANY``), and its follow-up turn, reach
every other upstream as a request that upstream accepts (issue 26): a minimal user turn
first, never ``messages: []``, ``input: []`` or a history that opens with the model's
calls."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers.servers import FakeUpstream, reply_from_capture

from .conftest import Stack
from .test_gemini_validation import TEXT_REPLY, UPSTREAMS

SYSTEM = {"parts": [{"text": "Pick the next speaker with the tool."}]}
TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "next_speaker",
                "parametersJsonSchema": {
                    "type": "object",
                    "properties": {"who": {"type": "string"}},
                },
            }
        ]
    }
]
EMPTY = {"role": "user", "parts": [{"text": ""}]}
CALL = {"functionCall": {"id": "c1", "name": "next_speaker", "args": {"who": "user"}}}
ANSWER = {"functionResponse": {"id": "c1", "name": "next_speaker", "response": {"output": "ok"}}}
FIRST = [EMPTY]
FOLLOW_UP = [EMPTY, {"role": "model", "parts": [CALL]}, {"role": "user", "parts": [ANSWER]}]


def first_user_text(upstream: str, sent: dict[str, Any]) -> str:
    """The text of the upstream request's first turn, which must be the user's."""
    if upstream == "openai_responses":
        first = sent["input"][0]
        assert first.get("role") == "user", sent["input"]
        content = first["content"]
        return content if isinstance(content, str) else "".join(p["text"] for p in content)
    messages = [m for m in sent["messages"] if m["role"] not in ("system", "developer")]
    first = messages[0]
    assert first["role"] == "user", sent["messages"]
    content = first["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("contents", [FIRST, FOLLOW_UP], ids=["first", "follow_up"])
def test_an_empty_user_turn_reaches_other_upstreams_as_a_minimal_user_turn(
    stack: Stack,
    fake: FakeUpstream,
    upstream: str,
    inner: bool,
    stream: bool,
    contents: list[dict[str, Any]],
) -> None:
    fake.push(reply_from_capture(TEXT_REPLY[upstream, stream]))
    base = stack.proxy(fake, upstream, inner=inner)  # type: ignore[arg-type]
    body = {
        "systemInstruction": SYSTEM,
        "contents": contents,
        "tools": TOOLS,
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
    }
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    r = httpx.post(f"{base}/v1beta/models/m:{method}", json=body, timeout=20)
    assert r.status_code == 200, r.text
    (seen,) = fake.seen
    assert first_user_text(upstream, seen.json()).strip()
