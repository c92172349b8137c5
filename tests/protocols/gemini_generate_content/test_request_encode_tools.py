"""Function declarations toward Gemini, written by encode-only Structs: the bytes a
dict of the same keys gave (an empty description left out, an empty schema kept, the
keys in the order name, description, parametersJsonSchema), for any declaration."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from proxai_asgi import canonical as c
from proxai_asgi.codec import UpstreamOptions
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols.gemini_generate_content import request

_schemas = st.one_of(
    st.none(),
    st.just({}),
    st.dictionaries(st.sampled_from(["type", "properties", "required"]), st.text(max_size=5)),
    st.builds(lambda s: msgspec.Raw(msgspec.json.encode(s)), st.just({"type": "object"})),
)
_tools = st.lists(
    st.builds(
        c.Tool,
        name=st.text(min_size=1, max_size=8),
        description=st.one_of(st.none(), st.just(""), st.text(max_size=8)),
        parameters=_schemas,
        strict=st.one_of(st.none(), st.booleans()),
    ),
    max_size=4,
)


def _as_dict(t: c.Tool) -> dict[str, Any]:
    """The declaration as a dict of the keys it has (the encoder's earlier form)."""
    d: dict[str, Any] = {"name": t.name}
    if t.description:
        d["description"] = t.description
    if t.parameters is not None:
        d["parametersJsonSchema"] = t.parameters
    return d


@settings(max_examples=200, deadline=None)
@given(tools=_tools)
def test_declarations_are_written_as_the_dict_of_their_keys(tools: list[c.Tool]) -> None:
    req = c.Request(model="m", messages=[c.Message(role="user", content=[c.Text(text="hi")])])
    req.tools = tools
    body = request.encode_request(req, TranslationReport(), UpstreamOptions())
    want = msgspec.json.encode({"functionDeclarations": [_as_dict(t) for t in tools]})
    if tools:
        assert b'"tools":[' + want + b"]" in body
    else:
        assert b'"tools"' not in body
