"""One hosted code execution answer as each provider sends it, plain JSON and SSE,
written from the API references (Anthropic code execution tool — the current
``bash_code_execution`` and the older Python ``code_execution`` —, the Responses
``code_interpreter`` tool with its ``code_interpreter_call`` item and streaming events,
Gemini code execution's ``executableCode`` / ``codeExecutionResult`` parts) with our own
values: the model runs ``CODE[provider]``, which prints ``STDOUT``, then says ``TEXT``."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers.search_answers import JSON, SSE, _frame

STDOUT = "1048576\n"
TEXT = "2**20 is 1048576."
CODE = {
    "anthropic_messages": "python3 -c 'print(2**20)'",
    "openai_responses": "print(2**20)",
    "gemini_generate_content": "print(2**20)\n",
}

__all__ = ["ANSWERS", "CODE", "JSON", "SSE", "STDOUT", "TEXT"]

# ----------------------------------------------------------------- Anthropic

_CALL = {
    "type": "server_tool_use",
    "id": "srvtoolu_c1",
    "name": "bash_code_execution",
    "input": {"command": CODE["anthropic_messages"]},
}
_RESULT = {
    "type": "bash_code_execution_tool_result",
    "tool_use_id": "srvtoolu_c1",
    "content": {
        "type": "bash_code_execution_result",
        "stdout": STDOUT,
        "stderr": "",
        "return_code": 0,
        "content": [],
    },
}
_USAGE = {"input_tokens": 30, "output_tokens": 20}


def anthropic_json() -> bytes:
    return json.dumps(
        {
            "id": "msg_code01",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [
                {"type": "text", "text": "Let me compute it."},
                _CALL,
                _RESULT,
                {"type": "text", "text": TEXT},
            ],
            "container": {"id": "container_01", "expires_at": "2030-01-01T00:00:00Z"},
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": _USAGE,
        }
    ).encode()


def anthropic_sse() -> bytes:
    message = {
        "id": "msg_code01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 30, "output_tokens": 1},
    }
    out = [_frame("message_start", {"type": "message_start", "message": message})]

    def block(i: int, start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        out.append(
            _frame(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": start},
            )
        )
        for d in deltas:
            out.append(
                _frame(
                    "content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}
                )
            )
        out.append(_frame("content_block_stop", {"type": "content_block_stop", "index": i}))

    text_start = {"type": "text", "text": ""}
    block(0, text_start, [{"type": "text_delta", "text": "Let me compute it."}])
    partial = json.dumps(_CALL["input"])
    block(
        1,
        {**_CALL, "input": {}},
        [
            {"type": "input_json_delta", "partial_json": partial[:12]},
            {"type": "input_json_delta", "partial_json": partial[12:]},
        ],
    )
    block(2, _RESULT, [])
    block(3, text_start, [{"type": "text_delta", "text": TEXT}])
    delta = {"stop_reason": "end_turn", "stop_sequence": None}
    out.append(
        _frame(
            "message_delta",
            {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 20}},
        )
    )
    out.append(_frame("message_stop", {"type": "message_stop"}))
    return b"".join(out)


# ----------------------------------------------------------------- Responses

_RUN_DONE = {
    "type": "code_interpreter_call",
    "id": "ci_0b1",
    "status": "completed",
    "container_id": "cntr_0b9",
    "code": CODE["openai_responses"],
    "outputs": [{"type": "logs", "logs": STDOUT}],
}
_MESSAGE_DONE = {
    "type": "message",
    "id": "msg_0b2",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": TEXT, "annotations": [], "logprobs": []}],
}
_RESPONSES_USAGE = {
    "input_tokens": 30,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 20,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 50,
}


def _response(status: str, output: list[Any], usage: Any) -> dict[str, Any]:
    return {
        "id": "resp_code01",
        "object": "response",
        "created_at": 1760000000,
        "status": status,
        "model": "gpt-test",
        "output": output,
        "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}],
        "usage": usage,
    }


def responses_json() -> bytes:
    return json.dumps(_response("completed", [_RUN_DONE, _MESSAGE_DONE], _RESPONSES_USAGE)).encode()


def responses_sse() -> bytes:
    seq = iter(range(1000))
    out: list[bytes] = []

    def ev(kind: str, **data: Any) -> None:
        out.append(_frame(kind, {"type": kind, **data, "sequence_number": next(seq)}))

    ev("response.created", response=_response("in_progress", [], None))
    ev("response.in_progress", response=_response("in_progress", [], None))
    added = {**_RUN_DONE, "status": "in_progress", "code": None, "outputs": None}
    ev("response.output_item.added", output_index=0, item=added)
    run = {"item_id": "ci_0b1", "output_index": 0}
    ev("response.code_interpreter_call.in_progress", **run)
    ev("response.code_interpreter_call_code.delta", **run, delta="print(")
    ev("response.code_interpreter_call_code.delta", **run, delta="2**20)")
    ev("response.code_interpreter_call_code.done", **run, code=CODE["openai_responses"])
    ev("response.code_interpreter_call.interpreting", **run)
    ev("response.code_interpreter_call.completed", **run)
    ev("response.output_item.done", output_index=0, item=_RUN_DONE)
    msg = {**_MESSAGE_DONE, "status": "in_progress", "content": []}
    ev("response.output_item.added", output_index=1, item=msg)
    ids = {"item_id": "msg_0b2", "output_index": 1, "content_index": 0}
    part = {"type": "output_text", "text": "", "annotations": []}
    ev("response.content_part.added", **ids, part=part)
    ev("response.output_text.delta", **ids, delta=TEXT, logprobs=[])
    ev("response.output_text.done", **ids, text=TEXT, logprobs=[])
    ev("response.content_part.done", **ids, part=_MESSAGE_DONE["content"][0])
    ev("response.output_item.done", output_index=1, item=_MESSAGE_DONE)
    done = _response("completed", [_RUN_DONE, _MESSAGE_DONE], _RESPONSES_USAGE)
    ev("response.completed", response=done)
    return b"".join(out)


# -------------------------------------------------------------------- Gemini

_PARTS: list[dict[str, Any]] = [
    {"executableCode": {"language": "PYTHON", "code": CODE["gemini_generate_content"]}},
    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": STDOUT}},
    {"text": TEXT},
]
_GEMINI_USAGE = {"promptTokenCount": 30, "candidatesTokenCount": 20, "totalTokenCount": 50}


def _chunk(parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    out: dict[str, Any] = {"candidates": [cand], "modelVersion": "gemini-test"}
    out["responseId"] = "gcode01"
    if last:
        cand["finishReason"] = "STOP"
        out["usageMetadata"] = _GEMINI_USAGE
    return out


def gemini_json() -> bytes:
    return json.dumps(_chunk(_PARTS, True)).encode()


def gemini_sse() -> bytes:
    """Each part its own chunk, as the API streams code execution."""
    chunks = [_chunk([p], i == len(_PARTS) - 1) for i, p in enumerate(_PARTS)]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


ANSWERS = {
    "anthropic_messages": (anthropic_json, anthropic_sse),
    "openai_responses": (responses_json, responses_sse),
    "gemini_generate_content": (gemini_json, gemini_sse),
}
