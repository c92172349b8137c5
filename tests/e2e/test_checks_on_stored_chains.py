"""A Responses turn continued with ``previous_response_id`` is checked as a whole: the
stored conversation is spliced into the body before the decoder walks it, and what
the decoder vouches for (``TranslationReport.settled``) covers the spliced history.
Through the official ``openai`` SDK, over HTTP and the wrapped-app transport,
streamed and not: an output answering the stored call goes through; a stray output or
an image that is not base64 in the new turn is the 400 a request without a chain gets.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.e2e.test_stored_responses import CHAT, COMMAND, MODEL, TOOL_OUTPUT, TOOLS, proxy
from tests.helpers.scripted_model import ScriptedModel

_STRAY = "tool result for call id 'call_stray' answers no tool call in the conversation"
_BAD_IMAGE = "image data is not valid base64"


def _second_turn(kind: str, call_id: str) -> list[dict[str, Any]]:
    answer = {"type": "function_call_output", "call_id": call_id, "output": TOOL_OUTPUT}
    if kind == "answered":
        return [answer]
    if kind == "stray":
        return [answer, {**answer, "call_id": "call_stray"}]
    image = {"type": "input_image", "image_url": "data:image/png;base64,@@not base64@@"}
    return [answer, {"role": "user", "content": [{"type": "input_text", "text": "see"}, image]}]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("transport", ["http", "inner"])
@pytest.mark.parametrize("kind", ["answered", "stray", "bad-image"])
def test_a_chained_turn_is_checked_with_its_stored_history(
    kind: str, transport: str, stream: bool
) -> None:
    model = ScriptedModel(CHAT, COMMAND)
    with proxy(model, transport) as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0)
        first = client.responses.create(model=MODEL, input="Print the marker.", tools=TOOLS)
        call = next(i for i in first.output if i.type == "function_call")
        kw: dict[str, Any] = {
            "model": MODEL,
            "input": _second_turn(kind, call.call_id),
            "tools": TOOLS,
            "previous_response_id": first.id,
        }
        if kind == "answered":
            if stream:
                events = list(client.responses.create(stream=True, **kw))
                assert events[-1].type == "response.completed"
            else:
                assert client.responses.create(**kw).status == "completed"
            assert len(model.exchanges) == 2
            return
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(stream=stream, **kw)
        client.close()
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["message"].startswith(_STRAY if kind == "stray" else _BAD_IMAGE)
    assert error["type"] == "invalid_request_error"
    assert len(model.exchanges) == 1  # the second turn never reached the model
