"""A Gemini ``functionResponse`` is named after the call it answers.

The encoder learns the calls' names as it walks the conversation and names the
responses at the end, so a name comes from the conversation as a whole: as the lookup
over every call it replaced gave, a call given later names an earlier result, the last
call of an id names it, and a result whose call is nowhere is named by its id.
"""

from __future__ import annotations

from typing import Any

import msgspec

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols.gemini_generate_content import request


def _call(call_id: str, name: str) -> c.ToolCall:
    return c.ToolCall(id=call_id, name=name, arguments="{}")


def _result(call_id: str) -> c.ToolResult:
    return c.ToolResult(call_id=call_id, content=[c.Text(text="ok")])


def _response_names(messages: list[c.Message]) -> list[str]:
    body = request.encode_request(
        c.Request(model="m", messages=messages), TranslationReport(), UpstreamOptions()
    )
    out: list[str] = []
    for turn in msgspec.json.decode(body)["contents"]:
        for part in turn["parts"]:
            response: dict[str, Any] | None = part.get("functionResponse")
            if response is not None:
                out.append(response["name"])
    return out


def test_each_result_is_named_after_its_call() -> None:
    messages = [
        c.Message(role="user", content=[c.Text(text="go")]),
        c.Message(role="assistant", content=[_call("c1", "read"), _call("c2", "run")]),
        c.Message(role="tool", content=[_result("c2"), _result("c1")]),
    ]
    assert _response_names(messages) == ["run", "read"]


def test_a_name_comes_from_the_whole_conversation() -> None:
    messages = [
        c.Message(role="user", content=[c.Text(text="go")]),
        c.Message(role="assistant", content=[_call("c1", "read")]),
        c.Message(role="tool", content=[_result("c1"), _result("c9"), _result("gone")]),
        c.Message(role="assistant", content=[_call("c1", "reread"), _call("c9", "later")]),
        c.Message(role="user", content=[_call("c8", "odd"), _result("c8")]),
    ]
    assert _response_names(messages) == ["reread", "later", "gone", "odd"]
