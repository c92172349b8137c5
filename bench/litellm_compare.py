"""proxai_asgi against LiteLLM 1.100.0, in one process and one run, on the same inputs.

Run with the bench-only virtualenv (``bash bench/setup-litellm.sh`` creates it):

    bench/.venv-litellm/bin/python -m bench.litellm_compare

Directions are named client -> upstream, as in the peers reference (A = Anthropic
Messages, C = OpenAI Chat Completions, R = OpenAI Responses): "A->C" is an Anthropic
client in front of a Chat upstream, so its request goes A to C and its response and
stream come back C to A.

For every direction LiteLLM has it measures, on both sides:

* request translation: client JSON bytes -> upstream JSON bytes, µs per request;
* non-streamed response translation: upstream JSON bytes -> client JSON bytes;
* stream translation: median µs per upstream SSE event, upstream SSE bytes cut at
  frame boundaries -> client SSE bytes.

Ours is exactly the middleware's sans-IO path: ``decode_request`` + ``check_request``
(+ custom-tool wrapping for Responses clients) + ``encode_request``; ``decode_response``
+ ``encode_response``; ``SSEDecoder`` + ``stream_decoder`` + ``stream_encoder``.

LiteLLM's is the closest wire-to-wire path its public callables allow (see ``LITELLM``
below for each): ``json.loads`` of the wire body, LiteLLM's own translation functions,
and LiteLLM's own serialisation (``json.dumps`` for Anthropic SSE, as its
``anthropic_sse_wrapper`` does; ``model_dump_json(exclude_none=True)`` for its pydantic
objects, as its proxy does). Streams are framed with our ``SSEDecoder`` on both sides.
Ours and LiteLLM's are timed alternately, run for run, and the speed-up is taken from
those figures: a burst of load on this shared machine hits both, and neither keeps its
code hot in the CPU caches between runs (the smaller of the two loses more to that). The
last column times ours back to back, caches hot, as bench/sansio.py does.

Not included on LiteLLM's side, so its figures are lower bounds of what a LiteLLM proxy
spends: the ``CustomStreamWrapper`` every real LiteLLM stream goes through (per-chunk
logging, cost and usage bookkeeping), the OpenAI SDK's response parsing, the proxy's
hooks, and for C->R the ``litellm.responses()`` re-validation of the request.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._common import captures_dir, frames, synthetic  # noqa: E402
from proxai_asgi import Upstream, pipeline  # noqa: E402
from proxai_asgi import canonical as c  # noqa: E402
from proxai_asgi.codec import UpstreamOptions  # noqa: E402
from proxai_asgi.errors import TranslationReport  # noqa: E402
from proxai_asgi.protocols import get_codec  # noqa: E402
from proxai_asgi.sse import SSEDecoder  # noqa: E402

CAPTURES = captures_dir()  # recorded traffic lives outside the repository
A, C, R = "anthropic_messages", "openai_chat_completions", "openai_responses"
LETTER = {A: "A", C: "C", R: "R"}
API = {A: "anthropic.messages", C: "openai.chat.completions", R: "openai.responses"}
MODEL = "gpt-4.1"  # known to LiteLLM's model map (an unknown one makes it print warnings)
CLAUDE = "claude-sonnet-4-20250514"

# ============================================================================ inputs


def _captures(protocol: str, *, stream: bool) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(CAPTURES.glob("*.json")):
        d = json.loads(path.read_text())
        resp = d.get("response") or {}
        if d.get("api") != API[protocol] or bool(d.get("stream")) != stream:
            continue
        if resp.get("status") != 200 or "n3_choices" in path.stem:
            continue  # errors are not translations; n=3 is rejected by design
        out.append((path.stem, d))
    return out


def request_inputs(client: str) -> list[tuple[str, bytes]]:
    """The captured request bodies of ``client``'s protocol, plus a long agent-loop
    request (system, 5 tools, 12 tool round trips) written by our own encoder."""
    out = []
    for name, d in _captures(client, stream=False) + _captures(client, stream=True):
        req = d["request"]
        if req.get("body_truncated") or not isinstance(req.get("body"), dict):
            continue
        out.append((name, json.dumps(req["body"]).encode()))
    out.append(("agent loop (12 tool round trips, 5 tools)", agent_request(client)))
    return out


def agent_request(protocol: str) -> bytes:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["path"],
    }
    tools = [
        c.Tool(name=f"tool_{k}", description=f"Tool number {k}. " * 8, parameters=schema)
        for k in range(5)
    ]
    messages = [c.Message(role="user", content=[c.Text(text="Refactor the module. " * 30)])]
    for turn in range(12):
        call = f"call_{turn:03d}"
        messages.append(
            c.Message(
                role="assistant",
                content=[
                    c.Text(text=f"Step {turn}: reading the file next. " * 4),
                    c.ToolCall(
                        id=call,
                        name=f"tool_{turn % 5}",
                        arguments=json.dumps({"path": f"src/m{turn}.py", "limit": 200}),
                    ),
                ],
            )
        )
        messages.append(
            c.Message(
                role="tool",
                content=[c.ToolResult(call_id=call, content=[c.Text(text="line of code\n" * 40)])],
            )
        )
    messages.append(c.Message(role="user", content=[c.Text(text="Now run the tests.")]))
    creq = c.Request(
        model=MODEL,
        messages=messages,
        system=[c.Text(text="You are a careful coding agent. " * 20)],
        tools=tools,
        tool_choice=c.ToolChoice(mode="auto"),
        max_tokens=4096,
        temperature=0.2,
        stream=True,
    )
    return get_codec(protocol).encode_request(  # type: ignore[arg-type]
        creq, TranslationReport(), UpstreamOptions()
    )


def response_inputs(upstream: str) -> list[tuple[str, bytes]]:
    return [(n, str(d["response"]["body"]).encode()) for n, d in _captures(upstream, stream=False)]


def stream_inputs(upstream: str) -> list[tuple[str, list[bytes]]]:
    caps = [
        (n, frames(str(d["response"]["body"]).encode()))
        for n, d in _captures(upstream, stream=True)
    ]
    # The synthetic stream's model renamed to one LiteLLM knows (an unknown one makes
    # its end-of-stream assembly print a warning).
    syn = synthetic(upstream).replace(b'"bench"', b'"gpt-4.1"')  # type: ignore[arg-type]
    return [*caps, ("synthetic 2000 deltas + 2 interleaved tools", frames(syn))]


# ======================================================================== ours


def _upstream(protocol: str) -> Upstream:
    return Upstream(protocol, "http://upstream.bench")  # type: ignore[arg-type]


def ours_request(client: str, upstream: str) -> Callable[[bytes], bytes]:
    """The production pipeline's request side (default upstream options)."""
    cl, up = get_codec(client), get_codec(upstream)  # type: ignore[arg-type]
    settings = _upstream(upstream)

    def run(body: bytes) -> bytes:
        return pipeline.prepare(cl, up, body, settings, model=MODEL).body

    return run


