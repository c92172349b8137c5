"""Hypothesis over the whole hub: whatever comes in, only ``ProxyError`` comes out.

Each codec has its own property tests (tests/protocols/*/test_properties.py); these
drive every *composition* the middleware runs, the way ``middleware.py`` runs it:

- requests: arbitrary JSON values, arbitrary bytes, and real-shaped requests with one
  to three random mutations (a node replaced by an arbitrary value, deleted, or
  duplicated) -> every client codec's ``decode_request`` -> ``checks.check_request`` ->
  (custom-tool wrapping for Responses clients) -> every *other* codec's
  ``encode_request``, strict and lossy; what comes out must be JSON;
- streams: SSE byte streams built from real upstream frames (mutated), arbitrary JSON
  frames with real event names, and raw bytes, cut at random points -> ``SSEDecoder``
  -> every upstream stream decoder -> every client stream encoder (with the custom-tool
  unwrapper for Responses clients), stopping at a terminal event and encoding a
  ``ProxyError`` as the terminal error, as the middleware does; and the same events
  folded into a response for non-stream clients;
- upstream bodies: arbitrary and mutated JSON -> every ``decode_response`` -> every
  ``encode_response``; any status and bytes -> every ``decode_error`` ->
  every ``encode_error``.

Examples run in the last full run (explicit ``max_examples``; printed at the end of the
module with ``-s``): requests 3 x 300 arbitrary JSON + 3 x 500 mutated + 200 raw bytes
= 2,600; streams 3 x 400 shaped + 200 raw = 1,400 streams (each through 3 client
encoders); upstream bodies 3 x 250 + error bodies 250 = 1,000; and 300 JSON values
whose strings are full of brackets, quotes and backslashes against the nesting limit
(``checks.json_too_deep`` agrees with the real depth). Total 5,300 examples.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections import Counter
from collections.abc import Iterator
from functools import cache
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxai_asgi import Upstream, checks, pipeline
from proxai_asgi import canonical as c
from proxai_asgi.codec import PROTOCOLS
from proxai_asgi.errors import ProxyError
from proxai_asgi.protocols import get_codec
from tests.helpers.captures import load, path_of, present
from tests.helpers.servers import reply_from_capture

RUNS: Counter[str] = Counter()
SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    print(f"\nhypothesis examples run: {dict(RUNS)}, total {sum(RUNS.values())}")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(
        ["", "call_1", "toolu_1", "fc_1", "{", "[DONE]", "data:image/png;base64,", "user", "auto"]
    ),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)

# ------------------------------------------------------------------- request seeds

PNG = "iVBORw0KGgo="
PDF = "JVBERi0xLjQ="
CHAT_SEED: dict[str, Any] = {
    "model": "m",
    "stream": True,
    "stream_options": {"include_usage": True},
    "temperature": 0.5,
    "max_tokens": 100,
    "stop": ["x"],
    "messages": [
        {"role": "system", "content": "sys"},
        {"role": "developer", "content": [{"type": "text", "text": "dev"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi"},
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"},
                },
                {
                    "type": "file",
                    "file": {
                        "file_data": f"data:application/pdf;base64,{PDF}",
                        "filename": "a.pdf",
                    },
                },
            ],
        },
        {
            "role": "assistant",
            "content": "ok",
            "reasoning_content": "think",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "r1"},
        {"role": "user", "content": "more"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "f",
                "description": "d",
                "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
                "strict": True,
            },
        }
    ],
    "tool_choice": {"type": "function", "function": {"name": "f"}},
    "parallel_tool_calls": False,
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "x", "schema": {"type": "object"}},
    },
    "reasoning_effort": "high",
    "user": "u",
    "metadata": {"k": "v"},
    "service_tier": "auto",
}
CHAT_CUSTOM_SEED: dict[str, Any] = {
    "model": "m",
    "messages": [
        {"role": "user", "content": "patch"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_2", "type": "custom", "custom": {"name": "g", "input": "raw"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "r2"}]},
    ],
    "tools": [{"type": "custom", "custom": {"name": "g", "format": {"type": "text"}}}],
}
RESPONSES_SEED: dict[str, Any] = {
    "model": "m",
    "stream": True,
    "instructions": "be brief",
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "k",
    "reasoning": {"effort": "medium", "summary": "auto"},
    "text": {
        "verbosity": "low",
        "format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}},
    },
    "input": [
        {"type": "message", "role": "developer", "content": "dev"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "hi"},
                {
                    "type": "input_image",
                    "image_url": f"data:image/png;base64,{PNG}",
                    "detail": "auto",
                },
                {
                    "type": "input_file",
                    "file_data": f"data:application/pdf;base64,{PDF}",
                    "filename": "a.pdf",
                },
            ],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "s"}],
            "encrypted_content": "enc",
        },
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "f",
            "arguments": '{"a": 1}',
            "status": "completed",
        },
        {
            "type": "custom_tool_call",
            "id": "ctc_1",
            "call_id": "call_2",
            "name": "apply_patch",
            "input": "*** Begin Patch",
        },
        {"type": "function_call_output", "id": "fco_1", "call_id": "call_1", "output": "r1"},
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "done"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"role": "user", "content": "more"},
    ],
    "tools": [
        {
            "type": "function",
            "name": "f",
            "parameters": {"type": "object", "properties": {}},
            "strict": True,
        },
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "patch",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"},
        },
        {"type": "web_search"},
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "max_output_tokens": 100,
    "temperature": 0.2,
    "top_p": 0.9,
    "metadata": {"k": "v"},
    "safety_identifier": "s",
    "service_tier": "flex",
}
ANTHROPIC_SEED: dict[str, Any] = {
    "model": "m",
    "max_tokens": 100,
    "stream": True,
    "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "output_config": {"effort": "high"},
    "context_management": {"edits": []},
    "metadata": {"user_id": "u"},
    "temperature": 1,
    "top_k": 5,
    "stop_sequences": ["x"],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                    "title": "a",
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "t", "signature": "sig"},
                {"type": "redacted_thinking", "data": "red"},
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {"query": "q"},
                },
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": "r"},
                        {
                            "type": "image",
                            "source": {"type": "url", "url": "https://example.com/y.png"},
                        },
                    ],
                    "is_error": True,
                },
                {"type": "text", "text": "more"},
            ],
        },
        # a mid-conversation system message: right after a user turn, and last
        {"role": "system", "content": "beta system"},
    ],
    "tools": [
        {
            "name": "f",
            "description": "d",
            "input_schema": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {"a": {"type": "integer"}},
            },
            "cache_control": {"type": "ephemeral"},
        },
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
}


def _capture_requests(prefix: str) -> list[dict[str, Any]]:
    out = []
    for name in (
        "json_text_basic",
        "json_parallel_tool_use",
        "json_parallel_tool_calls",
        "json_cached_tokens",
        "json_refusal",
        "json_tools",
        "json_thinking",
        "json_safety_settings",
    ):
        if present(f"{prefix}_{name}"):
            out.append(load(f"{prefix}_{name}")["request"]["body"])
    return out


# A hand-made Gemini turn (so the mutations have a seed without the recordings too):
# instructions, a tool loop with a thought signature, generation settings.
GEMINI_SEED: dict[str, Any] = {
    "systemInstruction": {"parts": [{"text": "be brief"}]},
    "contents": [
        {"role": "user", "parts": [{"text": "list the files"}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "ls", "args": {"path": "."}}, "thoughtSignature": "c2ln"}
            ],
        },
        {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {"out": "a"}}}]},
    ],
    "tools": [{"functionDeclarations": [{"name": "ls", "parameters": {"type": "object"}}]}],
    "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
    "generationConfig": {"maxOutputTokens": 100, "temperature": 0.5},
}

SEEDS: dict[str, list[dict[str, Any]]] = {
    "openai_chat_completions": [CHAT_SEED, CHAT_CUSTOM_SEED, *_capture_requests("chat")],
    "openai_responses": [RESPONSES_SEED, *_capture_requests("responses")],
    "anthropic_messages": [ANTHROPIC_SEED, *_capture_requests("anthropic")],
    "gemini_generate_content": [GEMINI_SEED, *_capture_requests("gemini")],
}


def _paths(doc: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield (*here, k)
            yield from _paths(v, (*here, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield (*here, i)
            yield from _paths(v, (*here, i))


@st.composite
def mutated(draw: st.DrawFn, seeds: list[dict[str, Any]]) -> Any:
    """A seed with one to three nodes replaced, deleted or duplicated."""
    doc = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        op = draw(st.sampled_from(["replace", "replace", "delete", "duplicate"]))
        if op == "replace":
            parent[path[-1]] = draw(json_values)
        elif op == "delete":
            del parent[path[-1]]
        elif isinstance(parent, list):
            parent.insert(path[-1], copy.deepcopy(parent[path[-1]]))
    return doc


# ------------------------------------------------------------------ requests


def translate(client: str, body: bytes) -> int:
    """``body`` through the production pipeline toward every other protocol, strict
    and lossy; returns how many upstream bodies came out. Only ProxyError may escape."""
    codec = get_codec(client)  # type: ignore[arg-type]
    made = 0
    for target_name in PROTOCOLS:
        if target_name == client:
            continue
        target = get_codec(target_name)
        for lossy in (False, True):
            upstream = Upstream(target_name, "http://upstream.test", lossy=lossy)
            try:
                out = pipeline.prepare(codec, target, body, upstream).body
            except ProxyError:
                continue
            msgspec.json.decode(out)  # what goes upstream is JSON
            made += 1
    return made


@pytest.mark.parametrize("client", PROTOCOLS)
@settings(max_examples=300, **SETTINGS)
@given(value=json_values)
def test_arbitrary_json_requests_raise_only_proxy_errors(client: str, value: Any) -> None:
    RUNS["request/json"] += 1
    translate(client, json.dumps(value).encode())


@pytest.mark.parametrize("client", PROTOCOLS)
@settings(max_examples=500, **SETTINGS)
@given(data=st.data())
def test_mutated_real_requests_raise_only_proxy_errors(client: str, data: st.DataObject) -> None:
    doc = data.draw(mutated(SEEDS[client]))
    RUNS["request/mutated"] += 1
    translate(client, json.dumps(doc).encode())


@settings(max_examples=200, **SETTINGS)
@given(
    body=st.binary(max_size=200)
    | st.builds(lambda v, b: json.dumps(v).encode()[: len(b)], json_values, st.binary())
)
def test_arbitrary_bytes_requests_raise_only_proxy_errors(body: bytes) -> None:
    RUNS["request/bytes"] += 1
    for client in PROTOCOLS:
        translate(client, body)


def test_the_seeds_translate_so_mutations_start_from_valid_requests() -> None:
    for client, seeds in SEEDS.items():
        for seed in seeds:
            assert translate(client, json.dumps(seed).encode()) > 0, (client, seed.get("model"))


# -------------------------------------------------------------------- streams

STREAM_CAPTURES = {
    "openai_chat_completions": [
        "chat_sse_text_basic_include_usage",
        "chat_sse_parallel_tool_calls",
        "chat_sse_max_tokens_length",
    ],
    "openai_responses": [
        "responses_sse_text_basic",
        "responses_sse_parallel_function_calls",
        "responses_sse_reasoning_summary",
        "responses_sse_incomplete_max_output_tokens",
    ],
    "anthropic_messages": [
        "anthropic_sse_text_basic",
        "anthropic_sse_parallel_tool_use",
        "anthropic_sse_thinking_signature_delta",
    ],
    "gemini_generate_content": [
        "gemini_sse_text_basic",
        "gemini_sse_tools",
        "gemini_sse_thinking",
        "gemini_sse_tool_call_thought_signature",
    ],
}
EVENT_NAMES = {
    "openai_chat_completions": [None, "error"],
    "openai_responses": [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", "response.output_text.delta",
        "response.function_call_arguments.delta", "response.output_item.done",
        "response.completed", "response.failed", "response.incomplete", "error",
    ],
    "anthropic_messages": [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop", "ping", "error",
    ],
    "gemini_generate_content": [None],
}  # fmt: skip


def _split_frame(frame: bytes) -> tuple[str | None, Any]:
    event = None
    data = b""
    for line in frame.split(b"\n"):
        if line.startswith(b"event:"):
            event = line[6:].strip().decode()
        elif line.startswith(b"data:"):
            data = line[5:].strip()
    try:
        return event, json.loads(data)
    except ValueError:
        return event, data.decode("utf-8", "replace")


def _frame(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


@cache
def real_frames(upstream: str) -> list[list[tuple[str | None, Any]]]:
    """The recorded streams of ``upstream``, frame by frame (read on first use, so a
    checkout without the recordings skips only the tests that need them)."""
    names = STREAM_CAPTURES[upstream]
    return [[_split_frame(f) for f in reply_from_capture(n).chunks] for n in names]


JUNK = [
    b"data: {not json\n\n",
    b": comment\n\n",
    b"retry: x\n",
    b"\n\n",
    b"data: [DONE]\n\n",
    b"\xff\xfe\n\n",
]


@st.composite
def sse_stream(draw: st.DrawFn, upstream: str) -> list[bytes]:
    """A real stream with up to four edits (a frame's data mutated, a frame dropped,
    repeated, cut off with all after it, an inserted frame of a real event name with
    arbitrary JSON, a junk frame), cut into arbitrary chunks."""
    frames: list[tuple[str | None, Any] | bytes] = list(
        draw(st.sampled_from(real_frames(upstream)))
    )
    for _ in range(draw(st.integers(0, 4))):
        if not frames:
            break
        i = draw(st.integers(0, len(frames) - 1))
        action = draw(
            st.sampled_from(["mutate", "mutate", "drop", "repeat", "cut", "insert", "junk"])
        )
        frame = frames[i]
        if action == "mutate" and isinstance(frame, tuple) and isinstance(frame[1], dict):
            frames[i] = (frame[0], draw(mutated([frame[1]])))
        elif action == "drop":
            del frames[i]
        elif action == "repeat":
            frames.insert(i, frame)
        elif action == "cut":
            del frames[i:]
        elif action == "insert":
            frames.insert(i, (draw(st.sampled_from(EVENT_NAMES[upstream])), draw(json_values)))
        elif action == "junk":
            frames.insert(i, draw(st.sampled_from(JUNK)))
    stream = b"".join(f if isinstance(f, bytes) else _frame(*f) for f in frames)
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    return [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]


WRAPPED = frozenset({"apply_patch", "get_secret", "f"})


def drive(upstream: str, client: str, chunks: list[bytes]) -> bytes:
    """The production ``StreamTranslator``, fed ``chunks``."""
    creq = c.Request(model="m", messages=[], stream=True, include_usage=True)
    wrapped = WRAPPED if client == "openai_responses" else frozenset()
    translation = pipeline.answering(
        get_codec(client),  # type: ignore[arg-type]
        get_codec(upstream),  # type: ignore[arg-type]
        creq,
        wrapped,
    )
    stream = pipeline.StreamTranslator(translation)
    out = b"".join(stream.feed(chunk) for chunk in chunks) + stream.close()
    assert stream.done, "a translated stream always ends"
    return out


def collect(upstream: str, chunks: list[bytes]) -> None:
    """The non-stream client's path: the production ``StreamCollector``, its answer
    encoded for every client."""
    creq = c.Request(model="m", messages=[])
    for client in PROTOCOLS:
        translation = pipeline.answering(get_codec(client), get_codec(upstream), creq)  # type: ignore[arg-type]
        collector = pipeline.StreamCollector(translation)
        try:
            for chunk in chunks:
                collector.feed(chunk)
            response = collector.close()
        except ProxyError:
            return
        with contextlib.suppress(ProxyError):
            pipeline.answer(translation, response)


@pytest.mark.parametrize("upstream", PROTOCOLS)
@settings(max_examples=400, **SETTINGS)
@given(data=st.data())
def test_shaped_sse_streams_raise_only_proxy_errors_in_every_direction(
    upstream: str, data: st.DataObject
) -> None:
    real_frames(upstream)  # skips here, before hypothesis draws, without the recordings
    chunks = data.draw(sse_stream(upstream))
    RUNS["stream/shaped"] += 1
    for client in PROTOCOLS:
        drive(upstream, client, chunks)
    collect(upstream, chunks)


@settings(max_examples=200, **SETTINGS)
@given(
    chunks=st.lists(
        st.binary(max_size=64)
        | st.sampled_from([b"data: ", b"event: error\n", b"\n\n", b"data: {}\n\n"]),
        max_size=12,
    )
)
def test_raw_byte_streams_raise_only_proxy_errors_in_every_direction(chunks: list[bytes]) -> None:
    RUNS["stream/bytes"] += 1
    for upstream in PROTOCOLS:
        for client in PROTOCOLS:
            drive(upstream, client, chunks)
        collect(upstream, chunks)


# ------------------------------------------------------------- upstream bodies


def _response_seeds(prefix: str) -> list[dict[str, Any]]:
    out = []
    for name in (
        "text_basic",
        "refusal",
        "cached_tokens",
        "parallel_tool_use",
        "parallel_tool_calls",
        "redacted_thinking",
        "max_tokens",
        "cache_read",
        "tools",
        "thinking",
        "safety_settings",
    ):
        if present(f"{prefix}_json_{name}"):
            out.append(json.loads(reply_from_capture(f"{prefix}_json_{name}").chunks[0]))
    return out


RESPONSE_SEEDS = {
    "openai_chat_completions": _response_seeds("chat"),
    "openai_responses": _response_seeds("responses"),
    "anthropic_messages": _response_seeds("anthropic"),
    "gemini_generate_content": _response_seeds("gemini"),
}


@pytest.mark.parametrize("upstream", PROTOCOLS)
@settings(max_examples=250, **SETTINGS)
@given(data=st.data())
def test_upstream_json_bodies_raise_only_proxy_errors_in_every_direction(
    upstream: str, data: st.DataObject
) -> None:
    # The seeds are read at import; this skips here when they could not be.
    path_of(f"{STREAM_CAPTURES[upstream][0].split('_')[0]}_json_text_basic")
    doc = data.draw(mutated(RESPONSE_SEEDS[upstream]) | json_values)
    RUNS["response/json"] += 1
    try:
        response = get_codec(upstream).decode_response(json.dumps(doc).encode())  # type: ignore[arg-type]
    except ProxyError:
        return
    for client in PROTOCOLS:
        creq = c.Request(model="m", messages=[])
        with contextlib.suppress(ProxyError):
            get_codec(client).encode_response(response, creq)


@settings(max_examples=250, **SETTINGS)
@given(
    status=st.integers(100, 999),
    body=st.binary(max_size=120) | json_values.map(lambda v: json.dumps(v).encode()),
)
def test_upstream_error_bodies_become_client_errors(status: int, body: bytes) -> None:
    RUNS["error/body"] += 1
    for upstream in PROTOCOLS:
        err = get_codec(upstream).decode_error(status, body)
        assert isinstance(err, ProxyError)
        for client in PROTOCOLS:
            out = get_codec(client).encode_error(err)
            msgspec.json.decode(out)


# --------------------------------------------------------------- nesting limit


def _depth(v: Any) -> int:
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    if isinstance(v, dict):
        return 1 + max((_depth(x) for x in v.values()), default=0)
    return 0


tricky_text = st.text(alphabet='[]{}"\\ab', max_size=8)
nested_values = st.recursive(
    st.none() | st.integers() | tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(tricky_text, inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=300, **SETTINGS)
@given(value=nested_values, limit=st.integers(0, 12), indent=st.sampled_from([None, 1]))
def test_the_nesting_limit_counts_structure_not_brackets_in_strings(
    value: Any, limit: int, indent: int | None
) -> None:
    RUNS["nesting"] += 1
    body = json.dumps(value, indent=indent).encode()
    assert checks.json_too_deep(body, limit) == (_depth(value) > limit)
