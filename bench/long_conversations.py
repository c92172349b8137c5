"""Request translation of long agent-loop conversations, against the msgspec floor.

    .venv/bin/python bench/long_conversations.py          # --sizes 14,200,1000 (KB)

Claude Code and Codex resend the whole conversation every turn, so a request's
translation cost grows with it. For bodies of about 14 KB, 200 KB and 1 MB (a system
prompt, five tools, then tool round trips: assistant text, a tool call, its output),
written in each client protocol, and for all twelve directions between the four
protocols:

- **time**: the production request path, ``proxai_asgi.pipeline.prepare`` (decode,
  checks, custom-tool wrapping where the middleware does it, encode; a Gemini client's
  model and stream taken from its URL, as the middleware passes them), median of the
  runs, against the floor
  ``msgspec.json.encode(msgspec.json.decode(body))`` of the same body, timed
  alternately with it;
- **memory**: the peak of Python allocations during one translation (tracemalloc;
  msgspec allocates through Python's allocator, so its buffers count), the input body
  itself excluded as it exists before translation starts, as a multiple of the body
  size; the floor's own peak is given alongside.

The Anthropic codec keeps bounded look-ups keyed by content (a call id's safe form, a
call's arguments and their encoded ``input``): an agent loop resends every earlier call
each turn, so in a process that served the previous turn only the new turn's calls
miss; every client decoder likewise looks its tool declarations up by their bytes
(``proxai_asgi.protocols._kit.tool_schemas``). ``--cold`` empties them before every translation, as
for a conversation the process has never seen (its first request, another worker's,
after a restart). ``--tools realistic`` sends a coding agent's ~60 KB tool set in
place of the five small tools.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxai_asgi import canonical as c  # noqa: E402
from proxai_asgi import pipeline  # noqa: E402
from proxai_asgi.codec import ProtocolName, UpstreamOptions  # noqa: E402
from proxai_asgi.errors import TranslationReport  # noqa: E402
from proxai_asgi.protocols import get_codec  # noqa: E402
from proxai_asgi.routing import Upstream  # noqa: E402

A: ProtocolName = "anthropic_messages"
C: ProtocolName = "openai_chat_completions"
R: ProtocolName = "openai_responses"
G: ProtocolName = "gemini_generate_content"
LETTER = {A: "A", C: "C", R: "R", G: "G"}
ALL = (A, C, R, G)
DIRECTIONS = [(cl, up) for cl in ALL for up in ALL if cl != up]
OPTIONS = UpstreamOptions()
# size (KB) -> tool round trips; each tool output is then sized to reach the body size
TURNS = {14: 12, 200: 60, 1000: 150}


def realistic_tools() -> list[c.Tool]:
    """A tool set the size of a coding agent's (Claude Code sends ~20 tools, Codex ~10):
    20 tools, descriptions of 0.4-4 KB, schemas of 2-9 documented properties (enums,
    arrays of objects), about 60 KB of JSON in all."""
    tools = []
    for k in range(20):
        props: dict[str, object] = {}
        for j in range(2 + k % 8):
            about = f"What argument {j} of tool {k} means, its units and its default. " * 2
            if j % 3 == 1:
                props[f"arg_{j}"] = {
                    "type": "string",
                    "enum": ["a", "b", "c"],
                    "description": about,
                }
            elif j % 3 == 2:
                item = {"type": "object", "properties": {"old": {"type": "string"}}}
                props[f"arg_{j}"] = {"type": "array", "items": item, "description": about}
            else:
                props[f"arg_{j}"] = {"type": "string", "description": about}
        schema = {
            "type": "object",
            "properties": props,
            "required": ["arg_0"],
            "additionalProperties": False,
            "$schema": "http://json-schema.org/draft-07/schema#",
        }
        about = f"Tool {k} does one thing well; usage notes, examples and caveats follow. "
        tools.append(
            c.Tool(name=f"tool_{k}", description=about * (5 + 5 * (k % 10)), parameters=schema)
        )
    return tools


def bench_tools() -> list[c.Tool]:
    """Five small tools."""
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["path"],
    }
    return [
        c.Tool(name=f"tool_{k}", description=f"Tool number {k}. " * 8, parameters=schema)
        for k in range(5)
    ]


TOOL_SETS = {"bench": bench_tools, "realistic": realistic_tools}


def conversation(turns: int, output_lines: int, tool_set: str = "bench") -> c.Request:
    tools = TOOL_SETS[tool_set]()
    messages = [c.Message(role="user", content=[c.Text(text="Refactor the module. " * 30)])]
    for turn in range(turns):
        call = f"call_{turn:04d}"
        args = json.dumps({"path": f"src/m{turn}.py", "limit": 200})
        messages.append(
            c.Message(
                role="assistant",
                content=[
                    c.Text(text=f"Step {turn}: reading the file next. " * 4),
                    c.ToolCall(id=call, name=f"tool_{turn % 5}", arguments=args),
                ],
            )
        )
        output = "".join(f"{turn}:{k}: line of code\n" for k in range(output_lines))
        messages.append(
            c.Message(
                role="tool", content=[c.ToolResult(call_id=call, content=[c.Text(text=output)])]
            )
        )
    messages.append(c.Message(role="user", content=[c.Text(text="Now run the tests.")]))
    return c.Request(
        model="bench-model",
        messages=messages,
        system=[c.Text(text="You are a careful coding agent. " * 20)],
        tools=tools,
        tool_choice=c.ToolChoice(mode="auto"),
        max_tokens=4096,
        temperature=0.2,
        stream=True,
    )


def body_of(protocol: ProtocolName, kb: int, tool_set: str = "bench") -> bytes:
    """An agent-loop body in ``protocol`` of about ``kb`` KB (at least its tools)."""
    turns = TURNS.get(kb, max(1, kb // 8))
    lines = 1
    while True:
        body = get_codec(protocol).encode_request(
            conversation(turns, lines, tool_set), TranslationReport(), OPTIONS
        )
        if len(body) >= kb * 1000 or lines > 100_000:
            return body
        lines = max(lines + 1, int(lines * kb * 1000 / len(body)))


def translator(client: ProtocolName, upstream: ProtocolName) -> Callable[[bytes], bytes]:
    """``pipeline.prepare`` as the middleware calls it (default upstream options)."""
    cl, up = get_codec(client), get_codec(upstream)
    settings = Upstream(upstream, "http://upstream.bench")
    # A path-addressed client's model and stream come from its URL.
    model, stream = ("bench-model", True) if client == G else (None, None)

    def run(body: bytes) -> bytes:
        return pipeline.prepare(cl, up, body, settings, model=model, stream=stream).body

    return run


def floor(body: bytes) -> bytes:
    return msgspec.json.encode(msgspec.json.decode(body))


def forget() -> None:
    """Empty the codecs' content-keyed look-ups (those a tree has)."""
    from proxai_asgi.protocols._kit import json_objects, tool_schemas
    from proxai_asgi.protocols.anthropic_messages import request

    request._SAFE_IDS.clear()
    json_objects.forget()
    tool_schemas.forget()


