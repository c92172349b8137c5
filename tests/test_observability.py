"""One structured log line per exchange, secrets never in it, and an optional
OpenTelemetry span with the GenAI semantic-convention attributes."""

from __future__ import annotations

import logging

import httpx
import pytest

from proxai_asgi import ProxaiMiddleware, Upstream
from tests.helpers.otel import span_exporter
from tests.helpers.servers import FakeUpstream, reply_from_capture, serve


def _exchange(api_key: str = "sk-secret-upstream-key") -> FakeUpstream:
    fake = FakeUpstream().push(reply_from_capture("chat_json_text_basic"))
    with serve(fake) as up:
        app = ProxaiMiddleware(
            fake, upstream=Upstream("openai_chat_completions", up + "/v1", api_key)
        )
        with serve(app) as base:
            r = httpx.post(
                base + "/v1/messages",
                headers={"x-api-key": "sk-client-key"},
                json={
                    "model": "claude-x",
                    "max_tokens": 9,
                    "metadata": {"user_id": "u1"},
                    "context_management": {},
                    "messages": [{"role": "user", "content": "hi"}],
                },
            )
            assert r.status_code == 200
    return fake


def test_one_structured_log_line_per_exchange_without_secrets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="proxai_asgi"):
        _exchange()
    lines = [r.getMessage() for r in caplog.records if r.name == "proxai_asgi"]
    (line,) = [m for m in lines if m.startswith("exchange ")]
    for field in (
        "client=anthropic_messages",
        "pair=anthropic_messages->openai_chat_completions",
        "model=claude-x",
        "stream=False",
        "status=200",
        "input_tokens=",
        "output_tokens=",
        "dropped=",
        "context_management",
    ):
        assert field in line, field
    text = "\n".join(lines)
    assert "sk-secret-upstream-key" not in text and "sk-client-key" not in text


def test_exchange_span_carries_genai_attributes() -> None:
    exporter = span_exporter()
    _exchange()
    spans = [s for s in exporter.get_finished_spans() if s.name == "chat proxai"]
    assert spans, "no exchange span"
    attrs = dict(spans[-1].attributes or {})
    assert attrs["gen_ai.system"] == "openai"
    assert attrs["gen_ai.request.model"] == "claude-x"
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.usage.input_tokens"] > 0
    assert attrs["gen_ai.usage.output_tokens"] > 0
    assert attrs["http.response.status_code"] == 200
    assert "gen_ai.response.model" in attrs
