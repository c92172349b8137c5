"""The real Responses captures: requests as client requests, answers as upstream answers."""

from __future__ import annotations

import json

import pytest

from proxai_asgi import canonical as c
from proxai_asgi.codec import fold
from proxai_asgi.errors import ProxyError, TranslationReport
from proxai_asgi.protocols.openai_responses import CODEC
from tests.helpers.captures import capture_names, load, request_body, response_body
from tests.helpers.validate_responses import validate_responses_stream

from ._util import decode_stream, encode_stream, req

SSE = capture_names("responses_sse")
JSON = capture_names("responses_json")


def test_the_captures_are_there() -> None:
    assert len(SSE) == 4 and len(JSON) == 3


# (The 400 recording's request is one OpenAI rejected for its shape: the next test.)
@pytest.mark.parametrize(
    "name", [n for n in capture_names("responses_") if n != "responses_err_400_invalid_request"]
)
def test_every_capture_request_decodes_as_a_client_request(name: str) -> None:
    report = TranslationReport()
    creq = CODEC.decode_request(request_body(name), report)
    body = load(name)["request"]["body"]
    assert creq.model == body["model"] and creq.stream is bool(body.get("stream"))
    assert creq.messages and creq.messages[-1].role == "user"
    assert report.dropped == []


def test_a_request_openai_rejected_is_rejected_with_openais_message_and_param() -> None:
    recorded = json.loads(load("responses_err_400_invalid_request")["response"]["body"])["error"]
    with pytest.raises(ProxyError) as info:
        CODEC.decode_request(request_body("responses_err_400_invalid_request"), TranslationReport())
    err = info.value
    assert (err.status, err.message, err.param) == (400, recorded["message"], recorded["param"])
    assert err.code == recorded["code"]


def test_the_parallel_calls_capture_request_hoists_its_developer_message() -> None:
    creq = CODEC.decode_request(
        request_body("responses_sse_parallel_function_calls"), TranslationReport()
    )
    assert [t.text for t in creq.system] == ["Use parallel tool calling."]
    assert creq.tools[0].name == "secret_retrieval_tool" and creq.tools[0].strict is False


def test_the_refusal_capture_request_asks_for_a_json_schema() -> None:
    creq = CODEC.decode_request(request_body("responses_json_refusal"), TranslationReport())
    assert creq.response_format is not None and creq.response_format.type == "json_schema"
    assert creq.response_format.name == "FentanylHandbook" and creq.response_format.strict is True


def test_the_cached_tokens_capture_request_replays_an_assistant_message() -> None:
    creq = CODEC.decode_request(request_body("responses_json_cached_tokens"), TranslationReport())
    assert [m.role for m in creq.messages] == ["user", "assistant", "user"]
    text = creq.messages[1].content[0]
    assert isinstance(text, c.Text) and text.text.startswith('"Impressive... most impressive!"')


def test_json_text_basic_capture() -> None:
    r = CODEC.decode_response(response_body("responses_json_text_basic"))
    assert r.id == "resp_0bee99a5de5b12910068f9669f8f3481958652a29720d87669"
    assert r.model == "gpt-4o-2024-08-06" and r.created == 1761175200
    assert r.content == [c.Text(text="4200 + 42 equals 4242.")]
    assert r.stop_reason == "end_turn" and r.usage == c.Usage(input_tokens=16, output_tokens=11)


def test_json_cached_tokens_capture() -> None:
    r = CODEC.decode_response(response_body("responses_json_cached_tokens"))
    assert r.usage == c.Usage(input_tokens=3763, output_tokens=44, cached_tokens=3584)
    assert len(r.content) == 1 and isinstance(r.content[0], c.Text)
    assert r.content[0].text.startswith('"I have altered the deal.')


def test_json_refusal_capture() -> None:
    r = CODEC.decode_response(response_body("responses_json_refusal"))
    assert r.content == [c.Refusal(text="I'm very sorry, but I can't assist with that.")]
    assert r.stop_reason == "refusal"


def test_sse_text_basic_capture() -> None:
    events = decode_stream(response_body("responses_sse_text_basic"))
    assert events[0] == c.MessageStart(
        id="resp_0360bd45725b0a010068f966a4c4a881959717ba17b93477ef",
        model="gpt-4o-2024-08-06",
        created=1761175204,
    )
    r = fold(events)
    assert r.content == [c.Text(text="4200 + 42 equals 4242.")]
    assert r.stop_reason == "end_turn" and r.usage == c.Usage(input_tokens=16, output_tokens=11)
    deltas = [e for e in events if isinstance(e, c.BlockDelta)]
    assert len(deltas) == 10  # one per upstream delta, no duplicate from *.done


