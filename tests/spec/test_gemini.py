"""One test per row of docs/gemini-spec.md (the spec rows Gemini adds), named after
the row. Hand-written Gemini wire inputs, composed the way the middleware composes
the codecs (upstream codec -> canonical -> client codec)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName, UpstreamOptions, fold
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols import get_codec
from proxai_asgi.protocols.gemini_generate_content.signatures import SKIP_VALIDATOR
from tests.helpers.validate_gemini import validate_gemini_response, validate_gemini_stream

from ._util import (
    ANTHROPIC,
    CHAT,
    RESPONSES,
    anthropic_sse,
    client_request,
    decode_stream,
    rejected,
    translate_json,
    translate_stream,
    typed_events,
    validate_anthropic,
    validate_chat,
    validate_responses,
)

GEMINI: ProtocolName = "gemini_generate_content"
SIG = "CikB0e2Kbw5tJ9dwYB9m1I9W28H1Pvbhg7iFnlQJMZT9ndxhy/OJBT3V9Qpt+A=="


def answer(*parts: dict[str, Any], finish: str | None = "STOP", **kw: Any) -> dict[str, Any]:
    """A Gemini answer with one candidate."""
    cand: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        cand["finishReason"] = finish
    out: dict[str, Any] = {
        "candidates": [cand],
        "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 3, "totalTokenCount": 10},
        "modelVersion": "gemini-up",
        "responseId": "resp1",
    }
    out.update(kw)
    return out


def sse(*frames: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(f).encode() + b"\r\n\r\n" for f in frames)


def call(name: str, args: dict[str, Any], sig: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
    if sig:
        part["thoughtSignature"] = sig
    return part


def to_client(client: ProtocolName, body: dict[str, Any]) -> dict[str, Any]:
    return translate_json(GEMINI, client, body)


def client_decode(client: ProtocolName, body: dict[str, Any]) -> c.Request:
    return get_codec(client).decode_request(json.dumps(body).encode(), TranslationReport())


def gemini_decode(body: dict[str, Any], lossy: bool = False) -> c.Request:
    return get_codec(GEMINI).decode_request(  # type: ignore[call-arg]
        json.dumps(body).encode(), TranslationReport(lossy), "gemini-x", False
    )


def to_gemini(request: c.Request) -> dict[str, Any]:
    out = get_codec(GEMINI).encode_request(request, TranslationReport(), UpstreamOptions())
    result: dict[str, Any] = json.loads(out)
    return result


# ================================================================ refusal & status


def test_R1_stop_with_text_is_a_normal_end_of_turn() -> None:
    body = answer({"text": "Hi."})
    assert to_client(CHAT, body)["choices"][0]["finish_reason"] == "stop"
    assert to_client(ANTHROPIC, body)["stop_reason"] == "end_turn"
    assert to_client(RESPONSES, body)["status"] == "completed"


def test_R2_stop_with_function_calls_is_a_tool_use_stop() -> None:
    body = answer(call("get", {"a": 1}), finish="STOP")
    assert to_client(CHAT, body)["choices"][0]["finish_reason"] == "tool_calls"
    assert to_client(ANTHROPIC, body)["stop_reason"] == "tool_use"
    raw = translate_stream(GEMINI, ANTHROPIC, sse(body))
    assert validate_anthropic(raw).stop_reason == "tool_use"


def test_R3_max_tokens_is_a_truncation() -> None:
    body = answer({"text": "Half"}, finish="MAX_TOKENS")
    assert to_client(CHAT, body)["choices"][0]["finish_reason"] == "length"
    assert to_client(ANTHROPIC, body)["stop_reason"] == "max_tokens"
    resp = to_client(RESPONSES, body)
    assert resp["status"] == "incomplete"
    assert resp["incomplete_details"] == {"reason": "max_output_tokens"}


@pytest.mark.parametrize(
    "reason", ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"]
)
def test_R4_a_blocked_answer_is_a_content_filter_stop(reason: str) -> None:
    body = answer(finish=reason)
    body["candidates"][0]["content"] = {}
    assert to_client(CHAT, body)["choices"][0]["finish_reason"] == "content_filter"
    anthropic = to_client(ANTHROPIC, body)
    assert anthropic["stop_reason"] == "refusal"
    assert reason in anthropic["stop_details"]["explanation"]
    resp = to_client(RESPONSES, body)
    assert resp["status"] == "incomplete"
    assert resp["incomplete_details"] == {"reason": "content_filter"}


BLOCKED = {
    "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
    "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
    "modelVersion": "gemini-up",
    "responseId": "resp2",
}


def test_R5_a_blocked_prompt_is_a_refusal_never_an_empty_success() -> None:
    chat = to_client(CHAT, BLOCKED)["choices"][0]
    assert "PROHIBITED_CONTENT" in chat["message"]["refusal"]
    assert chat["message"].get("content") is None
    anthropic = to_client(ANTHROPIC, BLOCKED)
    assert anthropic["stop_reason"] == "refusal"
    assert "PROHIBITED_CONTENT" in anthropic["content"][0]["text"]
    assert to_client(RESPONSES, BLOCKED)["status"] == "failed"
    streamed = validate_chat(translate_stream(GEMINI, CHAT, sse(BLOCKED)))
    assert streamed.refusal is not None and "PROHIBITED_CONTENT" in streamed.refusal


@pytest.mark.parametrize(
    "reason", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"]
)
def test_R6_a_turn_without_a_usable_answer_is_a_bad_gateway_error(reason: str) -> None:
    body = answer(finish=reason)
    err = rejected(translate_json, GEMINI, CHAT, body, status=502)
    assert reason in err.message
    raw = translate_stream(GEMINI, ANTHROPIC, sse(body))
    assert validate_anthropic(raw).error is not None


def test_R7_an_unsupported_language_is_a_refusal() -> None:
    body = answer(finish="LANGUAGE")
    assert to_client(ANTHROPIC, body)["stop_reason"] == "refusal"
    assert to_client(RESPONSES, body)["status"] == "failed"


def test_R8_a_gemini_client_sees_refusals_as_safety_with_the_wording() -> None:
    refused = c.Response(
        id="msg_1",
        model="m",
        content=[],
        stop_reason="refusal",
        refusal_explanation="Declined by policy.",
    )
    req = client_request(stream=False)
    gist = validate_gemini_response(get_codec(GEMINI).encode_response(refused, req))
    assert (gist["finish"], gist["text"], gist["finish_message"]) == (
        "SAFETY",
        "Declined by policy.",
        "Declined by policy.",
    )
    tools = c.Response(
        id="msg_2",
        model="m",
        content=[c.ToolCall(id="toolu_1", name="get", arguments="{}")],
        stop_reason="tool_use",
    )
    assert validate_gemini_response(get_codec(GEMINI).encode_response(tools, req))["finish"] == (
        "STOP"
    )


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        (400, "INVALID_ARGUMENT", "invalid_request"),
        (401, "UNAUTHENTICATED", "authentication"),
        (403, "PERMISSION_DENIED", "permission"),
        (404, "NOT_FOUND", "not_found"),
        (429, "RESOURCE_EXHAUSTED", "rate_limit"),
        (500, "INTERNAL", "api_error"),
        (503, "UNAVAILABLE", "overloaded"),
        (504, "DEADLINE_EXCEEDED", "timeout"),
    ],
)
def test_R9_google_errors_keep_their_status_both_ways(code: int, status: str, kind: str) -> None:
    body = json.dumps({"error": {"code": code, "message": "why", "status": status}}).encode()
    err = get_codec(GEMINI).decode_error(code, body)
    assert (err.status, err.kind, err.message) == (code, kind, "why")
    assert json.loads(get_codec(GEMINI).encode_error(err)) == {
        "error": {"code": code, "message": "why", "status": status}
    }


def test_R10_a_mid_stream_error_frame_ends_the_client_stream_with_an_error() -> None:
    raw = sse(
        answer({"text": "Hel"}, finish=None),
        {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}},
    )
    events = typed_events(translate_stream(GEMINI, ANTHROPIC, raw))
    assert events[-1]["type"] == "error"
    assert events[-1]["error"]["type"] == "overloaded_error"
    gemini = validate_gemini_stream(translate_stream(ANTHROPIC, GEMINI, _anthropic_error()))
    assert gemini.error is not None and gemini.error["status"] == "UNAVAILABLE"


def _anthropic_start(message_id: str) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 4, "output_tokens": 1},
        },
    }


def _anthropic_error() -> bytes:
    err = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    return anthropic_sse(_anthropic_start("msg_e"), err)


# ================================================================ message placement


def test_P1_roles_and_the_system_instruction_map_to_turns_and_system() -> None:
    req = gemini_decode(
        {
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "contents": [
                {"role": "user", "parts": [{"text": "Hi"}]},
                {"role": "model", "parts": [{"text": "Hello"}]},
                {"parts": [{"text": "Bye"}]},  # no role: user
            ],
        }
    )
    assert [t.text for t in req.system] == ["Be brief."]
    assert [m.role for m in req.messages] == ["user", "assistant", "user"]
    out = to_gemini(req)
    assert out["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert [t["role"] for t in out["contents"]] == ["user", "model", "user"]


def test_P2_function_responses_come_first_and_share_one_user_turn() -> None:
    chat = client_decode(
        CHAT,
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "a", "arguments": "{}"},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "b", "arguments": "{}"},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "one"},
                {"role": "tool", "tool_call_id": "c2", "content": "two"},
                {"role": "user", "content": "and?"},
            ],
        },
    )
    out = to_gemini(chat)
    assert [t["role"] for t in out["contents"]] == ["user", "model", "user"]
    last = out["contents"][2]["parts"]
    assert [p.get("functionResponse", {}).get("name") for p in last] == ["a", "b", None]
    assert last[0]["functionResponse"]["response"] == {"output": "one"}
    assert last[2] == {"text": "and?"}
    # and a Gemini client's user turn with responses and text: results first
    req = gemini_decode(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": [call("a", {})]},
                {
                    "role": "user",
                    "parts": [
                        {"text": "also"},
                        {"functionResponse": {"name": "a", "response": {"output": "x"}}},
                    ],
                },
            ]
        }
    )
    assert [m.role for m in req.messages] == ["user", "assistant", "tool", "user"]


def test_P3_parallel_calls_stay_in_one_model_turn() -> None:
    body = answer(call("a", {"x": 1}), call("b", {"y": 2}))
    msg = to_client(CHAT, body)["choices"][0]["message"]
    assert [t["function"]["name"] for t in msg["tool_calls"]] == ["a", "b"]
    anthropic = to_client(ANTHROPIC, body)
    assert [b["name"] for b in anthropic["content"] if b["type"] == "tool_use"] == ["a", "b"]


def test_P4_thought_parts_are_reasoning() -> None:
    body = answer({"text": "hmm", "thought": True}, {"text": "42"})
    msg = to_client(CHAT, body)["choices"][0]["message"]
    assert (msg["reasoning_content"], msg["content"]) == ("hmm", "42")
    anthropic = to_client(ANTHROPIC, body)
    assert [b["type"] for b in anthropic["content"]] == ["thinking", "text"]
    resp = to_client(RESPONSES, body)
    assert resp["output"][0]["type"] == "reasoning"
    assert resp["output"][0]["summary"] == [{"type": "summary_text", "text": "hmm"}]


# ====================================================================== identifiers


def test_I1_calls_without_ids_get_ids_derived_from_the_response_alike_both_ways() -> None:
    body = answer(call("a", {}), call("a", {}))
    whole = to_client(CHAT, body)["choices"][0]["message"]["tool_calls"]
    streamed = validate_chat(translate_stream(GEMINI, CHAT, sse(body))).tool_calls
    ids = [t["id"] for t in whole]
    assert ids == ["gcall_resp1_0", "gcall_resp1_1"]
    assert [t["id"] for t in streamed] == ids


def test_I2_results_for_derived_ids_name_the_call_and_carry_no_id() -> None:
    ids = [
        t["id"]
        for t in to_client(CHAT, answer(call("a", {})))["choices"][0]["message"]["tool_calls"]
    ]
    history = _chat_history(ids[0], "a")
    out = to_gemini(client_decode(CHAT, history))
    fc = out["contents"][1]["parts"][0]["functionCall"]
    fr = out["contents"][2]["parts"][0]["functionResponse"]
    assert "id" not in fc and "id" not in fr and fr["name"] == "a"
    own = to_gemini(client_decode(CHAT, _chat_history("call_own", "a")))
    assert own["contents"][2]["parts"][0]["functionResponse"]["id"] == "call_own"


def _chat_history(call_id: str, name: str) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "done"},
        ],
    }


def test_I3_a_response_without_id_answers_the_earliest_open_call_of_its_name() -> None:
    req = gemini_decode(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "go"}]},
                {
                    "role": "model",
                    "parts": [call("a", {"n": 1}), call("b", {}), call("a", {"n": 2})],
                },
                {
                    "role": "user",
                    "parts": [
                        {"functionResponse": {"name": "a", "response": {"output": "first"}}},
                        {"functionResponse": {"name": "b", "response": {"output": "bee"}}},
                        {"functionResponse": {"name": "a", "response": {"output": "second"}}},
                    ],
                },
            ]
        }
    )
    calls = [p for p in req.messages[1].content if isinstance(p, c.ToolCall)]
    results = [p for p in req.messages[2].content if isinstance(p, c.ToolResult)]
    assert [r.call_id for r in results] == [calls[0].id, calls[1].id, calls[2].id]
    assert len({x.id for x in calls}) == 3
    anthropic = json.loads(
        get_codec(ANTHROPIC).encode_request(req, TranslationReport(), UpstreamOptions())
    )
    uses = [b["id"] for b in anthropic["messages"][1]["content"]]
    answers = [b["tool_use_id"] for b in anthropic["messages"][2]["content"]]
    assert uses == answers


def test_I4_a_gemini_client_gets_the_upstreams_call_id_and_it_comes_back() -> None:
    upstream = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [{"type": "tool_use", "id": "toolu_9", "name": "get", "input": {"q": 1}}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    out = translate_json(ANTHROPIC, GEMINI, upstream, client_request(stream=False))
    fc = out["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert fc == {"name": "get", "args": {"q": 1}, "id": "toolu_9"}
    req = gemini_decode(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": [{"functionCall": fc}]},
                {
                    "role": "user",
                    "parts": [
                        {"functionResponse": {"id": "toolu_9", "name": "get", "response": {"x": 1}}}
                    ],
                },
            ]
        }
    )
    body = json.loads(
        get_codec(ANTHROPIC).encode_request(req, TranslationReport(), UpstreamOptions())
    )
    assert body["messages"][2]["content"][0]["tool_use_id"] == "toolu_9"
    assert body["messages"][2]["content"][0]["content"] == '{"x":1}'


# ======================================================================= signatures


def _replayed_first_model_turn(
    client: ProtocolName, gemini_answer: dict[str, Any]
) -> dict[str, Any]:
    """A Gemini answer through ``client`` and back: the model turn Gemini gets."""
    if client == ANTHROPIC:
        out = to_client(ANTHROPIC, gemini_answer)
        body: dict[str, Any] = {
            "model": "m",
            "max_tokens": 10,
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": out["content"]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": b["id"], "content": "ok"}
                        for b in out["content"]
                        if b["type"] == "tool_use"
                    ],
                },
            ],
        }
    elif client == RESPONSES:
        out = to_client(RESPONSES, gemini_answer)
        items = [i for i in out["output"]]
        results = [
            {"type": "function_call_output", "call_id": i["call_id"], "output": "ok"}
            for i in items
            if i["type"] == "function_call"
        ]
        body = {"model": "m", "input": [{"role": "user", "content": "go"}, *items, *results]}
    else:
        msg = to_client(CHAT, gemini_answer)["choices"][0]["message"]
        body = {
            "model": "m",
            "messages": [
                {"role": "user", "content": "go"},
                msg,
                *[
                    {"role": "tool", "tool_call_id": t["id"], "content": "ok"}
                    for t in msg["tool_calls"]
                ],
            ],
        }
    gemini = to_gemini(client_decode(client, body))
    turn: dict[str, Any] = gemini["contents"][1]
    assert turn["role"] == "model"
    return turn


@pytest.mark.parametrize("client", [ANTHROPIC, RESPONSES])
def test_S1_S2_a_gemini_signature_survives_clients_that_carry_opaque_data(
    client: ProtocolName,
) -> None:
    turn = _replayed_first_model_turn(client, answer(call("a", {"x": 1}, SIG), call("b", {})))
    assert turn["parts"][0]["thoughtSignature"] == SIG
    assert turn["parts"][0]["functionCall"]["name"] == "a"
    assert "thoughtSignature" not in turn["parts"][1]


def test_S3_history_no_client_could_sign_gets_googles_sentinel() -> None:
    turn = _replayed_first_model_turn(CHAT, answer(call("a", {"x": 1}, SIG), call("b", {})))
    assert (
        turn["parts"][0]["thoughtSignature"] == SKIP_VALIDATOR == "skip_thought_signature_validator"
    )


def test_S4_only_the_first_parallel_call_carries_a_signature() -> None:
    chat = client_decode(
        CHAT,
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": f"c{i}",
                            "type": "function",
                            "function": {"name": "a", "arguments": "{}"},
                        }
                        for i in range(3)
                    ],
                },
                *[{"role": "tool", "tool_call_id": f"c{i}", "content": "ok"} for i in range(3)],
            ],
        },
    )
    parts = to_gemini(chat)["contents"][1]["parts"]
    assert [p.get("thoughtSignature") for p in parts] == [SKIP_VALIDATOR, None, None]


def test_S5_other_providers_signatures_are_never_sent_to_gemini() -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "plan", "signature": "anthropic-sig"},
                    {"type": "redacted_thinking", "data": "anthropic-redacted"},
                    {"type": "text", "text": "done"},
                ],
            },
        ],
    }
    report = TranslationReport()
    creq = get_codec(ANTHROPIC).decode_request(json.dumps(body).encode(), report)
    out = get_codec(GEMINI).encode_request(creq, report, UpstreamOptions())
    assert b"anthropic-sig" not in out and b"anthropic-redacted" not in out
    assert "reasoning" in report.dropped
    assert json.loads(out)["contents"][1]["parts"] == [{"text": "done"}]


@pytest.mark.parametrize("keep_thoughts", [True, False], ids=["sdk", "cli-drops-thoughts"])
def test_S6_a_gemini_client_carries_other_providers_tokens_on_the_call_and_back(
    keep_thoughts: bool,
) -> None:
    upstream = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [
            {"type": "thinking", "thinking": "plan", "signature": "anthropic-sig"},
            {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    out = translate_json(ANTHROPIC, GEMINI, upstream, client_request(stream=False))
    validate_gemini_response(json.dumps(out).encode())  # the SDK's bytes type accepts it
    thought, call_part = out["candidates"][0]["content"]["parts"]
    assert thought == {"text": "plan", "thought": True}
    base64.b64decode(call_part["thoughtSignature"], validate=True)
    # the SDK may give bytes back in the URL-safe alphabet
    sig = call_part["thoughtSignature"].replace("+", "-").replace("/", "_")
    call_part["thoughtSignature"] = sig
    replay = [thought, call_part] if keep_thoughts else [call_part]
    response = {"functionResponse": {"id": "toolu_1", "name": "get", "response": {}}}
    req = gemini_decode(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": replay},
                {"role": "user", "parts": [response]},
            ]
        }
    )
    body = json.loads(
        get_codec(ANTHROPIC).encode_request(req, TranslationReport(), UpstreamOptions())
    )
    assert body["messages"][1]["content"][:2] == [
        {"type": "thinking", "thinking": "plan", "signature": "anthropic-sig"},
        {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {}},
    ]


# ========================================================================== streams


@pytest.mark.parametrize("client", [CHAT, ANTHROPIC, RESPONSES])
def test_T1_a_whole_call_in_one_frame_is_one_block_with_argument_deltas(
    client: ProtocolName,
) -> None:
    raw = sse(
        answer({"text": "Let me look."}, call("a", {"x": 1}), call("b", {"y": 2}), finish=None),
        answer(finish="STOP"),
    )
    out = translate_stream(GEMINI, client, raw)
    if client == CHAT:
        chat = validate_chat(out)
        assert [(t["name"], json.loads(t["arguments"])) for t in chat.tool_calls] == [
            ("a", {"x": 1}),
            ("b", {"y": 2}),
        ]
        assert chat.content == "Let me look."
    elif client == ANTHROPIC:
        a = validate_anthropic(out)
        tools = [b for b in a.blocks if b.type == "tool_use"]
        assert [json.loads(b.partial_json) for b in tools] == [{"x": 1}, {"y": 2}]
    else:
        r = validate_responses(out)
        assert r.response is not None
        calls = [i for i in r.response["output"] if i["type"] == "function_call"]
        assert [json.loads(i["arguments"]) for i in calls] == [{"x": 1}, {"y": 2}]


def test_T2_several_parts_per_frame_fold_like_the_whole_answer() -> None:
    whole = answer({"text": "t", "thought": True}, {"text": "a"}, {"text": "b"}, call("f", {}, SIG))
    events = decode_stream(GEMINI, sse(whole))
    assert fold(events) == get_codec(GEMINI).decode_response(json.dumps(whole).encode())


def test_T3_a_gemini_client_stream_ends_with_finish_and_usage_on_the_last_frame() -> None:
    upstream = _anthropic_tool_stream()
    g = validate_gemini_stream(translate_stream(ANTHROPIC, GEMINI, upstream))
    assert g.error is None
    parts = [p for f in g.frames for p in f["candidates"][0]["content"].get("parts", [])]
    calls = [p for p in parts if "functionCall" in p]
    assert calls == [{"functionCall": {"name": "get", "args": {"q": "x"}, "id": "toolu_1"}}]
    assert g.gist["finish"] == "STOP" and g.gist["text"] == "Looking."
    assert g.frames[-1]["usageMetadata"]["candidatesTokenCount"] == 5


def _anthropic_tool_stream() -> bytes:
    events: list[dict[str, Any]] = [
        _anthropic_start("msg_t"),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Looking."},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"q":'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '"x"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]
    return anthropic_sse(*events)


# ========================================================================= requests


@pytest.mark.parametrize("target", [CHAT, RESPONSES, ANTHROPIC])
def test_Q1_several_candidates_are_rejected_like_n(target: ProtocolName) -> None:
    body = {"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"candidateCount": 2}}
    err = rejected(gemini_decode, body, status=400)
    assert "candidateCount" in err.message
    chat = client_decode(
        CHAT, {"model": "m", "n": 2, "messages": [{"role": "user", "content": "hi"}]}
    )
    with pytest.raises(ProxyError) as info:
        to_gemini(chat)
    assert info.value.param == "n"


@pytest.mark.parametrize(
    ("config", "choice", "tools"),
    [
        ({"mode": "AUTO"}, ("auto", None), ["a", "b"]),
        ({"mode": "NONE"}, ("none", None), ["a", "b"]),
        ({"mode": "ANY"}, ("required", None), ["a", "b"]),
        ({"mode": "ANY", "allowedFunctionNames": ["b"]}, ("tool", "b"), ["b"]),
        ({"mode": "VALIDATED"}, ("auto", None), ["a", "b"]),
    ],
)
def test_Q2_function_calling_modes_map_to_tool_choice(
    config: dict[str, Any], choice: tuple[str, str | None], tools: list[str]
) -> None:
    decls = [{"name": "a"}, {"name": "b", "parameters": {"type": "OBJECT"}}]
    req = gemini_decode(
        {
            "contents": [{"parts": [{"text": "hi"}]}],
            "tools": [{"functionDeclarations": decls}],
            "toolConfig": {"functionCallingConfig": config},
        }
    )
    assert req.tool_choice is not None
    assert (req.tool_choice.mode, req.tool_choice.name) == choice
    assert [t.name for t in req.tools] == tools


def test_Q3_cached_content_is_rejected_and_safety_settings_reported() -> None:
    body: dict[str, Any] = {
        "contents": [{"parts": [{"text": "hi"}]}],
        "cachedContent": "cachedContents/x",
    }
    assert "cachedContent" in rejected(gemini_decode, body, status=400).message
    body = {
        "contents": [{"parts": [{"text": "hi"}]}],
        "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
    }
    report = TranslationReport()
    get_codec(GEMINI).decode_request(json.dumps(body).encode(), report)
    assert report.dropped == ["safetySettings"]


def test_Q4_thinking_config_maps_to_reasoning_both_ways() -> None:
    req = gemini_decode(
        {
            "contents": [{"parts": [{"text": "hi"}]}],
            "generation_config": {
                "thinking_config": {"include_thoughts": True, "thinking_budget": 2048}
            },
        }
    )
    assert req.reasoning == c.ReasoningConfig(summary="auto", enabled=True, budget_tokens=2048)
    anthropic = json.loads(
        get_codec(ANTHROPIC).encode_request(req, TranslationReport(), UpstreamOptions())
    )
    assert anthropic["thinking"]["budget_tokens"] == 2048
    # Gemini CLI's budget with no output limit: Anthropic needs budget < max_tokens
    cli = gemini_decode(
        {
            "contents": [{"parts": [{"text": "hi"}]}],
            "generationConfig": {
                "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 8192}
            },
        }
    )
    sent = json.loads(
        get_codec(ANTHROPIC).encode_request(cli, TranslationReport(), UpstreamOptions())
    )
    assert sent["thinking"]["budget_tokens"] == 8192 < sent["max_tokens"]
    off = client_decode(
        RESPONSES, {"model": "m", "input": "hi", "reasoning": {"effort": "high", "summary": "auto"}}
    )
    assert to_gemini(off)["generationConfig"]["thinkingConfig"] == {
        "includeThoughts": True,
        "thinkingLevel": "high",
    }
    none = gemini_decode(
        {
            "contents": [{"parts": [{"text": "hi"}]}],
            "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}},
        }
    )
    assert none.reasoning == c.ReasoningConfig(enabled=False, effort="none")


def test_Q5_usage_counts_thoughts_as_output_and_cache_as_input() -> None:
    body = answer({"text": "x"})
    body["usageMetadata"] = {
        "promptTokenCount": 100,
        "cachedContentTokenCount": 60,
        "candidatesTokenCount": 10,
        "thoughtsTokenCount": 30,
        "totalTokenCount": 140,
    }
    usage = to_client(CHAT, body)["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (100, 40)
    assert usage["prompt_tokens_details"]["cached_tokens"] == 60
    assert usage["completion_tokens_details"]["reasoning_tokens"] == 30
    anthropic = to_client(ANTHROPIC, body)["usage"]
    assert (anthropic["input_tokens"], anthropic["cache_read_input_tokens"]) == (40, 60)


def test_Q6_google_schemas_become_json_schema() -> None:
    req = gemini_decode(
        {
            "contents": [{"parts": [{"text": "hi"}]}],
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "name": "f",
                            "parameters": {
                                "type": "OBJECT",
                                "properties": {
                                    "s": {"type": "STRING", "nullable": True},
                                    "l": {"type": "ARRAY", "items": {"type": "INTEGER"}},
                                },
                                "propertyOrdering": ["s", "l"],
                                "required": ["s"],
                            },
                        }
                    ]
                },
                {"googleSearch": {}},
            ],
        }
    )
    assert req.tools[0].parameters == {
        "type": "object",
        "properties": {
            "s": {"type": ["string", "null"]},
            "l": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["s"],
    }
    assert [h.type for h in req.hosted_tools] == ["googleSearch"]
    out = to_gemini(req)
    assert (
        out["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]
        == req.tools[0].parameters
    )
    assert out["tools"][1] == {"googleSearch": {}}