def ours_response(client: str, upstream: str) -> Callable[[bytes], bytes]:
    cl, up = get_codec(client), get_codec(upstream)  # type: ignore[arg-type]
    translation = pipeline.answering(cl, up, c.Request(model=MODEL, messages=[]))

    def run(body: bytes) -> bytes:
        return pipeline.translate_response(translation, body)[0]

    return run


def ours_stream(client: str, upstream: str) -> Callable[[list[bytes]], list[bytes]]:
    cl, up = get_codec(client), get_codec(upstream)  # type: ignore[arg-type]
    creq = c.Request(model=MODEL, messages=[], stream=True, include_usage=True)

    def run(chunks: list[bytes]) -> list[bytes]:
        stream = pipeline.StreamTranslator(pipeline.answering(cl, up, creq))
        out = [stream.feed(ch) for ch in chunks]
        out.append(stream.close())
        return out

    return run


# ===================================================================== LiteLLM

t0 = time.perf_counter()
import httpx  # noqa: E402
import litellm  # noqa: E402
from litellm.completion_extras.litellm_responses_transformation.transformation import (  # noqa: E402
    LiteLLMResponsesTransformationHandler,
    OpenAiResponsesToChatCompletionStreamIterator,
)
from litellm.llms.anthropic.chat.handler import ModelResponseIterator  # noqa: E402
from litellm.llms.anthropic.chat.transformation import AnthropicConfig  # noqa: E402
from litellm.llms.anthropic.experimental_pass_through.adapters.streaming_iterator import (  # noqa: E402
    AnthropicStreamWrapper,
)
from litellm.llms.anthropic.experimental_pass_through.adapters.transformation import (  # noqa: E402
    AnthropicAdapter,
    LiteLLMAnthropicMessagesAdapter,
)
from litellm.llms.anthropic.experimental_pass_through.responses_adapters.streaming_iterator import (  # noqa: E402
    AnthropicResponsesStreamWrapper,
)
from litellm.llms.anthropic.experimental_pass_through.responses_adapters.transformation import (  # noqa: E402
    LiteLLMAnthropicToResponsesAPIAdapter,
)
from litellm.llms.openai.responses.transformation import OpenAIResponsesAPIConfig  # noqa: E402
from litellm.responses.litellm_completion_transformation.streaming_iterator import (  # noqa: E402
    LiteLLMCompletionStreamingIterator,
)
from litellm.responses.litellm_completion_transformation.transformation import (  # noqa: E402
    LiteLLMCompletionResponsesConfig,
)
from litellm.types.llms.anthropic import AnthropicMessagesRequest  # noqa: E402
from litellm.types.llms.openai import ResponsesAPIResponse  # noqa: E402
from litellm.types.utils import ModelResponse, ModelResponseStream  # noqa: E402