def test_sse_parallel_function_calls_capture() -> None:
    r = fold(decode_stream(response_body("responses_sse_parallel_function_calls")))
    assert r.content == [
        c.ToolCall(
            id="call_sKC7OABqf2A2PTLCm0CLeRWV",
            name="secret_retrieval_tool",
            arguments='{"password":"mellon"}',
            item_id="fc_0c3b09d20eedf2d30068f966bad8b88190af96d232f504ef1f",
        ),
        c.ToolCall(
            id="call_OdR3s3xop0vtgkDyWRMLafuH",
            name="secret_retrieval_tool",
            arguments='{"password":"radiance"}',
            item_id="fc_0c3b09d20eedf2d30068f966bafd288190a9045fdc554de6d5",
        ),
    ]
    assert r.stop_reason == "tool_use"


def test_sse_reasoning_summary_capture() -> None:
    body = response_body("responses_sse_reasoning_summary")
    r = fold(decode_stream(body))
    reasoning, text = r.content
    assert isinstance(reasoning, c.Reasoning) and reasoning.summary
    assert reasoning.item_id == "rs_0a1097cbfef27a8c00696afa2459008196a08a4261aba00f56"
    # the three summary parts, joined as the JSON path joins them
    final = json.loads(body.decode().split("event: response.completed\ndata: ")[1])
    parts = [s["text"] for s in final["response"]["output"][0]["summary"]]
    assert len(parts) == 3 and reasoning.text == "\n\n".join(parts)
    assert text == c.Text(text="3")
    assert r.usage.reasoning_tokens == 832 and r.stop_reason == "end_turn"


def test_sse_incomplete_max_output_tokens_capture() -> None:
    r = fold(decode_stream(response_body("responses_sse_incomplete_max_output_tokens")))
    assert r.stop_reason == "max_tokens" and r.usage.output_tokens == 50
    (text,) = r.content
    assert isinstance(text, c.Text) and text.text.endswith("9. Florida")


@pytest.mark.parametrize("name", SSE)
def test_sse_split_at_every_byte_gives_the_same_canonical_events(name: str) -> None:
    body = response_body(name)
    whole = decode_stream(body)
    assert decode_stream(body, step=1) == whole
    assert decode_stream(body, step=7) == whole


@pytest.mark.parametrize("name", SSE)
def test_sse_captures_and_the_json_snapshot_they_end_with_agree(name: str) -> None:
    body = response_body(name).decode()
    terminal = body.rsplit("data: ", 1)[1]
    snapshot = json.loads(terminal)["response"]
    from_json = CODEC.decode_response(json.dumps(snapshot).encode())
    from_stream = fold(decode_stream(response_body(name)))
    assert from_stream.content == from_json.content
    assert from_stream.stop_reason == from_json.stop_reason and from_stream.usage == from_json.usage


@pytest.mark.parametrize("name", SSE)
def test_sse_captures_reencode_to_a_valid_client_stream(name: str) -> None:
    events = decode_stream(response_body(name))
    stream = validate_responses_stream(encode_stream(events, req(stream=True)))
    assert stream.response is not None
    # the upstream's own item ids survive where they are Responses ids
    upstream_ids = [
        p.item_id for p in fold(events).content if isinstance(p, (c.ToolCall, c.Reasoning))
    ]
    assert all(i in [item["id"] for item in stream.items] for i in upstream_ids)


def test_the_error_capture_body_keeps_its_status_message_and_param() -> None:
    cap = load("responses_err_400_invalid_request")
    err = CODEC.decode_error(cap["response"]["status"], cap["response"]["body"].encode())
    assert err.status == 400 and err.param == "temperature"
    assert err.message.startswith("Invalid 'temperature'")
    body = json.loads(CODEC.encode_error(err))
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"] == err.message


@pytest.mark.parametrize("name", SSE)
def test_sse_captures_decode_encode_decode_is_stable(name: str) -> None:
    first = fold(decode_stream(response_body(name)))
    second = fold(
        decode_stream(encode_stream(decode_stream(response_body(name)), req(stream=True)))
    )
    assert second.content == first.content
    assert (second.id, second.model, second.created) == (first.id, first.model, first.created)
    assert second.stop_reason == first.stop_reason and second.usage == first.usage
