"""The Gemini stream encoder's byte templates for deltas write exactly what encoding
the whole frame writes."""

from __future__ import annotations

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.protocols.gemini_generate_content import wire
from proxai_asgi.protocols.gemini_generate_content.stream import GeminiStreamEncoder


@pytest.mark.parametrize("start", [True, False], ids=["after-start", "no-start"])
@pytest.mark.parametrize("text", ["plain", 'quote " and \\ back', "é ✓ \n\t", "</script>"])
def test_delta_frames_from_templates_equal_encoded_frames(start: bool, text: str) -> None:
    enc = GeminiStreamEncoder(c.Request(model="client-model", messages=[], stream=True))
    if start:
        enc.encode(c.MessageStart(id="resp-1", model="gemini-x"))
    enc.encode(c.BlockStart(index=0, kind="reasoning"))
    thought = enc.encode(c.BlockDelta(index=0, text=text))
    enc.encode(c.BlockStart(index=1, kind="text"))
    plain = enc.encode(c.BlockDelta(index=1, text=text))
    assert thought == enc._chunk([wire.Part(text=text, thought=True)])
    assert plain == enc._chunk([wire.Part(text=text)])