LITELLM_IMPORT_IN_PROCESS = time.perf_counter() - t0


class _Log:
    """Stands in for LiteLLM's per-call ``Logging`` object (its callbacks are not
    translation work)."""

    call_type = None
    model_call_details: dict[str, Any] = {}

    def post_call(self, *args: Any, **kwargs: Any) -> None:
        pass


class _ChunkSource:
    """What ``LiteLLMCompletionStreamingIterator`` pulls from in place of a
    ``CustomStreamWrapper``: the already-parsed chat chunks, nothing else."""

    def __init__(self, chunks: Iterator[Any]) -> None:
        self._it = chunks
        self.logging_obj = _Log()

    def __aiter__(self) -> _ChunkSource:
        return self

    async def __anext__(self) -> Any:
        try:
            return next(self._it)
        except StopIteration:
            raise StopAsyncIteration from None


def drive(aiterable: Any) -> Iterator[Any]:
    """Iterate an async iterator whose awaits never suspend (no I/O underneath)
    without an event loop, so no loop overhead is charged to LiteLLM."""
    it = aiterable.__aiter__()
    while True:
        coro = it.__anext__()
        try:
            coro.send(None)
        except StopIteration as done:
            yield done.value
            continue
        except StopAsyncIteration:
            return
        coro.close()
        raise RuntimeError("async iterator suspended; it needs an event loop")


async def _aiter(items: Iterable[Any]) -> AsyncIterator[Any]:
    for x in items:
        yield x


def _sse_json(chunks: list[bytes]) -> Iterator[dict[str, Any]]:
    """Upstream SSE frames -> parsed ``data`` objects (``[DONE]`` ends the stream)."""
    sse = SSEDecoder()
    for ch in chunks:
        for ev in sse.decode(ch):
            if ev.data == b"[DONE]":
                return
            if ev.data:
                yield json.loads(ev.data)


def _dump(obj: Any) -> str:
    if isinstance(obj, dict):
        return json.dumps(obj)
    return obj.model_dump_json(exclude_none=True)


def _chat_frames(chunks: Iterable[Any]) -> list[bytes]:
    out = [f"data: {_dump(ch)}\n\n".encode() for ch in chunks if ch is not None]
    out.append(b"data: [DONE]\n\n")
    return out


