"""Reasoning Anthropic did not sign (a Gemini thought signature, Responses
reasoning) cannot be replayed to Anthropic: ``_messages_out`` drops it inline, as
``_part_out`` does for the other kinds, and reports ``reasoning`` once."""

from __future__ import annotations

import msgspec

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols.anthropic_messages import request


def _encode(reasoning: c.Reasoning) -> tuple[dict[str, object], list[str]]:
    req = c.Request(
        model="m",
        messages=[
            c.Message(role="user", content=[c.Text(text="hi")]),
            c.Message(
                role="assistant",
                content=[
                    c.Text(text="thinking aloud"),
                    reasoning,
                    c.ToolCall(id="call_1", name="f", arguments="{}"),
                ],
            ),
            c.Message(role="tool", content=[c.ToolResult(call_id="call_1", content=[])]),
        ],
        max_tokens=8,
    )
    report = TranslationReport()
    body = request.encode_request(req, report, UpstreamOptions())
    return msgspec.json.decode(body), report.dropped


def test_gemini_thought_signature_is_dropped_and_reported() -> None:
    body, dropped = _encode(c.Reasoning(text="", thought_signature="sig"))
    assistant = body["messages"][1]  # type: ignore[index]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use"]
    assert dropped == ["reasoning"]


def test_signed_and_redacted_reasoning_still_replayed() -> None:
    body, dropped = _encode(c.Reasoning(text="t", signature="anthropic-sig"))
    assert [b["type"] for b in body["messages"][1]["content"]] == [  # type: ignore[index]
        "text",
        "thinking",
        "tool_use",
    ]
    body, dropped = _encode(c.Reasoning(redacted="opaque"))
    assert [b["type"] for b in body["messages"][1]["content"]] == [  # type: ignore[index]
        "text",
        "redacted_thinking",
        "tool_use",
    ]
    assert dropped == []
