"""One web search answer as each provider with hosted search sends it, plain JSON and
SSE, written from the API references (Anthropic web search tool, Responses
``web_search`` and its streaming events, Gemini grounding with Google Search) with our
own values: the model searched ``QUERY``, found ``PAGES`` and cites ``CITED`` (after an
em dash, so character and UTF-8 byte offsets differ) with the first page.

Anthropic splits its answer into text blocks so that the cited claim is a block of its
own, and quotes the *page* in ``cited_text``; Responses and Gemini cite a span of their
one text (Gemini in bytes).
"""

from __future__ import annotations

import json
from typing import Any

QUERY = "do sea otters hold hands"
PAGES = [
    ("https://otters.example/sleep", "How otters sleep"),
    ("https://wildlife.example/otters", "Otter facts"),
]
LEAD = "Sea otters — in rafts — "
CITED = "hold hands while they sleep"
TAIL = ", so they do not drift apart."
TEXT = LEAD + CITED + TAIL
PAGE_QUOTE = "Pairs of otters were seen holding paws while resting on the water."

SSE = [("content-type", "text/event-stream")]
JSON = [("content-type", "application/json")]


# ----------------------------------------------------------------- Anthropic

_SEARCH_RESULTS = [
    {
        "type": "web_search_result",
        "url": url,
        "title": title,
        "encrypted_content": f"EqAnthropicPage{n}",
        "page_age": "March 3, 2025",
    }
    for n, (url, title) in enumerate(PAGES)
]
_ANTHROPIC_CITATION = {
    "type": "web_search_result_location",
    "url": PAGES[0][0],
    "title": PAGES[0][1],
    "cited_text": PAGE_QUOTE,
    "encrypted_index": "EpAnthropicIndex0",
}
_USAGE = {"input_tokens": 40, "output_tokens": 25, "server_tool_use": {"web_search_requests": 1}}


def anthropic_json() -> bytes:
    return json.dumps(
        {
            "id": "msg_search01",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [
                {"type": "text", "text": "I'll search for that."},
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01",
                    "name": "web_search",
                    "input": {"query": QUERY},
                },
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_01",
                    "content": _SEARCH_RESULTS,
                },
                {"type": "text", "text": LEAD},
                {"type": "text", "text": CITED, "citations": [_ANTHROPIC_CITATION]},
                {"type": "text", "text": TAIL},
            ],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": _USAGE,
        }
    ).encode()


def _frame(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def anthropic_sse() -> bytes:
    out = [
        _frame(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_search01",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-test",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 40, "output_tokens": 1},
                },
            },
        )
    ]

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

    block(
        0, {"type": "text", "text": ""}, [{"type": "text_delta", "text": "I'll search for that."}]
    )
    block(
        1,
        {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {}},
        [
            {"type": "input_json_delta", "partial_json": '{"query": "do sea'},
            {"type": "input_json_delta", "partial_json": ' otters hold hands"}'},
        ],
    )
    block(
        2,
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01",
            "content": _SEARCH_RESULTS,
        },
        [],
    )
    block(3, {"type": "text", "text": ""}, [{"type": "text_delta", "text": LEAD}])
    # The citation comes first, then the cited claim's text.
    block(
        4,
        {"type": "text", "text": ""},
        [
            {"type": "citations_delta", "citation": _ANTHROPIC_CITATION},
            {"type": "text_delta", "text": CITED[:10]},
            {"type": "text_delta", "text": CITED[10:]},
        ],
    )
    block(5, {"type": "text", "text": ""}, [{"type": "text_delta", "text": TAIL}])
    out.append(
        _frame(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 25, "server_tool_use": {"web_search_requests": 1}},
            },
        )
    )
    out.append(_frame("message_stop", {"type": "message_stop"}))
    return b"".join(out)


# ----------------------------------------------------------------- Responses

_SOURCES = [{"type": "url", "url": url} for url, _ in PAGES]
_START = len(LEAD)  # Responses offsets: characters
_URL_CITATION = {
    "type": "url_citation",
    "url": PAGES[0][0],
    "title": PAGES[0][1],
    "start_index": _START,
    "end_index": _START + len(CITED),
}
_SEARCH_DONE = {
    "type": "web_search_call",
    "id": "ws_0a1",
    "status": "completed",
    "action": {"type": "search", "query": QUERY, "sources": _SOURCES},
}
_MESSAGE_DONE = {
    "type": "message",
    "id": "msg_0a2",
    "status": "completed",
    "role": "assistant",
    "content": [
        {"type": "output_text", "text": TEXT, "annotations": [_URL_CITATION], "logprobs": []}
    ],
}
_RESPONSES_USAGE = {
    "input_tokens": 40,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 25,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 65,
}