def _responses_frames(events: Iterable[Any]) -> list[bytes]:
    out = []
    for ev in events:
        kind = ev.get("type") if isinstance(ev, dict) else getattr(ev, "type", "")
        kind = getattr(kind, "value", kind)
        out.append(f"event: {kind}\ndata: {_dump(ev)}\n\n".encode())
    return out


def _chat_chunks_with_usage(items: Iterator[dict[str, Any]]) -> Iterator[ModelResponseStream]:
    """Chat wire chunks -> ``ModelResponseStream``. A trailing usage-only chunk
    (``choices: []``) is folded into the chunk before it, as ``CustomStreamWrapper``
    does; LiteLLM's Responses bridge indexes ``choices[0]`` unconditionally."""
    prev: ModelResponseStream | None = None
    for d in items:
        if not d.get("choices"):
            if prev is not None and d.get("usage"):
                prev.usage = litellm.Usage(**d["usage"])  # type: ignore[attr-defined]
            continue
        if prev is not None:
            yield prev
        prev = ModelResponseStream(**d)
    if prev is not None:
        yield prev


def _req_dict(body: bytes) -> dict[str, Any]:
    return json.loads(body)  # type: ignore[no-any-return]


def _chat_optional(req: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in req.items() if k not in ("model", "messages")}


# ---- requests (client -> upstream)


def ll_request_a_c(body: bytes) -> bytes:
    req = _req_dict(body)
    out, _ = AnthropicAdapter().translate_completion_input_params_with_tool_mapping(req)
    return json.dumps(out).encode()


def ll_request_a_r(body: bytes) -> bytes:
    out = LiteLLMAnthropicToResponsesAPIAdapter().translate_request(
        AnthropicMessagesRequest(**_req_dict(body))  # type: ignore[typeddict-item]
    )
    return json.dumps(out).encode()


def _anthropic_transform_request(req: dict[str, Any]) -> dict[str, Any]:
    # What litellm.completion(model="anthropic/...") does before the HTTP call.
    cfg = AnthropicConfig()
    messages = cfg.translate_developer_role_to_system_role(messages=req["messages"])
    optional = cfg.map_openai_params(_chat_optional(req), {}, CLAUDE, drop_params=True)
    return cfg.transform_request(CLAUDE, messages, optional, {}, {})


def ll_request_c_a(body: bytes) -> bytes:
    return json.dumps(_anthropic_transform_request(_req_dict(body))).encode()


def ll_request_c_r(body: bytes) -> bytes:
    req = _req_dict(body)
    out = LiteLLMResponsesTransformationHandler().transform_request(
        MODEL,
        req["messages"],
        _chat_optional(req),
        {},
        {},
        _Log(),  # type: ignore[arg-type]
    )
    out.pop("litellm_logging_obj", None)
    out.pop("client", None)
    return json.dumps(out, default=str).encode()


_BRIDGE = LiteLLMCompletionResponsesConfig


def _responses_to_chat(req: dict[str, Any]) -> dict[str, Any]:
    params = {k: v for k, v in req.items() if k not in ("model", "input")}
    return _BRIDGE.transform_responses_api_request_to_chat_completion_request(
        model=MODEL,
        input=req["input"],
        responses_api_request=params,  # type: ignore[arg-type]
        stream=req.get("stream"),
    )


def ll_request_r_c(body: bytes) -> bytes:
    return json.dumps(_responses_to_chat(_req_dict(body)), default=str).encode()


def ll_request_r_a(body: bytes) -> bytes:
    return json.dumps(_anthropic_transform_request(_responses_to_chat(_req_dict(body)))).encode()


# ---- non-streamed responses (upstream -> client)


def ll_response_a_c(body: bytes) -> bytes:  # Chat JSON -> Anthropic JSON
    out = LiteLLMAnthropicMessagesAdapter().translate_openai_response_to_anthropic(
        ModelResponse(**json.loads(body))
    )
    return json.dumps(out, default=str).encode()


