"""A scripted model for driving the real CLIs' web search through the middleware.

``SearchingModel`` speaks ONE protocol (it is the middleware's upstream) and plays
every part a search takes, recognised from the request it gets:

- a request that offers the provider's own hosted search (the upstream codec decodes
  ``web_search``: an Anthropic ``web_search_*`` tool, a Responses ``web_search`` tool,
  Gemini ``googleSearch``) is answered the way that provider answers a search, with
  the bytes of ``search_answers`` (streamed or not): the searched query, its pages and
  a text citing the first page;
- a Chat request offering the proxy's search function (``web_search``: the proxy runs
  the search) calls it once with ``search_answers.QUERY``, then, given the numbered
  results, answers citing ``[1]`` (``PROXY_ANSWER``);
- a conversation with the CLI's own tools makes the calls of ``steps`` one per turn
  (e.g. Claude Code's ``ToolSearch`` then ``WebSearch``; Gemini CLI's
  ``google_web_search``), then answers ``FINAL_PREFIX`` + the last tool output;
- anything else (titles, side requests) gets plain text.

Every exchange is kept, as ``ScriptedModel`` keeps them, for the failure transcript."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from proxai_asgi import canonical as c
from proxai_asgi.search import SearchResult
from tests.helpers import search_answers as sa
from tests.helpers.scripted_model import CALL_ID_PREFIX, FINAL_PREFIX, ScriptedModel

SEARCH_CALL_PREFIX = "call_proxaisearch"
PROXY_FUNCTIONS = ("web_search", "proxy_web_search")  # the proxy's search, as offered
# What the proxy's test backend finds, and what the model says of it.
PROXY_HITS = [
    SearchResult(url, title, sa.PAGE_QUOTE if n == 0 else "More about otters.")
    for n, (url, title) in enumerate(sa.PAGES)
]
PROXY_ANSWER = f"Sea otters {sa.CITED} [1]."


def _text_of(parts: list[c.Part]) -> str:
    out: list[str] = []
    for p in parts:
        if isinstance(p, c.Text):
            out.append(p.text)
        elif isinstance(p, c.ToolResult):
            out.append(_text_of(p.content))
    return "\n".join(out)


@dataclass
class SearchingModel(ScriptedModel):
    command: str = ""
    # The CLI's tool calls (name, arguments), one per turn, before the final answer.
    steps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    searches: int = 0  # hosted searches answered (raw provider bytes)
    proxy_searches: int = 0  # calls of the proxy's search function made

    def raw_answer(self, request: c.Request) -> tuple[bytes, bytes] | None:
        if request.web_search is None:
            return None
        plain, streamed = sa.ANSWERS[self.protocol]
        self.searches += 1
        return plain(), streamed()

    def answer(self, request: c.Request, n: int) -> c.Response:
        results = [
            p for m in request.messages for p in m.content if isinstance(p, c.ToolResult)
        ]
        proxy_fn = next(
            (t for t in request.tools if t.kind == "function" and t.name in PROXY_FUNCTIONS), None
        )
        content: list[c.Part]
        stop: c.StopReason = "end_turn"
        if proxy_fn is not None:
            searched = [r for r in results if r.call_id.startswith(SEARCH_CALL_PREFIX)]
            if not searched:
                self.proxy_searches += 1
                args = json.dumps({"query": sa.QUERY})
                call_id = f"{SEARCH_CALL_PREFIX}{n:04d}"
                call = c.ToolCall(id=call_id, name=proxy_fn.name, arguments=args)
                return self._response(request, n, [call], "tool_use")
            if "[1]" not in _text_of(searched[-1].content):
                self.problems.append(f"the proxy's search results: {searched[-1]!r}")
            return self._response(request, n, [c.Text(text=PROXY_ANSWER)], "end_turn")
        ours = [r for r in results if r.call_id.startswith(CALL_ID_PREFIX)]
        tools = {t.name for t in request.tools}
        step = len(ours)
        if step < len(self.steps) and request.tools:
            name, args = self.steps[step]
            if name not in tools:
                self.problems.append(f"step {step}: no tool {name!r} in {sorted(tools)}")
                content = [c.Text(text="Scripted answer.")]
            else:
                call_id = f"{CALL_ID_PREFIX}{n:04d}"
                content = [c.ToolCall(id=call_id, name=name, arguments=json.dumps(args))]
                stop = "tool_use"
        elif ours:
            content = [c.Text(text=FINAL_PREFIX + _text_of(ours[-1].content).strip())]
        else:
            content = [c.Text(text="Scripted answer.")]
        return self._response(request, n, content, stop)

    def _response(
        self, request: c.Request, n: int, content: list[c.Part], stop: c.StopReason
    ) -> c.Response:
        return c.Response(
            id=f"scripted{n:04d}",
            model=request.model,
            content=content,
            stop_reason=stop,
            usage=c.Usage(input_tokens=100, output_tokens=10),
        )

    def upstream_bodies(self) -> list[dict[str, Any]]:
        """What the model received, as JSON."""
        return [json.loads(x.request) for x in self.exchanges if x.request]
