"""An Anthropic refusal as a Responses client receives it, through the openai SDK over
both transports (issue 17): non-streamed, the refused turn's visible wording is a
``refusal`` part (as Chat clients get it in ``message.refusal``); streamed it went out as
``output_text`` before the stop reason was known. Either way the status stays
``failed`` (RS-15) and ``error`` says why: code ``invalid_prompt`` (shown, not retried)
and the refusal's own words."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from proxai_asgi import canonical as c
from tests.helpers.canned import codec_answer
from tests.helpers.servers import FakeUpstream

from .conftest import Stack

ANTHROPIC = "anthropic_messages"
WORDING = "I can't help with that."
EXPLANATION = "The request asks for unsafe instructions."
REFUSED = c.Response(
    id="msg_1",
    model="m",
    content=[c.Text(text=WORDING)],
    stop_reason="refusal",
    refusal_explanation=EXPLANATION,
    usage=c.Usage(input_tokens=5, output_tokens=7),
)


def final_response(base: str, stream: bool) -> dict[str, Any]:
    """The final Response object: the body, or the terminal event's snapshot."""
    o = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    if not stream:
        return o.responses.create(model="m", input="how?").model_dump()
    events = list(o.responses.create(model="m", input="how?", stream=True))
    assert events[-1].type == "response.failed"
    return events[-1].response.model_dump()  # type: ignore[union-attr]


def parts(response: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (p["type"], p.get("text") or p.get("refusal") or "")
        for item in response["output"]
        for p in item.get("content") or []
    ]


def error_of(response: dict[str, Any]) -> tuple[str, str] | None:
    error = response["error"]
    return None if error is None else (error["code"], error["message"])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_an_anthropic_refusals_wording_reaches_responses_clients_as_a_refusal(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    fake.push(codec_answer(ANTHROPIC, REFUSED))
    response = final_response(stack.proxy(fake, ANTHROPIC, inner=inner), stream)
    assert response["status"] == "failed"
    kind = "output_text" if stream else "refusal"  # a stream cannot take text back
    assert parts(response) == [(kind, WORDING)]
    assert error_of(response) == ("invalid_prompt", WORDING)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("inner", [False, True], ids=["http", "inner"])
def test_a_refusal_without_wording_fails_with_its_explanation_as_the_error(
    stack: Stack, fake: FakeUpstream, inner: bool, stream: bool
) -> None:
    """RS-15: ``failed``, and ``error`` carries the upstream's explanation (also shown as
    the refusal part), never ``error: null``."""
    bare = c.Response(
        id="msg_1",
        model="m",
        content=[],
        stop_reason="refusal",
        refusal_explanation=EXPLANATION,
        usage=REFUSED.usage,
    )
    fake.push(codec_answer(ANTHROPIC, bare))
    response = final_response(stack.proxy(fake, ANTHROPIC, inner=inner), stream)
    assert response["status"] == "failed"
    # (the scripted Anthropic stream shows the explanation as text, as its encoder does)
    assert parts(response) == [("output_text" if stream else "refusal", EXPLANATION)]
    assert error_of(response) == ("invalid_prompt", EXPLANATION)
