"""All twelve translated directions, sans-IO, over every real capture.

- a translated stream passes the client protocol's strict grammar validator;
- it is byte-identical whatever the upstream's chunk boundaries;
- folding it gives the non-streamed translation of the same answer (same ids, stop,
  content, usage), for SSE and JSON captures alike;
- a capture's request, as a client request, becomes a valid upstream request that
  keeps the system text, the turns and the tools.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import PROTOCOLS as REGISTERED
from proxai_asgi.codec import Codec, ProtocolName, UpstreamOptions, fold, unfold
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols import get_codec
from proxai_asgi.sse import SSEDecoder
from tests.helpers.captures import capture_names, load, request_body, response_body
from tests.helpers.validate_anthropic import validate_anthropic_stream
from tests.helpers.validate_chat import validate_chat_stream
from tests.helpers.validate_gemini import validate_gemini_response, validate_gemini_stream
from tests.helpers.validate_responses import validate_responses_stream

PROTOCOLS: list[ProtocolName] = list(REGISTERED)  # every registered codec
PREFIX = {
    "chat": "openai_chat_completions",
    "responses": "openai_responses",
    "anthropic": "anthropic_messages",
    "gemini": "gemini_generate_content",
}


def protocol_of(name: str) -> ProtocolName:
    return PREFIX[name.split("_")[0]]  # type: ignore[return-value]


def ok_captures(kind: str) -> list[str]:
    return [
        n
        for n in capture_names()
        # error recordings are named *_err_*; n=3 is rejected by design
        if f"_{kind}_" in n and "n3_choices" not in n
    ]


SSE = [(n, client) for n in ok_captures("sse") for client in PROTOCOLS if client != protocol_of(n)]
JSON = [
    (n, client) for n in ok_captures("json") for client in PROTOCOLS if client != protocol_of(n)
]
REQUEST = {"model": "m", "messages": [], "stream": True, "include_usage": True}


def client_request() -> c.Request:
    return c.Request(model="m", messages=[], stream=True, include_usage=True)


def upstream_events(name: str, chunks: list[bytes] | None = None) -> list[c.StreamEvent]:
    body = response_body(name)
    dec = get_codec(protocol_of(name)).stream_decoder()
    sse = SSEDecoder()
    out: list[c.StreamEvent] = []
    for ch in chunks if chunks is not None else [body]:
        for e in sse.decode(ch):
            out.extend(dec.feed(e))
    for e in sse.flush():
        out.extend(dec.feed(e))
    out.extend(dec.close())
    return out


def encode_stream(client: ProtocolName, events: list[c.StreamEvent]) -> bytes:
    enc = get_codec(client).stream_encoder(client_request())
    return b"".join(enc.encode(e) for e in events)


_CLOCK = re.compile(rb'"(created|created_at)":\d+')


def without_clock(body: bytes) -> bytes:
    """Anthropic answers carry no timestamp, so OpenAI-shaped output stamps the
    current second; blank it where two runs are compared."""
    return _CLOCK.sub(rb'"\1":0', body)


def validate(client: ProtocolName, body: bytes) -> dict[str, Any]:
    """Validate a client stream; return its gist as the client would fold it."""
    if client == "gemini_generate_content":
        g = validate_gemini_stream(body)
        assert g.error is None, g.error
        return g.gist
    if client == "anthropic_messages":
        a = validate_anthropic_stream(body)
        assert a.message is not None and a.error is None
        return {
            "id": a.message["id"],
            "text": "".join(b.text for b in a.blocks if b.type == "text"),
            "calls": [
                (b.start["id"], b.start["name"], json.loads(b.partial_json or "{}"))
                for b in a.blocks
                if b.type == "tool_use"
            ],
            # A thinking block with no carrier has signature "" in its start and no
            # signature_delta: the same thing as the JSON form's "".
            "thinking": [(b.thinking, b.signature or "") for b in a.blocks if b.type == "thinking"],
            "stop": a.stop_reason,
            "usage": {k: v for k, v in (a.usage or {}).items() if v is not None},
        }
    if client == "openai_chat_completions":
        ch = validate_chat_stream(body, include_usage=True)
        assert ch.error is None
        return {
            "id": ch.id,
            "text": ch.content or "",
            "refusal": ch.refusal,
            "calls": [
                (t["id"], t["name"], json.loads(t["arguments"] or "{}")) for t in ch.tool_calls
            ],
            "reasoning": ch.reasoning,
            "stop": ch.finish_reason,
            "usage": ch.usage,
        }
    r = validate_responses_stream(body)
    assert r.response is not None and r.error is None
    return responses_gist(r.response)


def responses_gist(resp: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": resp["id"],
        "status": resp["status"],
        "output": resp["output"],
        "usage": resp["usage"],
        "incomplete_details": resp.get("incomplete_details"),
    }


def json_gist(client: ProtocolName, body: bytes) -> dict[str, Any]:
    if client == "gemini_generate_content":
        return validate_gemini_response(body)
    d = json.loads(body)
    if client == "anthropic_messages":
        return {
            "id": d["id"],
            "text": "".join(b["text"] for b in d["content"] if b["type"] == "text"),
            "calls": [
                (b["id"], b["name"], b["input"]) for b in d["content"] if b["type"] == "tool_use"
            ],
            "thinking": [
                (b["thinking"], b["signature"]) for b in d["content"] if b["type"] == "thinking"
            ],
            "stop": d["stop_reason"],
            "usage": {k: v for k, v in d["usage"].items() if v is not None},
        }
    if client == "openai_chat_completions":
        msg = d["choices"][0]["message"]
        return {
            "id": d["id"],
            "text": msg.get("content") or "",
            "refusal": msg.get("refusal"),
            "calls": [
                (t["id"], t["function"]["name"], json.loads(t["function"]["arguments"] or "{}"))
                for t in msg.get("tool_calls") or []
            ],
            "reasoning": msg.get("reasoning_content"),
            "stop": d["choices"][0]["finish_reason"],
            "usage": d["usage"],
        }
    return responses_gist(d)


def normalise_usage(g: dict[str, Any]) -> dict[str, Any]:
    # Anthropic message_start/delta usage carries only some keys; compare the numbers
    # both shapes have.
    u = g.get("usage") or {}
    g = dict(g)
    g["usage"] = {
        k: u[k]
        for k in (
            "input_tokens",
            "output_tokens",
            "prompt_tokens",
            "completion_tokens",
            "total_tokens",
        )
        if k in u
    }
    return g


@pytest.mark.parametrize(("name", "client"), SSE)
def test_translated_stream_passes_the_client_protocols_strict_validator(
    name: str, client: ProtocolName
) -> None:
    validate(client, encode_stream(client, upstream_events(name)))


@pytest.mark.parametrize(("name", "client"), SSE)
def test_translated_stream_is_identical_whatever_the_upstream_chunk_boundaries(
    name: str, client: ProtocolName
) -> None:
    body = response_body(name)
    whole = without_clock(encode_stream(client, upstream_events(name)))
    # every split of a short body; of a long one (99 KB), ~600 spread over it: its
    # bytewise run below still puts a boundary at every byte (suite time)
    step = 1 if len(body) < 12_000 else max(31, len(body) // 600)
    for i in range(1, len(body), step):
        split = encode_stream(client, upstream_events(name, [body[:i], body[i:]]))
        assert without_clock(split) == whole, i
    bytewise = encode_stream(client, upstream_events(name, [bytes([b]) for b in body]))
    assert without_clock(bytewise) == whole


def _non_stream(client: ProtocolName, response: c.Response) -> bytes:
    return get_codec(client).encode_response(response, client_request())


@pytest.mark.parametrize(("name", "client"), SSE)
def test_folded_stream_agrees_with_the_non_streamed_translation(
    name: str, client: ProtocolName
) -> None:
    events = upstream_events(name)
    streamed = validate(client, encode_stream(client, events))
    whole = json_gist(client, _non_stream(client, fold(events)))
    assert normalise_usage(streamed) == normalise_usage(whole)


@pytest.mark.parametrize(("name", "client"), JSON)
def test_non_streamed_answer_agrees_with_its_streamed_translation(
    name: str, client: ProtocolName
) -> None:
    response = get_codec(protocol_of(name)).decode_response(response_body(name))
    whole = json_gist(client, _non_stream(client, response))
    streamed = validate(client, encode_stream(client, unfold(response)))
    assert normalise_usage(streamed) == normalise_usage(whole)


_ANTHROPIC_REFUSAL_SSE = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_ref1",
            "type": "message",
            "role": "assistant",
            "model": "claude-up",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 7, "output_tokens": 1},
        },
    },
    {
        "type": "message_delta",
        "delta": {
            "stop_reason": "refusal",
            "stop_sequence": None,
            "stop_details": {"type": "refusal", "explanation": "Declined by policy."},
        },
        "usage": {"output_tokens": 1},
    },
    {"type": "message_stop"},
]
_CITE = {
    "type": "web_search_result_location",
    "url": "https://example.test/a",
    "title": "A",
    "cited_text": "a fact",
    "encrypted_index": "",
}
_ANTHROPIC_CITATIONS_SSE = [
    _ANTHROPIC_REFUSAL_SSE[0],
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "citations_delta", "citation": _CITE},
    },
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "A "}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "fact."}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 3},
    },
    {"type": "message_stop"},
]


def _anthropic_events(frames: list[dict[str, Any]]) -> list[c.StreamEvent]:
    body = b"".join(f"event: {f['type']}\ndata: {json.dumps(f)}\n\n".encode() for f in frames)
    dec = get_codec("anthropic_messages").stream_decoder()
    out: list[c.StreamEvent] = []
    for e in SSEDecoder().decode(body):
        out.extend(dec.feed(e))
    out.extend(dec.close())
    return out


def test_an_anthropic_refusal_explanation_reaches_a_responses_client_alike_both_ways() -> None:
    """Only stop_details.explanation: a message item with a refusal part, streamed and
    not, and the two agree."""
    events = _anthropic_events(_ANTHROPIC_REFUSAL_SSE)
    streamed = validate("openai_responses", encode_stream("openai_responses", events))
    whole = json_gist("openai_responses", _non_stream("openai_responses", fold(events)))
    assert streamed == whole
    assert whole["status"] == "failed"
    assert [p for item in whole["output"] for p in item["content"]] == [
        {"type": "refusal", "refusal": "Declined by policy."}
    ]


def test_anthropic_citations_span_the_whole_text_for_a_responses_client_alike_both_ways() -> None:
    events = _anthropic_events(_ANTHROPIC_CITATIONS_SSE)
    streamed = validate("openai_responses", encode_stream("openai_responses", events))
    whole = json_gist("openai_responses", _non_stream("openai_responses", fold(events)))
    assert streamed == whole
    [ann] = whole["output"][0]["content"][0]["annotations"]
    assert (ann["url"], ann["start_index"], ann["end_index"]) == (
        "https://example.test/a",
        0,
        len("A fact."),
    )


# ---------------------------------------------------------------- requests


def _translate_request(
    client: ProtocolName, target: ProtocolName, body: dict[str, Any], **options: Any
) -> tuple[dict[str, Any], TranslationReport]:
    report = TranslationReport()
    creq = get_codec(client).decode_request(json.dumps(body).encode(), report)
    out = get_codec(target).encode_request(creq, report, UpstreamOptions(**options))
    return json.loads(out), report


_GRAMMAR = {"syntax": "lark", "definition": "start: /.+/"}


def test_a_chat_custom_tool_grammar_reaches_a_responses_upstream_in_the_responses_shape() -> None:
    chat_tool = {
        "type": "custom",
        "custom": {"name": "apply_patch", "format": {"type": "grammar", "grammar": _GRAMMAR}},
    }
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [chat_tool]}
    out, _ = _translate_request("openai_chat_completions", "openai_responses", body)
    assert out["tools"] == [
        {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", **_GRAMMAR}}
    ]


def test_a_responses_custom_tool_grammar_reaches_a_native_chat_upstream_in_the_chat_shape() -> None:
    tool = {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", **_GRAMMAR}}
    body = {"model": "m", "input": "hi", "tools": [tool]}
    out, _ = _translate_request(
        "openai_responses", "openai_chat_completions", body, native_custom_tools=True
    )
    assert out["tools"] == [
        {
            "type": "custom",
            "custom": {"name": "apply_patch", "format": {"type": "grammar", "grammar": _GRAMMAR}},
        }
    ]


def test_a_long_claude_code_user_id_reaches_openai_upstreams_as_a_stable_hash() -> None:
    user_id = "user_" + "f" * 64 + "_account_" + "0" * 36 + "_session_" + "1" * 36
    body = {
        "model": "m",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"user_id": user_id},
    }
    chat, _ = _translate_request("anthropic_messages", "openai_chat_completions", body)
    responses, _ = _translate_request("anthropic_messages", "openai_responses", body)
    assert chat["user"] == responses["safety_identifier"]
    assert chat["user"].startswith("sha256:") and len(chat["user"]) <= 128


def test_claude_codes_adaptive_thinking_sends_no_reasoning_to_openai_upstreams() -> None:
    body = {
        "model": "m",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": {"type": "adaptive"},
    }
    chat, report = _translate_request("anthropic_messages", "openai_chat_completions", body)
    assert "reasoning_effort" not in chat and report.dropped == []
    responses, report = _translate_request("anthropic_messages", "openai_responses", body)
    assert "reasoning" not in responses and "include" not in responses
    assert report.dropped == []


# Recorded requests their provider rejected for their shape, which the client codec
# rejects the same way (tests/protocols/*/test_captures.py compares the messages). The
# Anthropic 400 is model-specific (an effort level that model lacks): the upstream's.
REJECTED_AS_THEIR_PROVIDER_DID = {"responses_err_400_invalid_request"}

REQUEST_CAPTURES = [
    (n, target)
    for n in capture_names()
    if "n3_choices" not in n  # the n=3 recording has no request body
    for target in PROTOCOLS
    if target != protocol_of(n)
]


def _canonical_texts(req: c.Request) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    system = [t.text for t in req.system]
    turns = [
        (m.role, " ".join(p.text for p in m.content if isinstance(p, c.Text))) for m in req.messages
    ]
    tools = [t.name for t in req.tools]
    return system, turns, tools


@pytest.mark.parametrize(("name", "target"), REQUEST_CAPTURES)
def test_capture_request_becomes_a_valid_upstream_request_with_the_same_conversation(
    name: str, target: ProtocolName
) -> None:
    source: Codec = get_codec(protocol_of(name))
    upstream: Codec = get_codec(target)
    report = TranslationReport(lossy=False)
    if name in REJECTED_AS_THEIR_PROVIDER_DID:
        with pytest.raises(ProxyError) as info:
            source.decode_request(request_body(name), report)
        assert info.value.status == 400
        return
    try:
        creq = source.decode_request(request_body(name), report)
        if source.name == "gemini_generate_content":
            creq.model = _url_model(load(name)["request"]["url"])
        body = upstream.encode_request(creq, report, UpstreamOptions())
    except Exception as exc:  # pragma: no cover - the message says why
        pytest.fail(f"{name} -> {target}: {exc}")
    # The upstream body is valid for its protocol: its own client decoder accepts it.
    again = upstream.decode_request(body, TranslationReport(lossy=True))
    want_system, want_turns, want_tools = _canonical_texts(creq)
    got_system, got_turns, got_tools = _canonical_texts(again)
    assert "\n\n".join(got_system) == "\n\n".join(want_system)
    assert got_turns == want_turns
    assert got_tools == want_tools
    want_model = (
        _url_model(load(name)["request"]["url"])
        if source.name == "gemini_generate_content"
        else load(name)["request"]["body"]["model"]
    )
    if target != "gemini_generate_content":  # Gemini has the model in its URL
        assert msgspec.json.decode(body)["model"] == want_model


def _url_model(url: str) -> str:
    return url.split("/models/", 1)[1].split(":", 1)[0]


def test_a_gemini_client_request_takes_its_model_from_the_caller() -> None:
    body = request_body("gemini_json_text_basic")
    creq = get_codec("gemini_generate_content").decode_request(
        body, TranslationReport(), "gemini-2.5-flash", True
    )
    assert (creq.model, creq.stream) == ("gemini-2.5-flash", True)
