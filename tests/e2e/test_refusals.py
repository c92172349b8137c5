"""An Anthropic refusal as a Responses client receives it, through the openai SDK over
both transports (issue 17): non-streamed, the refused turn's visible wording is a
``refusal`` part (as Chat clients get it in ``message.refusal``); streamed it went out as
``output_text`` before the stop reason was known."""

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