def timed(fn: Callable[[bytes], bytes], body: bytes, cold: bool = False) -> float:
    if cold:
        forget()
    t0 = time.perf_counter()
    fn(body)
    return time.perf_counter() - t0


def peak(fn: Callable[[bytes], bytes], body: bytes, cold: bool = False) -> int:
    if cold:  # measured as timed: else the look-ups the last timed call filled would hit
        forget()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn(body)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="14,200,1000", help="body sizes in KB")
    parser.add_argument("--seconds", type=float, default=1.5, help="timing budget per cell")
    parser.add_argument(
        "--cold", action="store_true", help="empty the codecs' look-ups before each translation"
    )
    parser.add_argument(
        "--tools",
        choices=sorted(TOOL_SETS),
        default="bench",
        help="five small tools, or a coding agent's ~60 KB set",
    )
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    bodies = {(p, kb): body_of(p, kb, args.tools) for p in ALL for kb in sizes}
    print(
        "| direction | body | ours | floor | ours / floor | peak memory / body "
        "| floor's peak / body |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kb in sizes:
        for client, upstream in DIRECTIONS:
            body = bodies[client, kb]
            fn = translator(client, upstream)
            fn(body)  # warm
            ours: list[float] = []
            base: list[float] = []
            deadline = time.perf_counter() + args.seconds
            while len(ours) < 5 or (time.perf_counter() < deadline and len(ours) < 2000):
                ours.append(timed(fn, body, args.cold))
                base.append(timed(floor, body))
            t_ours, t_floor = statistics.median(ours), statistics.median(base)
            name = f"{LETTER[client]}->{LETTER[upstream]}"
            print(
                f"| {name} | {len(body) / 1000:,.0f} KB | {t_ours * 1e6:,.0f} µs "
                f"| {t_floor * 1e6:,.0f} µs | {t_ours / t_floor:.2f}x "
                f"| {peak(fn, body, args.cold) / len(body):.2f}x "
                f"| {peak(floor, body) / len(body):.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
