"""One turn through a real SDK, streamed or not, as the tests' clients take it."""

from __future__ import annotations

from typing import Any

import openai


def responses_output(o: openai.OpenAI, stream: bool, **kw: Any) -> list[dict[str, Any]]:
    """The output items of one Responses call (the final response when streamed)."""
    if stream:
        with o.responses.stream(**kw) as s:
            response = s.get_final_response()
    else:
        response = o.responses.create(**kw)
    return [i.model_dump(exclude_none=True) for i in response.output]
