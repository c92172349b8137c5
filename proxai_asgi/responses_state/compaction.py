"""Codex's server-side compaction, built for upstreams that have none.

Codex compacts a long conversation by asking the Responses API for a ``compaction``
item: either inline, with a request whose ``input`` ends with
``{"type": "compaction_trigger"}`` (its answer must hold exactly one ``compaction``
item), or with the older ``POST /v1/responses/compact`` (``{"output": [...]}``, the
new history). The item's ``encrypted_content`` is opaque to the client, which sends
the item back in later input in place of the turns it replaced.

Over a Chat or Anthropic upstream the proxy builds it: the conversation goes to the
upstream model with a request to summarise it, and the summary travels inside the
item's ``encrypted_content`` as our own carrier (``reasoning_carry.pack``). When such
an item comes back in a request, it is expanded into a user message holding the
summary before translation, so every upstream reads it as ordinary text. A
``compaction`` item that is not ours (a real OpenAI one) is left alone.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from .. import ids, reasoning_carry
from ..errors import ProxyError
from ..sse import encode_event
from ..transport.upstream import Message

if TYPE_CHECKING:
    from ..routing import Upstream
    from ..serving.exchange import Exchange

# Our own words, written for this proxy.
SUMMARY_PROMPT = (
    "Context compaction: the conversation above is about to be replaced by a summary. "
    "Write that summary now, for yourself to continue the work from: the user's goals "
    "and constraints, decisions taken, what was done (commands, files, results), what "
    "is still open, and any identifiers, paths or values that will be needed. Answer "
    "with the summary only; do not call tools."
)
SUMMARY_HEADER = "Summary of the earlier conversation (compacted):\n\n"
_KIND = "compaction"
_NO_USAGE = {
    "input_tokens": 0,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 0,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 0,
}

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()

# Runs a Responses request body (bytes) through the proxy's own pipeline and returns
# the Responses JSON answer; raises ProxyError for an error answer.
Generate = Callable[[bytes], Awaitable[dict[str, Any]]]


def mentions(body: bytes) -> bool:
    """Cheap pre-check before decoding: only bodies naming a compaction item qualify."""
    return b'"compaction' in body


def pack(summary: str) -> str:
    return reasoning_carry.pack({"p": _KIND, "summary": summary})


def unpack(encrypted_content: Any) -> str | None:
    if not isinstance(encrypted_content, str):
        return None
    payload = reasoning_carry.unpack(encrypted_content)
    if payload is None or payload.get("p") != _KIND:
        return None
    summary = payload.get("summary")
    return summary if isinstance(summary, str) else None


def expand(items: list[Any]) -> list[Any]:
    """``items`` with each of our compaction items replaced by the summary it carries."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict) and item.get("type") == _KIND:
            summary = unpack(item.get("encrypted_content"))
            if summary is not None:
                out.append(_user(SUMMARY_HEADER + summary))
                continue
        out.append(item)
    return out


def is_triggered(items: list[Any]) -> bool:
    return (
        bool(items)
        and isinstance(items[-1], dict)
        and items[-1].get("type") == "compaction_trigger"
    )


def decode(body: bytes) -> dict[str, Any]:
    try:
        obj = _dec.decode(body)
    except msgspec.DecodeError:
        raise ProxyError.invalid("request body is not valid JSON") from None
    if not isinstance(obj, dict):
        raise ProxyError.invalid("request body must be a JSON object")
    return obj


def input_items(obj: dict[str, Any]) -> list[Any]:
    value = obj.get("input")
    if isinstance(value, str):
        return [_user(value)]
    if isinstance(value, list):
        return value
    if value is None:
        return []
    raise ProxyError.invalid("input must be a string or a list of items", param="input")


# ----------------------------------------------------------------- the hooks


async def serve(ex: Exchange, up: Upstream, body: bytes) -> bytes | None:
    """The Responses request hook: expand our compaction items (for every upstream:
    no provider can read our carrier) and, over an upstream without compaction of
    its own, answer a ``compaction_trigger`` request here. Returns the body to send
    on, or None when the request has been answered."""
    obj = decode(body)
    items = input_items(obj)
    expanded = expand(items)
    if is_triggered(expanded) and up.protocol != ex.client.name:
        obj["input"] = expanded[:-1]
        summary, answer = await summarize(obj, _generator(ex))
        result = response_object(obj, answer, compaction_item(summary))
        from .stored_responses import Turn

        if isinstance(ex.turn, Turn):  # stored: under the id minted for this turn
            result["id"] = ex.turn.response_id
        if obj.get("stream"):
            await ex.start(200, [(b"content-type", b"text/event-stream; charset=utf-8")])
            await ex.body(stream_events(result), more=False)
        else:
            await ex.json(200, _enc.encode(result), [])
        return None
    if expanded == items:
        return body
    obj["input"] = expanded
    return _enc.encode(obj)


