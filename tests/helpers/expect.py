"""What an answer *says*, independent of protocol: text, refusal, tool calls, stop
category and token usage. Extracted from raw captures with small independent folds
(not with the code under test), and from what each official SDK returns, so tests
can compare an upstream's answer with what a client of another protocol received."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .captures import load


@dataclass
class Gist:
    text: str = ""
    refusal: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, parsed arguments)
    stop: str = ""  # one of: done, tools, truncated, refused
    input_tokens: int | None = None
    output_tokens: int | None = None


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        return json.loads(raw) if raw.strip() else {}
    return raw


_CHAT_STOP = {
    "stop": "done",
    "tool_calls": "tools",
    "length": "truncated",
    "content_filter": "refused",
}
_ANTH_STOP = {
    "end_turn": "done",
    "stop_sequence": "done",
    "tool_use": "tools",
    "max_tokens": "truncated",
    "refusal": "refused",
}


def _sse_data(body: str) -> list[tuple[str | None, Any]]:
    out: list[tuple[str | None, Any]] = []
    for frame in body.replace("\r\n", "\n").split("\n\n"):
        event = None
        data = []
        for line in frame.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if data and data != ["[DONE]"]:
            out.append((event, json.loads("\n".join(data))))
    return out


def from_capture(name: str) -> Gist:
    rec = load(name)
    body = rec["response"]["body"]
    api = rec["api"]
    stream = "_sse_" in name
    g = Gist()
    if api.startswith("openai.chat"):
        if stream:
            calls: dict[int, list[str]] = {}
            finish = None
            for _, d in _sse_data(body):
                if d.get("usage"):
                    g.input_tokens = d["usage"]["prompt_tokens"]
                    g.output_tokens = d["usage"]["completion_tokens"]
                for ch in d["choices"]:
                    delta = ch["delta"]
                    g.text += delta.get("content") or ""
                    g.refusal += delta.get("refusal") or ""
                    for tc in delta.get("tool_calls") or []:
                        slot = calls.setdefault(tc["index"], ["", ""])
                        fn = tc.get("function") or {}
                        slot[0] = fn.get("name") or slot[0]
                        slot[1] += fn.get("arguments") or ""
                    finish = ch.get("finish_reason") or finish
            g.calls = [(n, _args(a)) for _, (n, a) in sorted(calls.items())]
        else:
            d = json.loads(body)
            msg = d["choices"][0]["message"]
            g.text = msg.get("content") or ""
            g.refusal = msg.get("refusal") or ""
            g.calls = [
                (t["function"]["name"], _args(t["function"]["arguments"]))
                for t in msg.get("tool_calls") or []
            ]
            finish = d["choices"][0]["finish_reason"]
            g.input_tokens = d["usage"]["prompt_tokens"]
            g.output_tokens = d["usage"]["completion_tokens"]
        g.stop = "refused" if g.refusal else _CHAT_STOP[finish or "stop"]
    elif api.startswith("anthropic"):
        if stream:
            blocks: dict[int, dict[str, Any]] = {}
            stop = None
            usage: dict[str, int] = {}
            for _, d in _sse_data(body):
                t = d["type"]
                if t == "message_start":
                    usage.update(d["message"]["usage"])
                elif t == "content_block_start":
                    blocks[d["index"]] = dict(d["content_block"], _json="")
                elif t == "content_block_delta":
                    b = blocks[d["index"]]
                    delta = d["delta"]
                    if delta["type"] == "text_delta":
                        b["text"] = b.get("text", "") + delta["text"]
                    elif delta["type"] == "input_json_delta":
                        b["_json"] += delta["partial_json"]
                elif t == "message_delta":
                    stop = d["delta"]["stop_reason"]
                    usage.update({k: v for k, v in d["usage"].items() if v is not None})
            content = [blocks[i] for i in sorted(blocks)]
            for b in content:
                if b["type"] == "tool_use":
                    b["input"] = _args(b["_json"])
        else:
            d = json.loads(body)
            content = d["content"]
            stop = d["stop_reason"]
            usage = d["usage"]
        g.text = "".join(b.get("text", "") for b in content if b["type"] == "text")
        g.calls = [(b["name"], b["input"]) for b in content if b["type"] == "tool_use"]
        g.stop = _ANTH_STOP[stop]
        g.input_tokens = (
            usage.get("input_tokens", 0)
            + (usage.get("cache_read_input_tokens") or 0)
            + (usage.get("cache_creation_input_tokens") or 0)
        )
        g.output_tokens = usage.get("output_tokens")
    elif api.startswith("google"):
        frames = [d for _, d in _sse_data(body)] if stream else [json.loads(body)]
        g = from_gemini_json(frames)
    else:  # openai.responses
        if stream:
            final = [
                d
                for _, d in _sse_data(body)
                if d["type"].startswith("response.")
                and d["type"].split(".")[1] in ("completed", "incomplete", "failed")
            ]
            resp = final[-1]["response"]
        else:
            resp = json.loads(body)
        for item in resp["output"]:
            if item["type"] == "message":
                for part in item["content"]:
                    if part["type"] == "output_text":
                        g.text += part["text"]
                    elif part["type"] == "refusal":
                        g.refusal += part["refusal"]
            elif item["type"] == "function_call":
                g.calls.append((item["name"], _args(item["arguments"])))
        status = resp["status"]
        if g.refusal:
            g.stop = "refused"
        elif status == "incomplete":
            g.stop = "truncated"
        else:
            g.stop = "tools" if g.calls else "done"
        g.input_tokens = resp["usage"]["input_tokens"]
        g.output_tokens = resp["usage"]["output_tokens"]
    return g


_GEMINI_STOP = {"STOP": "done", "MAX_TOKENS": "truncated"}


def from_gemini_json(frames: list[dict[str, Any]]) -> Gist:
    """Gemini answers (one JSON body, or a stream's frames) folded."""
    g = Gist()
    finish = None
    usage: dict[str, Any] = {}
    blocked = False
    for d in frames:
        usage = d.get("usageMetadata") or usage
        blocked = blocked or bool((d.get("promptFeedback") or {}).get("blockReason"))
        for cand in d.get("candidates") or []:
            for p in (cand.get("content") or {}).get("parts") or []:
                if "functionCall" in p:
                    g.calls.append((p["functionCall"]["name"], p["functionCall"].get("args") or {}))
                elif "text" in p and not p.get("thought"):
                    g.text += p["text"]
            finish = cand.get("finishReason") or finish
    _gemini_stop(g, finish, blocked)
    g.input_tokens = usage.get("promptTokenCount")
    g.output_tokens = (usage.get("candidatesTokenCount") or 0) + (
        usage.get("thoughtsTokenCount") or 0
    )
    return g


def _gemini_stop(g: Gist, finish: str | None, blocked: bool) -> None:
    if blocked or (finish is not None and finish not in _GEMINI_STOP):
        g.stop = "refused"
        g.refusal, g.text = g.text, ""
    else:
        g.stop = _GEMINI_STOP.get(finish or "STOP", "done")
        if g.stop == "done" and g.calls:
            g.stop = "tools"


# ---------------------------------------------------------------- SDK results


def from_gemini(responses: list[Any]) -> Gist:
    """What the google-genai SDK returned: one response, or a stream's chunks."""
    g = Gist()
    finish = None
    usage = None
    blocked = False
    for r in responses:
        usage = r.usage_metadata or usage
        blocked = blocked or bool(r.prompt_feedback and r.prompt_feedback.block_reason)
        for cand in r.candidates or []:
            for p in (cand.content.parts if cand.content else None) or []:
                if p.function_call is not None:
                    g.calls.append((p.function_call.name, dict(p.function_call.args or {})))
                elif p.text is not None and not p.thought:
                    g.text += p.text
            if cand.finish_reason is not None:
                finish = cand.finish_reason.value
    _gemini_stop(g, finish, blocked)
    if usage is not None:
        g.input_tokens = usage.prompt_token_count
        g.output_tokens = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    return g


def from_chat(completion: Any) -> Gist:
    ch = completion.choices[0]
    msg = ch.message
    g = Gist(text=msg.content or "", refusal=msg.refusal or "")
    g.calls = [(t.function.name, _args(t.function.arguments)) for t in msg.tool_calls or []]
    g.stop = "refused" if g.refusal else _CHAT_STOP[ch.finish_reason]
    if completion.usage is not None:
        g.input_tokens = completion.usage.prompt_tokens
        g.output_tokens = completion.usage.completion_tokens
    return g


def from_anthropic(message: Any) -> Gist:
    g = Gist()
    for b in message.content:
        if b.type == "text":
            g.text += b.text
        elif b.type == "tool_use":
            g.calls.append((b.name, b.input))
    g.stop = _ANTH_STOP[message.stop_reason]
    if g.stop == "refused":
        g.refusal, g.text = g.text, ""
    u = message.usage
    g.input_tokens = (
        u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
    )
    g.output_tokens = u.output_tokens
    return g


def from_responses(response: Any) -> Gist:
    g = Gist()
    for item in response.output:
        if item.type == "message":
            for part in item.content:
                if part.type == "output_text":
                    g.text += part.text
                elif part.type == "refusal":
                    g.refusal += part.refusal
        elif item.type == "function_call":
            g.calls.append((item.name, _args(item.arguments)))
    details = getattr(response, "incomplete_details", None)
    filtered = details is not None and details.reason == "content_filter"
    if g.refusal or response.status == "failed" or filtered:
        g.stop = "refused"
        if not g.refusal:
            g.refusal, g.text = g.text, ""
    elif response.status == "incomplete":
        g.stop = "truncated"
    else:
        g.stop = "tools" if g.calls else "done"
    if response.usage is not None:
        g.input_tokens = response.usage.input_tokens
        g.output_tokens = response.usage.output_tokens
    return g