def ll_response_a_r(body: bytes) -> bytes:  # Responses JSON -> Anthropic JSON
    out = LiteLLMAnthropicToResponsesAPIAdapter().translate_response(
        ResponsesAPIResponse(**json.loads(body))
    )
    return json.dumps(out, default=str).encode()


def _anthropic_to_model_response(body: bytes) -> ModelResponse:
    raw = httpx.Response(200, content=body, headers={"content-type": "application/json"})
    return AnthropicConfig().transform_response(
        CLAUDE, raw, ModelResponse(), _Log(), {}, [], {}, {}, None
    )


def ll_response_c_a(body: bytes) -> bytes:  # Anthropic JSON -> Chat JSON
    return _anthropic_to_model_response(body).model_dump_json(exclude_none=True).encode()


def ll_response_c_r(body: bytes) -> bytes:  # Responses JSON -> Chat JSON
    out = LiteLLMResponsesTransformationHandler().transform_response(
        MODEL,
        ResponsesAPIResponse(**json.loads(body)),
        ModelResponse(),
        _Log(),  # type: ignore[arg-type]
        {},
        [],
        {},
        {},
        None,
    )
    return out.model_dump_json(exclude_none=True).encode()


_R_INPUT = [{"role": "user", "content": "x"}]


def ll_response_r_c(body: bytes) -> bytes:  # Chat JSON -> Responses JSON
    out = _BRIDGE.transform_chat_completion_response_to_responses_api_response(
        _R_INPUT,  # type: ignore[arg-type]
        {},  # type: ignore[typeddict-item]
        ModelResponse(**json.loads(body)),
    )
    return out.model_dump_json(exclude_none=True).encode()


def ll_response_r_a(body: bytes) -> bytes:  # Anthropic JSON -> Chat -> Responses JSON
    out = _BRIDGE.transform_chat_completion_response_to_responses_api_response(
        _R_INPUT,  # type: ignore[arg-type]
        {},  # type: ignore[typeddict-item]
        _anthropic_to_model_response(body),
    )
    return out.model_dump_json(exclude_none=True).encode()


# ---- streams (upstream SSE frames -> client SSE frames)


def ll_stream_a_c(chunks: list[bytes]) -> list[bytes]:  # Chat SSE -> Anthropic SSE
    source = (ModelResponseStream(**d) for d in _sse_json(chunks))
    wrapper = AnthropicStreamWrapper(completion_stream=source, model=MODEL)
    return list(wrapper.anthropic_sse_wrapper())


def ll_stream_a_r(chunks: list[bytes]) -> list[bytes]:  # Responses SSE -> Anthropic SSE
    cfg = OpenAIResponsesAPIConfig()
    events = (cfg.transform_streaming_response(MODEL, d, None) for d in _sse_json(chunks))  # type: ignore[arg-type]
    wrapper = AnthropicResponsesStreamWrapper(_aiter(events), MODEL)
    return list(drive(wrapper.async_anthropic_sse_wrapper()))


def ll_stream_c_a(chunks: list[bytes]) -> list[bytes]:  # Anthropic SSE -> Chat SSE
    it = ModelResponseIterator(streaming_response=None, sync_stream=True)
    return _chat_frames(it.chunk_parser(d) for d in _sse_json(chunks))


def ll_stream_c_r(chunks: list[bytes]) -> list[bytes]:  # Responses SSE -> Chat SSE
    it = OpenAiResponsesToChatCompletionStreamIterator(streaming_response=None, sync_stream=True)
    return _chat_frames(it.chunk_parser(d) for d in _sse_json(chunks))


def _bridge(source: Iterator[Any]) -> list[bytes]:
    it = LiteLLMCompletionStreamingIterator(
        model=MODEL,
        litellm_custom_stream_wrapper=_ChunkSource(source),  # type: ignore[arg-type]
        request_input=_R_INPUT,  # type: ignore[arg-type]
        responses_api_request={},  # type: ignore[typeddict-item]
    )
    return _responses_frames(drive(it))


def ll_stream_r_c(chunks: list[bytes]) -> list[bytes]:  # Chat SSE -> Responses SSE
    return _bridge(_chat_chunks_with_usage(_sse_json(chunks)))