async def compact(ex: Exchange, body: bytes) -> None:
    """``POST /v1/responses/compact``, for any upstream."""
    obj = decode(body)
    if not obj.get("model"):
        raise ProxyError.invalid("model: field required", param="model")
    summary, answer = await summarize(obj, _generator(ex))
    ex.model = answer.get("model") or obj.get("model")
    await ex.json(200, _enc.encode(compact_result(obj, answer, compaction_item(summary))), [])


def _generator(ex: Exchange) -> Generate:
    """Runs a Responses body through a sibling exchange of ``ex`` (routing,
    translation, the upstream) and returns its JSON answer."""

    async def generate(body: bytes) -> dict[str, Any]:
        status = 0
        out = bytearray()

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                out.extend(message.get("body", b""))

        from ..middleware import generate as generate_in

        sub = type(ex)(ex.mw, ex.client, ex.scope, ex.receive, capture)
        await generate_in(sub, body)
        ex.upstream, ex.usage = sub.upstream, sub.usage
        try:
            answer = decode(bytes(out))
        except ProxyError:
            answer = {}
        if status != 200:
            error = answer.get("error")
            text = error.get("message") if isinstance(error, dict) else None
            raise ProxyError(status or 502, str(text or "the upstream failed to summarise"))
        return answer

    return generate


async def summarize(request: dict[str, Any], generate: Generate) -> tuple[str, dict[str, Any]]:
    """Ask the upstream model to summarise ``request``'s conversation; returns the
    summary and the upstream's Responses answer (for its id, model and usage)."""
    items = [*expand(input_items(request)), _user(SUMMARY_PROMPT)]
    ask: dict[str, Any] = {
        "model": request.get("model"),
        "input": items,
        "stream": False,
        "store": False,
    }
    for key in ("instructions", "reasoning", "max_output_tokens", "prompt_cache_key"):
        if request.get(key) is not None:
            ask[key] = request[key]
    # Tools stay declared (Anthropic rejects tool history without them) but unused.
    if request.get("tools"):
        ask["tools"] = request["tools"]
        ask["tool_choice"] = "none"
    answer = await generate(_enc.encode(ask))
    summary = "\n".join(
        part.get("text", "")
        for item in answer.get("output") or []
        if isinstance(item, dict) and item.get("type") == "message"
        for part in item.get("content") or []
        if isinstance(part, dict) and part.get("type") == "output_text"
    ).strip()
    if not summary:
        raise ProxyError(502, "the upstream model returned no summary to compact with")
    return summary, answer


def compaction_item(summary: str) -> dict[str, Any]:
    return {"type": _KIND, "id": "cmp_" + ids.random_hex(16), "encrypted_content": pack(summary)}


def response_object(
    request: dict[str, Any], answer: dict[str, Any], item: dict[str, Any]
) -> dict[str, Any]:
    """The inline compaction's Responses object: the summary call's, with the
    compaction item as its only output."""
    obj = dict(answer)
    obj.update(
        id=answer.get("id") or "resp_" + ids.random_hex(16),
        created_at=answer.get("created_at") or int(time.time()),
        status="completed",
        output=[item],
        previous_response_id=request.get("previous_response_id"),
    )
    return obj


def stream_events(obj: dict[str, Any]) -> bytes:
    """The inline compaction as a Responses event stream."""
    start = {**obj, "status": "in_progress", "output": [], "usage": None}
    item = obj["output"][0]
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": start}),
        ("response.in_progress", {"response": start}),
        ("response.output_item.added", {"output_index": 0, "item": item}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": obj}),
    ]
    out = bytearray()
    for n, (kind, fields) in enumerate(events):
        data = _enc.encode({"type": kind, **fields, "sequence_number": n})
        out += encode_event(data, kind)
    return bytes(out)


def compact_result(
    request: dict[str, Any], answer: dict[str, Any], item: dict[str, Any]
) -> dict[str, Any]:
    """``POST /v1/responses/compact``'s answer: the user's own messages, then the
    compaction item standing for everything else."""
    kept = [
        i
        for i in expand(input_items(request))
        if isinstance(i, dict)
        and i.get("role") == "user"
        and i.get("type", "message") == "message"
        and not _is_summary(i)
    ]
    return {
        "id": "resp_" + ids.random_hex(16),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": [*kept, item],
        "usage": answer.get("usage") or _NO_USAGE,
    }


def _is_summary(item: dict[str, Any]) -> bool:
    content = item.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        return str(content[0].get("text", "")).startswith(SUMMARY_HEADER)
    return False


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