def _response(status: str, output: list[Any], usage: Any) -> dict[str, Any]:
    return {
        "id": "resp_search01",
        "object": "response",
        "created_at": 1760000000,
        "status": status,
        "model": "gpt-test",
        "output": output,
        "tools": [{"type": "web_search"}],
        "usage": usage,
    }


def responses_json() -> bytes:
    return json.dumps(
        _response("completed", [_SEARCH_DONE, _MESSAGE_DONE], _RESPONSES_USAGE)
    ).encode()


def responses_sse() -> bytes:
    seq = iter(range(1000))
    out: list[bytes] = []

    def ev(kind: str, **data: Any) -> None:
        out.append(_frame(kind, {"type": kind, **data, "sequence_number": next(seq)}))

    ev("response.created", response=_response("in_progress", [], None))
    ev("response.in_progress", response=_response("in_progress", [], None))
    added = {
        "type": "web_search_call",
        "id": "ws_0a1",
        "status": "in_progress",
        "action": {"type": "search"},
    }
    ev("response.output_item.added", output_index=0, item=added)
    for step in ("in_progress", "searching", "completed"):
        ev(f"response.web_search_call.{step}", output_index=0, item_id="ws_0a1")
    ev("response.output_item.done", output_index=0, item=_SEARCH_DONE)
    ev(
        "response.output_item.added",
        output_index=1,
        item={
            "type": "message",
            "id": "msg_0a2",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        },
    )
    ids = {"item_id": "msg_0a2", "output_index": 1, "content_index": 0}
    ev(
        "response.content_part.added",
        **ids,
        part={"type": "output_text", "text": "", "annotations": []},
    )
    for piece in (TEXT[:12], TEXT[12:40], TEXT[40:]):
        ev("response.output_text.delta", **ids, delta=piece, logprobs=[])
    ev("response.output_text.annotation.added", **ids, annotation_index=0, annotation=_URL_CITATION)
    ev("response.output_text.done", **ids, text=TEXT, logprobs=[])
    ev("response.content_part.done", **ids, part=_MESSAGE_DONE["content"][0])
    ev("response.output_item.done", output_index=1, item=_MESSAGE_DONE)
    ev(
        "response.completed",
        response=_response("completed", [_SEARCH_DONE, _MESSAGE_DONE], _RESPONSES_USAGE),
    )
    return b"".join(out)


# -------------------------------------------------------------------- Gemini

_BYTE_START = len(LEAD.encode())  # Gemini offsets: UTF-8 bytes
_GROUNDING = {
    "webSearchQueries": [QUERY],
    "searchEntryPoint": {"renderedContent": '<div class="container">search chip</div>'},
    "groundingChunks": [{"web": {"uri": url, "title": title}} for url, title in PAGES],
    "groundingSupports": [
        {
            "segment": {
                "startIndex": _BYTE_START,
                "endIndex": _BYTE_START + len(CITED.encode()),
                "text": CITED,
            },
            "groundingChunkIndices": [0],
        }
    ],
}
_GEMINI_USAGE = {"promptTokenCount": 40, "candidatesTokenCount": 25, "totalTokenCount": 65}


def gemini_json() -> bytes:
    return json.dumps(
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": TEXT}]},
                    "finishReason": "STOP",
                    "index": 0,
                    "groundingMetadata": _GROUNDING,
                }
            ],
            "usageMetadata": _GEMINI_USAGE,
            "modelVersion": "gemini-test",
            "responseId": "gsearch01",
        }
    ).encode()


def gemini_sse() -> bytes:
    """Text first; the grounding only on the last chunk, with the finish."""
    chunks: list[dict[str, Any]] = []
    for piece in (TEXT[:15], TEXT[15:45]):
        chunks.append(
            {
                "candidates": [
                    {"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}
                ],
                "modelVersion": "gemini-test",
                "responseId": "gsearch01",
            }
        )
    chunks.append(
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": TEXT[45:]}]},
                    "finishReason": "STOP",
                    "index": 0,
                    "groundingMetadata": _GROUNDING,
                }
            ],
            "usageMetadata": _GEMINI_USAGE,
            "modelVersion": "gemini-test",
            "responseId": "gsearch01",
        }
    )
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


ANSWERS = {
    "anthropic_messages": (anthropic_json, anthropic_sse),
    "openai_responses": (responses_json, responses_sse),
    "gemini_generate_content": (gemini_json, gemini_sse),
}