def ll_stream_r_a(chunks: list[bytes]) -> list[bytes]:  # Anthropic SSE -> Chat -> Responses
    it = ModelResponseIterator(streaming_response=None, sync_stream=True)

    def source() -> Iterator[ModelResponseStream]:
        for d in _sse_json(chunks):
            chunk = it.chunk_parser(d)
            chunk.model = CLAUDE  # CustomStreamWrapper stamps every chunk with the model
            yield chunk

    return _bridge(source())


@dataclass
class Direction:
    client: str
    upstream: str
    request: Callable[[bytes], bytes]
    response: Callable[[bytes], bytes]
    stream: Callable[[list[bytes]], list[bytes]]
    what: str  # which LiteLLM callables, for the notes

    @property
    def label(self) -> str:
        return f"{LETTER[self.client]}->{LETTER[self.upstream]}"


LITELLM = [
    Direction(
        A,
        C,
        ll_request_a_c,
        ll_response_a_c,
        ll_stream_a_c,
        "AnthropicAdapter.translate_completion_input_params_with_tool_mapping; "
        "LiteLLMAnthropicMessagesAdapter.translate_openai_response_to_anthropic"
        "(ModelResponse); "
        "AnthropicStreamWrapper(ModelResponseStream per chunk).anthropic_sse_wrapper",
    ),
    Direction(
        A,
        R,
        ll_request_a_r,
        ll_response_a_r,
        ll_stream_a_r,
        "LiteLLMAnthropicToResponsesAPIAdapter.translate_request / .translate_response"
        "(ResponsesAPIResponse); OpenAIResponsesAPIConfig.transform_streaming_response -> "
        "AnthropicResponsesStreamWrapper.async_anthropic_sse_wrapper",
    ),
    Direction(
        C,
        A,
        ll_request_c_a,
        ll_response_c_a,
        ll_stream_c_a,
        "AnthropicConfig.map_openai_params + .transform_request; "
        "AnthropicConfig.transform_response(httpx.Response); "
        "ModelResponseIterator.chunk_parser -> model_dump_json",
    ),
    Direction(
        C,
        R,
        ll_request_c_r,
        ll_response_c_r,
        ll_stream_c_r,
        "LiteLLMResponsesTransformationHandler.transform_request / .transform_response"
        "(ResponsesAPIResponse); OpenAiResponsesToChatCompletionStreamIterator.chunk_parser "
        "-> model_dump_json",
    ),
    Direction(
        R,
        C,
        ll_request_r_c,
        ll_response_r_c,
        ll_stream_r_c,
        "LiteLLMCompletionResponsesConfig.transform_responses_api_request_to_chat_completion_"
        "request / .transform_chat_completion_response_to_responses_api_response; "
        "LiteLLMCompletionStreamingIterator over ModelResponseStream chunks",
    ),
    Direction(
        R,
        A,
        ll_request_r_a,
        ll_response_r_a,
        ll_stream_r_a,
        "two hops, as litellm.aresponses(model='anthropic/...') runs them: the R->C bridge "
        "above, then AnthropicConfig (request), AnthropicConfig.transform_response and "
        "ModelResponseIterator.chunk_parser (answer)",
    ),
]

# ==================================================================== measuring


def alone_median(fn: Callable[[], object], min_time: float = 0.2, max_runs: int = 3000) -> float:
    """Median seconds of ``fn()`` run back to back (its code and data stay hot)."""
    fn()
    samples: list[float] = []
    while len(samples) < 5 or (sum(samples) < min_time and len(samples) < max_runs):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def paired_medians(
    ours: Callable[[], object],
    theirs: Callable[[], object],
    min_time: float,
    max_runs: int,
) -> tuple[float, float]:
    """Median seconds of each, timed alternately (so a burst of load on this shared
    machine hits both sides): at least 5 pairs, more until ``min_time`` is spent."""
    ours()  # warm-up (imports, caches)
    theirs()
    o: list[float] = []
    t: list[float] = []
    spent = 0.0
    while len(o) < 5 or (spent < min_time and len(o) < max_runs):
        for fn, samples in ((ours, o), (theirs, t)):
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            samples.append(dt)
            spent += dt
    return statistics.median(o), statistics.median(t)


