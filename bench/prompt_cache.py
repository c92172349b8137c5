"""Input tokens an OpenAI-protocol agent loop is billed on an Anthropic upstream, with
the proxy's cache breakpoints and without them.

    .venv/bin/python bench/prompt_cache.py            # --turns 12

A 12-turn agent loop as Codex (Responses) and a Chat client send it: a 12 KB
developer prompt, six tools, and every turn the whole conversation again plus the
model's last tool call and its ~1.5 KB output. The client is the official ``openai``
SDK; the proxy is ``ProxaiMiddleware`` with ``Upstream.inner_app("anthropic_messages")``
(no network: this measures billing, not speed); the upstream is a scripted Anthropic
model that answers with a tool call (a final text on the last turn) and bills the
prompt as Anthropic's prompt cache does:

- the prompt is the sequence of blocks tools -> system -> messages; a block's tokens
  are estimated as a quarter of its JSON length (the ratios, not the counts, matter);
- only a prefix ending at a ``cache_control`` block is written, and only when it
  holds at least 1,024 tokens (the minimum for Sonnet-class models);
- a breakpoint reads the longest prefix already written that ends at it or at one
  of the 20 block boundaries before it; the prefix must match block for block
  (markers aside);
- usage: ``cache_read_input_tokens`` (billed at 0.1x), ``cache_creation_input_tokens``
  (1.25x, the five-minute cache), ``input_tokens`` what follows (1x).

Printed per client protocol: the tokens of each kind summed over the loop, the input
cost in base-price tokens, and what the client saw as ``cached_tokens``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._common import read_body  # noqa: E402
from proxai_asgi import ProxaiMiddleware, Upstream  # noqa: E402

MIN_CACHEABLE = 1024
LOOKBACK = 20
WRITE_PRICE, READ_PRICE = 1.25, 0.1
DEVELOPER_PROMPT = "".join(
    f"Rule {i}: keep changes small, run the tests, and explain each edit in one line. "
    for i in range(150)
)  # ~12 KB
TOOL_NAMES = ["exec_command", "read_file", "write_file", "list_dir", "search", "apply_patch"]


def tool_output(turn: int) -> str:
    return "".join(
        f"src/module_{turn}/file_{k}.py: def handler_{k}(request): ...\n" for k in range(28)
    )


# ------------------------------------------------------------------ the upstream


def _unmarked(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _unmarked(v) for k, v in node.items() if k != "cache_control"}
    if isinstance(node, list):
        return [_unmarked(v) for v in node]
    return node


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The prompt as Anthropic reads it: tools, system, then every message block."""
    out: list[dict[str, Any]] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, str):
        out.append({"type": "text", "text": system})
    elif system:
        out.extend(system)
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        out.extend({**b, "role": m["role"]} for b in content)
    return out


@dataclass
class Bill:
    input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @property
    def cost(self) -> float:
        return (
            self.input_tokens
            + WRITE_PRICE * self.cache_creation_input_tokens
            + READ_PRICE * self.cache_read_input_tokens
        )


