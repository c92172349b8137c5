"""Gemini through the middleware on uvicorn, with the official google-genai SDK as
the client: pass-through byte for byte, the model in the URL (routing and
model_rewrite), credentials (x-goog-api-key, ?key=, a configured key), tool loops and
thought signatures through other upstreams, countTokens, the models listing, and
errors in Google's shape."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from proxai_asgi import ProxaiMiddleware, Route, Upstream
from tests.helpers.captures import load, response_body
from tests.helpers.servers import FakeUpstream, Reply, reply_from_capture, serve

from .conftest import Stack

GEMINI = "gemini_generate_content"


def client(base: str, key: str = "g-client-key") -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=base))


def _json_reply(body: dict[str, Any], status: int = 200) -> Reply:
    return Reply(status, [("content-type", "application/json")], [json.dumps(body).encode()])


# ---------------------------------------------------------------- pass-through


@pytest.mark.parametrize("name", ["gemini_json_tools", "gemini_sse_tools"])
def test_gemini_to_gemini_is_byte_for_byte_with_the_rewritten_model_in_the_url(
    stack: Stack, fake: FakeUpstream, name: str
) -> None:
    fake.push(reply_from_capture(name))
    base = stack.proxy(fake, GEMINI, model_rewrite="gemini-2.5-flash")
    stream = "_sse_" in name
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    sent = load(name)["request"]["body"]
    r = httpx.post(
        f"{base}/v1beta/models/my-alias:{method}",
        json=sent,
        headers={"x-goog-api-key": "g-client-key"},
        timeout=30,
    )
    assert r.status_code == 200
    assert r.content == response_body(name)
    seen = fake.seen[0]
    assert seen.path == "/v1beta/models/gemini-2.5-flash:" + method.split("?")[0]
    assert seen.query == (b"alt=sse" if stream else b"")
    assert seen.json() == sent
    assert seen.headers["x-goog-api-key"] == "g-client-key"


def test_a_query_key_is_forwarded_as_the_header_never_in_the_url(
    stack: Stack, fake: FakeUpstream
) -> None:
    fake.push(reply_from_capture("gemini_json_text_basic"))
    base = stack.proxy(fake, GEMINI)
    body = load("gemini_json_text_basic")["request"]["body"]
    r = httpx.post(
        f"{base}/v1/models/gemini-2.5-flash:generateContent?key=g-query-key", json=body, timeout=30
    )
    assert r.status_code == 200
    seen = fake.seen[0]
    assert seen.headers["x-goog-api-key"] == "g-query-key"
    assert b"g-query-key" not in seen.query


def test_a_configured_key_replaces_the_clients_in_googles_header(
    stack: Stack, fake: FakeUpstream
) -> None:
    fake.push(reply_from_capture("chat_json_text_basic"))
    base = stack.proxy(fake, "openai_chat_completions", api_key="sk-configured-key")
    g = client(base)  # held: a dropped Client closes its connection pool
    g.models.generate_content(model="m", contents="hi")
    headers = fake.seen[0].headers
    assert headers["authorization"] == "Bearer sk-configured-key"
    assert "x-goog-api-key" not in headers and "x-goog-api-client" not in headers


def test_an_upstream_key_is_sent_to_gemini_in_its_own_header(
    stack: Stack, fake: FakeUpstream
) -> None:
    fake.push(reply_from_capture("gemini_json_text_basic"))
    base = stack.proxy(fake, GEMINI, api_key="g-configured-key")
    import anthropic

    a = anthropic.Anthropic(base_url=base, api_key="sk-ant-client", max_retries=0)
    a.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    headers = fake.seen[0].headers
    assert headers["x-goog-api-key"] == "g-configured-key"
    assert "x-api-key" not in headers and "authorization" not in headers


# ------------------------------------------------------------------ tool loops


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize(
    "upstream", ["openai_chat_completions", "openai_responses", "anthropic_messages"]
)
def test_a_google_genai_tool_loop_reaches_other_upstreams_with_matching_ids(
    stack: Stack, fake: FakeUpstream, upstream: str, stream: bool
) -> None:
    name = {
        "openai_chat_completions": "chat_json_parallel_tool_calls",
        "openai_responses": "responses_sse_parallel_function_calls",
        "anthropic_messages": "anthropic_json_parallel_tool_use",
    }[upstream]
    fake.push(reply_from_capture(name))
    base = stack.proxy(fake, upstream)  # type: ignore[arg-type]
    g = client(base)
    tool = types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="secret_retrieval_tool",
                description="Get a secret",
                parameters_json_schema={
                    "type": "object",
                    "properties": {"password": {"type": "string"}},
                },
            )
        ]
    )
    config = types.GenerateContentConfig(tools=[tool])
    first: list[types.GenerateContentResponse]
    if stream:
        first = list(g.models.generate_content_stream(model="m", contents="go", config=config))
    else:
        first = [g.models.generate_content(model="m", contents="go", config=config)]
    calls = [
        p.function_call
        for r in first
        for p in (
            r.candidates[0].content.parts if r.candidates and r.candidates[0].content else None
        )
        or []
        if p.function_call is not None
    ]
    assert len(calls) >= 2 and all(c.id for c in calls)
    model_turn = types.Content(role="model", parts=[types.Part(function_call=c) for c in calls])
    results = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id=c.id, name=c.name, response={"output": f"secret for {c.args}"}
                )
            )
            for c in calls
        ],
    )
    fake.push(reply_from_capture(name.replace("parallel_tool_calls", "text_basic")))
    g.models.generate_content(
        model="m",
        contents=[types.Content(role="user", parts=[types.Part(text="go")]), model_turn, results],
        config=config,
    )
    sent = fake.seen[-1].json()
    call_ids = [c.id for c in calls]
    if upstream == "anthropic_messages":
        uses = [b["id"] for b in sent["messages"][1]["content"] if b["type"] == "tool_use"]
        answers = [b["tool_use_id"] for b in sent["messages"][2]["content"]]
        assert uses == answers == call_ids
    elif upstream == "openai_chat_completions":
        assert [t["id"] for t in sent["messages"][1]["tool_calls"]] == call_ids
        assert [m["tool_call_id"] for m in sent["messages"][2:]] == call_ids
    else:
        items = sent["input"]
        assert [i["call_id"] for i in items if i.get("type") == "function_call"] == call_ids
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        assert [i["call_id"] for i in outputs] == call_ids
        assert outputs[0]["output"].startswith("secret for")


def test_an_anthropic_signature_survives_a_google_genai_round_trip(
    stack: Stack, fake: FakeUpstream
) -> None:
    answer = {
        "id": "msg_sig",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [
            {"type": "thinking", "thinking": "plan", "signature": "EqQBCkYIBxgCKkBsig=="},
            {"type": "tool_use", "id": "toolu_sig1", "name": "get", "input": {"q": 1}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    fake.push(_json_reply(answer))
    base = stack.proxy(fake, "anthropic_messages")
    g = client(base)
    tool = types.Tool(function_declarations=[types.FunctionDeclaration(name="get")])
    config = types.GenerateContentConfig(tools=[tool])
    r = g.models.generate_content(model="m", contents="go", config=config)
    assert r.candidates and r.candidates[0].content
    turn = r.candidates[0].content  # replayed as the SDK holds it (signature as bytes)
    results = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id="toolu_sig1", name="get", response={"output": "ok"}
                )
            )
        ],
    )
    g.models.generate_content(
        model="m",
        contents=[types.Content(role="user", parts=[types.Part(text="go")]), turn, results],
        config=config,
    )
    replayed = fake.seen[-1].json()["messages"][1]["content"]
    assert replayed[0] == {
        "type": "thinking",
        "thinking": "plan",
        "signature": "EqQBCkYIBxgCKkBsig==",
    }
    assert replayed[1]["id"] == "toolu_sig1"


# ---------------------------------------------------------- side endpoints, errors


def test_count_tokens_answers_in_googles_shape(stack: Stack, fake: FakeUpstream) -> None:
    base = stack.proxy(fake, "anthropic_messages")
    g = client(base)
    r = g.models.count_tokens(model="m", contents="How many tokens is this?")
    assert r.total_tokens is not None and r.total_tokens > 0
    assert fake.seen == []  # an estimate: Anthropic's counter speaks another shape


def test_count_tokens_is_forwarded_to_gemini(stack: Stack, fake: FakeUpstream) -> None:
    fake.push(_json_reply({"totalTokens": 31}))
    base = stack.proxy(fake, GEMINI, model_rewrite="gemini-2.5-flash")
    g = client(base)
    r = g.models.count_tokens(model="alias", contents="hi")
    assert r.total_tokens == 31
    assert fake.seen[0].path == "/v1beta/models/gemini-2.5-flash:countTokens"


def test_the_models_listing_answers_in_googles_shape(stack: Stack, fake: FakeUpstream) -> None:
    base = stack.proxy(fake, "openai_chat_completions")
    r = httpx.get(f"{base}/v1beta/models", headers={"x-goog-api-key": "k"}, timeout=30)
    assert r.status_code == 200
    assert r.json() == {"models": []}  # one glob route: the upstream lists nothing here
    assert httpx.get(f"{base}/v1/models", timeout=30).json()["object"] == "list"


def test_bad_input_is_a_400_in_googles_shape(stack: Stack, fake: FakeUpstream) -> None:
    base = stack.proxy(fake, "anthropic_messages")
    g = client(base)
    with pytest.raises(genai_errors.ClientError) as info:
        g.models.generate_content(
            model="m",
            contents="hi",
            config=types.GenerateContentConfig(candidate_count=2),
        )
    assert info.value.code == 400 and info.value.status == "INVALID_ARGUMENT"
    assert "candidateCount" in (info.value.message or "")
    assert fake.seen == []


def test_an_upstream_error_reaches_google_genai_with_its_status(
    stack: Stack, fake: FakeUpstream
) -> None:
    fake.push(reply_from_capture("chat_err_401_invalid_api_key"))
    base = stack.proxy(fake, "openai_chat_completions")
    g = client(base)
    with pytest.raises(genai_errors.ClientError) as info:
        g.models.generate_content(model="m", contents="hi")
    assert info.value.code == 401 and info.value.status == "UNAUTHENTICATED"


def test_a_gemini_404_reaches_an_openai_client_as_a_404(stack: Stack, fake: FakeUpstream) -> None:
    import openai

    fake.push(reply_from_capture("gemini_err_404_model_not_found"))
    base = stack.proxy(fake, GEMINI)
    o = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    with pytest.raises(openai.NotFoundError) as info:
        o.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert "is not found for API version v1beta" in str(info.value)


async def _not_here(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def test_routes_choose_by_the_model_in_the_url(stack: Stack, fake: FakeUpstream) -> None:
    up = stack.upstream_http()
    app = ProxaiMiddleware(
        _not_here,
        routes=[
            Route("claude-*", Upstream("anthropic_messages", up)),
            Route("gemini-*", Upstream(GEMINI, up), model_rewrite="gemini-2.5-flash"),
        ],
    )
    fake.push(reply_from_capture("gemini_json_text_basic"))
    fake.push(reply_from_capture("anthropic_json_text_basic"))
    with serve(app) as base:
        g = client(base)
        first = g.models.generate_content(model="gemini-pro-latest", contents="hi")
        second = g.models.generate_content(model="claude-x", contents="hi")
        with pytest.raises(genai_errors.ClientError) as info:
            g.models.generate_content(model="gpt-x", contents="hi")
    assert first.text and second.text
    assert fake.seen[0].path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert fake.seen[1].path == "/v1/messages" and fake.seen[1].json()["model"] == "claude-x"
    assert info.value.code == 404 and info.value.status == "NOT_FOUND"
    assert len(fake.seen) == 2


def test_a_model_name_cannot_add_a_query_or_a_path_to_the_upstream_url(
    stack: Stack, fake: FakeUpstream
) -> None:
    fake.push(reply_from_capture("gemini_json_text_basic"))
    base = stack.proxy(fake, GEMINI)
    body = load("gemini_json_text_basic")["request"]["body"]
    for model in ("m%3Fkey=stolen", "m%23frag", "a%2F..%2Fb"):
        r = httpx.post(f"{base}/v1beta/models/{model}:generateContent", json=body, timeout=30)
        # A Gemini call with an unsafe model: refused in Google's shape (it was the
        # wrapped app's 404 before issue 26; either way nothing reaches the upstream).
        assert r.status_code == 400, model
        assert r.json()["error"]["status"] == "INVALID_ARGUMENT", r.text
    assert fake.seen == []