@dataclass
class Row:
    direction: str
    kind: str
    inputs: str
    ours: float | None
    theirs: float | None
    note: str = ""
    details: list[str] = field(default_factory=list)
    ours_alone: float | None = None


def _try(fn: Callable[[], Any]) -> tuple[Any, str | None]:
    try:
        return fn(), None
    except Exception as exc:  # LiteLLM rejecting an input is a result, not a crash
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:90] if str(exc) else ''}"


def compare_calls(
    label: str,
    kind: str,
    inputs: list[tuple[str, bytes]],
    ours: Callable[[bytes], bytes],
    theirs: Callable[[bytes], bytes],
) -> Row:
    """Mean over the inputs of each input's median µs, on the inputs both accept."""
    o_sum = t_sum = a_sum = 0.0
    n = 0
    rejected = []
    for name, body in inputs:
        _, err_o = _try(lambda body=body: ours(body))
        _, err_t = _try(lambda body=body: theirs(body))
        if err_o or err_t:
            who = "ours" if err_o else "LiteLLM"
            rejected.append(f"{name} ({who}: {err_o or err_t})")
            continue
        o, t = paired_medians(
            lambda body=body: ours(body), lambda body=body: theirs(body), 0.2, 2000
        )
        o_sum += o
        t_sum += t
        a_sum += alone_median(lambda body=body: ours(body))
        n += 1
    note = ("not accepted: " + "; ".join(rejected)) if rejected else ""
    if n == 0:
        return Row(label, kind, "none accepted", None, None, note)
    inputs_label = f"{n} input{'s' if n > 1 else ''}"
    return Row(
        label, kind, inputs_label, o_sum / n * 1e6, t_sum / n * 1e6, note, [], a_sum / n * 1e6
    )


def _events(chunks: list[bytes]) -> int:
    sse = SSEDecoder()
    return sum(len(sse.decode(ch)) for ch in chunks) + len(sse.flush())


def _frames_out(out: list[bytes]) -> int:
    return sum(b.count(b"\n\n") for b in out)


def compare_streams(
    label: str,
    inputs: list[tuple[str, list[bytes]]],
    ours: Callable[[list[bytes]], list[bytes]],
    theirs: Callable[[list[bytes]], list[bytes]],
) -> list[Row]:
    rows = []
    caps = [(n, ch) for n, ch in inputs if not n.startswith("synthetic")]
    syn = [(n, ch) for n, ch in inputs if n.startswith("synthetic")]
    for title, group in (("captures", caps), ("synthetic 2,000 deltas + 2 tools", syn)):
        o_sum = t_sum = a_sum = 0.0
        events = 0
        rejected, details = [], []
        for name, chunks in group:
            out_o, err_o = _try(lambda chunks=chunks: ours(chunks))
            out_t, err_t = _try(lambda chunks=chunks: theirs(chunks))
            if err_o or err_t or not out_t or not _frames_out(out_t):
                who = "ours" if err_o else "LiteLLM"
                rejected.append(f"{name} ({who}: {err_o or err_t or 'no output'})")
                continue
            n = _events(chunks)
            details.append(
                f"{name}: {n} upstream events -> {_frames_out(out_o)} frames (ours), "
                f"{_frames_out(out_t)} frames (LiteLLM)"
            )
            o, t = paired_medians(
                lambda chunks=chunks: ours(chunks), lambda chunks=chunks: theirs(chunks), 1.5, 40
            )
            o_sum += o
            t_sum += t
            a_sum += alone_median(lambda chunks=chunks: ours(chunks), 0.3, 200)
            events += n
        note = ("not accepted: " + "; ".join(rejected)) if rejected else ""
        if not events:
            rows.append(Row(label, "stream µs/event", title, None, None, note, details))
            continue
        rows.append(
            Row(
                label,
                "stream µs/event",
                f"{title} ({events} ev)",
                o_sum / events * 1e6,
                t_sum / events * 1e6,
                note,
                details,
                a_sum / events * 1e6,
            )
        )
    return rows