@dataclass
class BillingAnthropic:
    """A scripted Anthropic upstream that bills as Anthropic's prompt cache does."""

    turns: int
    cache: set[str] = field(default_factory=set)  # prefix digests written
    bills: list[Bill] = field(default_factory=list)
    markers: list[int] = field(default_factory=list)

    def bill(self, body: dict[str, Any]) -> Bill:
        blocks = _blocks(body)
        sizes: list[int] = []
        digests: list[str] = []
        h = hashlib.sha256()
        for b in blocks:
            raw = json.dumps(_unmarked(b), sort_keys=True)
            sizes.append(max(1, len(raw) // 4))
            h.update(raw.encode())
            digests.append(h.copy().hexdigest())
        prefix = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        marks = [i for i, b in enumerate(blocks) if "cache_control" in b]
        self.markers.append(len(marks))
        hit = -1  # the end of the longest prefix read from the cache
        for m in marks:
            for i in range(m, max(-1, m - LOOKBACK - 1), -1):
                if digests[i] in self.cache:
                    hit = max(hit, i)
                    break
        written = -1
        for m in marks:
            if prefix[m] >= MIN_CACHEABLE:
                self.cache.add(digests[m])
                written = max(written, m)
        read = prefix[hit] if hit >= 0 else 0
        created = prefix[written] - read if written > hit else 0
        return Bill(
            input_tokens=prefix[-1] - read - created,
            cache_creation_input_tokens=created,
            cache_read_input_tokens=read,
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = json.loads(await read_body(receive))
        bill = self.bill(body)
        self.bills.append(bill)
        n = len(self.bills)
        content: list[dict[str, Any]]
        if n < self.turns:
            name = TOOL_NAMES[n % len(TOOL_NAMES)]
            args = {"path": f"src/module_{n}"}
            content = [{"type": "tool_use", "id": f"toolu_{n:03d}", "name": name, "input": args}]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": "All tests pass."}], "end_turn"
        answer = {
            "id": f"msg_{n:03d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {**bill.__dict__, "output_tokens": 20},
        }
        data = json.dumps(answer).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})


# ------------------------------------------------------------------- the clients


def _tools(chat: bool) -> list[dict[str, Any]]:
    out = []
    for name in TOOL_NAMES:
        fn = {
            "name": name,
            "description": f"{name}: operate on the workspace. " * 6,
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        }
        out.append({"type": "function", "function": fn} if chat else {"type": "function", **fn})
    return out


async def responses_loop(client: openai.AsyncOpenAI, turns: int) -> list[int]:
    items: list[Any] = [
        {"role": "developer", "content": DEVELOPER_PROMPT},
        {"role": "user", "content": "Rename handler to serve everywhere and run the tests."},
    ]
    cached: list[int] = []
    for _ in range(turns):
        r = await client.responses.create(
            model="claude-bench", input=items, tools=_tools(False), store=False
        )
        assert r.usage is not None
        cached.append(r.usage.input_tokens_details.cached_tokens)
        for item in r.output:
            if item.type == "function_call":
                items.append(
                    {
                        "type": "function_call",
                        "call_id": item.call_id,
                        "name": item.name,
                        "arguments": item.arguments,
                    }
                )
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": item.call_id,
                        "output": tool_output(len(cached)),
                    }
                )
    return cached


async def chat_loop(client: openai.AsyncOpenAI, turns: int) -> list[int]:
    messages: list[Any] = [
        {"role": "system", "content": DEVELOPER_PROMPT},
        {"role": "user", "content": "Rename handler to serve everywhere and run the tests."},
    ]
    cached: list[int] = []
    for _ in range(turns):
        r = await client.chat.completions.create(
            model="claude-bench", messages=messages, tools=_tools(True)
        )
        assert r.usage is not None and r.usage.prompt_tokens_details is not None
        cached.append(r.usage.prompt_tokens_details.cached_tokens or 0)
        msg = r.choices[0].message
        calls = [
            {
                "id": t.id,
                "type": "function",
                "function": {"name": t.function.name, "arguments": t.function.arguments},
            }
            for t in msg.tool_calls or []
            if t.type == "function"
        ]
        if calls:
            messages.append({"role": "assistant", "content": msg.content, "tool_calls": calls})
            for call in calls:
                out = tool_output(len(cached))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": out})
    return cached


async def run(
    client_protocol: str, breakpoints: bool, turns: int
) -> tuple[BillingAnthropic, list[int]]:
    upstream = BillingAnthropic(turns)
    app = ProxaiMiddleware(
        upstream,
        upstream=Upstream.inner_app("anthropic_messages", cache_breakpoints=breakpoints),
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as http:
        client = openai.AsyncOpenAI(
            base_url="http://proxy/v1", api_key="sk-bench", http_client=http, max_retries=0
        )
        loop = responses_loop if client_protocol == "responses" else chat_loop
        cached = await loop(client, turns)
    return upstream, cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12)
    args = parser.parse_args()
    print(
        f"{args.turns}-turn agent loop, OpenAI client -> proxy -> Anthropic (billing as its "
        "prompt cache does); tokens summed over the loop"
    )
    print(
        "| client | breakpoints | input (1x) | cache writes (1.25x) | cache reads (0.1x) "
        "| input cost, base tokens | client saw cached_tokens | breakpoints per request |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for client in ("responses", "chat"):
        costs = {}
        for on in (False, True):
            up, cached = asyncio.run(run(client, on, args.turns))
            total = Bill(
                sum(b.input_tokens for b in up.bills),
                sum(b.cache_creation_input_tokens for b in up.bills),
                sum(b.cache_read_input_tokens for b in up.bills),
            )
            assert sum(cached) == total.cache_read_input_tokens, (cached, total)
            costs[on] = total.cost
            print(
                f"| {client} | {'on' if on else 'off'} | {total.input_tokens:,} "
                f"| {total.cache_creation_input_tokens:,} | {total.cache_read_input_tokens:,} "
                f"| {total.cost:,.0f} | {sum(cached):,} | {min(up.markers)}-{max(up.markers)} |"
            )
        print(f"| {client} | | | | | **{costs[True] / costs[False]:.2f}x** of off | | |")


if __name__ == "__main__":
    main()