def import_times(runs: int) -> tuple[float, float, float]:
    """Median ms of ``import X`` in fresh interpreters (interpreter start excluded)."""

    def once(stmt: str) -> float:
        code = f"import time; t=time.perf_counter(); {stmt}; print(time.perf_counter()-t)"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        )
        return float(out.stdout.strip().splitlines()[-1]) * 1000

    ours = statistics.median(once("import proxai_asgi") for _ in range(runs))
    ours_all = statistics.median(
        once(
            "import proxai_asgi; from proxai_asgi.protocols import get_codec; "
            "[get_codec(p) for p in ('openai_chat_completions','openai_responses',"
            "'anthropic_messages')]"
        )
        for _ in range(runs)
    )
    theirs = statistics.median(once("import litellm") for _ in range(max(3, runs // 2)))
    return ours, ours_all, theirs


def fmt(x: float | None) -> str:
    return "n/a" if x is None else (f"{x:.1f}" if x < 100 else f"{x:.0f}")


def main() -> None:
    from importlib.metadata import version

    py = sys.version.split()[0]
    print(f"litellm {version('litellm')} vs proxai-asgi {version('proxai-asgi')}, Python {py}")
    rows: list[Row] = []
    for d in LITELLM:
        requests = request_inputs(d.client)
        for title, group in (
            ("captured requests", [x for x in requests if not x[0].startswith("agent")]),
            ("agent loop, 14 KB", [x for x in requests if x[0].startswith("agent")]),
        ):
            rows.append(
                compare_calls(
                    d.label,
                    f"request µs, {title}",
                    group,
                    ours_request(d.client, d.upstream),
                    d.request,
                )
            )
        rows.append(
            compare_calls(
                d.label,
                "response µs, captured",
                response_inputs(d.upstream),
                ours_response(d.client, d.upstream),
                d.response,
            )
        )
        rows.extend(
            compare_streams(
                d.label, stream_inputs(d.upstream), ours_stream(d.client, d.upstream), d.stream
            )
        )
        print(f"  measured {d.label}", file=sys.stderr, flush=True)

    print()
    print(
        "| direction (client->upstream) | what | inputs | ours µs | LiteLLM µs | speed-up "
        "| ours µs, back to back |"
    )
    print("|---|---|---|---:|---:|---:|---:|")
    for r in rows:
        ratio = r.theirs / r.ours if r.ours and r.theirs else None
        speed = "n/a" if ratio is None else f"{ratio:.1f}x" if ratio < 10 else f"{ratio:.0f}x"
        figures = f"{fmt(r.ours)} | {fmt(r.theirs)} | {speed} | {fmt(r.ours_alone)}"
        print(f"| {r.direction} | {r.kind} | {r.inputs} | {figures} |")
    print()
    print("Notes:")
    for r in rows:
        if r.note:
            print(f"- {r.direction} {r.kind} {r.inputs}: {r.note}")
    print("- Stream outputs (frames written), to show both sides did the work:")
    for r in rows:
        for line in r.details:
            print(f"  - {r.direction}: {line}")
    print("- LiteLLM callables per direction:")
    for d in LITELLM:
        print(f"  - {d.label}: {d.what}")

    print()
    runs = int(os.environ.get("IMPORT_RUNS", "7"))
    ours_ms, ours_all_ms, theirs_ms = import_times(runs)
    print(f"import time, fresh interpreter, median of {runs} ({max(3, runs // 2)} for litellm):")
    print(f"  import proxai_asgi                    {ours_ms:8.1f} ms")
    print(f"  import proxai_asgi + all three codecs {ours_all_ms:8.1f} ms")
    print(
        f"  import litellm                        {theirs_ms:8.1f} ms  "
        f"({theirs_ms / ours_ms:.0f}x; LITELLM_LOCAL_MODEL_COST_MAP=True)"
    )


if __name__ == "__main__":
    main()
