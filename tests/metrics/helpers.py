"""What the metrics tests share: a scripted upstream of every protocol whose usage
block differs per protocol, the requests of each client protocol, the ledger
categories computed by hand from a provider's own usage block, and a parsed scrape."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols import get_codec
from tests.helpers.canned import codec_answer
from tests.helpers.servers import FakeUpstream, Reply, Seen

ANTHROPIC: ProtocolName = "anthropic_messages"
CHAT: ProtocolName = "openai_chat_completions"
RESPONSES: ProtocolName = "openai_responses"
GEMINI: ProtocolName = "gemini_generate_content"
PROTOCOLS: tuple[ProtocolName, ...] = (ANTHROPIC, CHAT, RESPONSES, GEMINI)
PATHS = {"/v1/messages": ANTHROPIC, "/v1/chat/completions": CHAT, "/v1/responses": RESPONSES}
CATEGORIES = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h", "reasoning")

# Each upstream protocol answers with its own usage (OpenAI semantics: input counts
# every prompt token, cached ones included), so every sum says who answered.
USAGE: dict[ProtocolName, c.Usage] = {
    ANTHROPIC: c.Usage(
        input_tokens=110, output_tokens=21, cached_tokens=40, cache_creation_tokens=30
    ),
    CHAT: c.Usage(input_tokens=220, output_tokens=33, cached_tokens=64, reasoning_tokens=7),
    RESPONSES: c.Usage(input_tokens=330, output_tokens=45, cached_tokens=128, reasoning_tokens=12),
    GEMINI: c.Usage(input_tokens=440, output_tokens=57, cached_tokens=96, reasoning_tokens=19),
}


def protocol_of(seen: Seen) -> ProtocolName:
    return GEMINI if seen.path.startswith("/v1beta/") else PATHS[seen.path]


def model_of(seen: Seen) -> str:
    if seen.path.startswith("/v1beta/"):
        return seen.path.split("/models/")[1].split(":")[0]
    return str(seen.json()["model"])


def answer(protocol: ProtocolName, model: str) -> c.Response:
    return c.Response(
        id="resp_1",
        model=model,
        content=[c.Text(text="one two three four")],
        stop_reason="end_turn",
        usage=USAGE[protocol],
    )


def ok(seen: Seen) -> Reply:
    protocol = protocol_of(seen)
    return codec_answer(protocol, answer(protocol, model_of(seen)))(seen)


def error(status: int, kind: str = "overloaded_error") -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": "refused"}}
    return Reply(status, [("content-type", "application/json")], [json.dumps(body).encode()])


def usage_block(protocol: ProtocolName) -> dict[str, Any]:
    """The usage block the fake upstream of ``protocol`` sends (its JSON answer's)."""
    codec = get_codec(protocol)
    _path, body = request(protocol, "m", stream=False)
    request_ = codec.decode_request(json.dumps(body).encode(), TranslationReport(lossy=True))
    out = json.loads(codec.encode_response(answer(protocol, "m"), request_))
    block: dict[str, Any] = out["usageMetadata" if protocol == GEMINI else "usage"]
    return block


def categories(protocol: ProtocolName) -> dict[str, int]:
    """The ledger's categories, by hand from the provider's own usage block: OpenAI and
    Gemini count cached (and written) prompt tokens inside their prompt count,
    Anthropic's ``input_tokens`` excludes both; Gemini's thoughts are outside
    ``candidatesTokenCount``, everyone else's reasoning inside the output count."""
    u = usage_block(protocol)
    if protocol == ANTHROPIC:
        write = u.get("cache_creation_input_tokens", 0)
        write_1h = u.get("cache_creation", {}).get("ephemeral_1h_input_tokens", 0)
        return {
            "input": u["input_tokens"],
            "output": u["output_tokens"],
            "cache_read": u.get("cache_read_input_tokens", 0),
            "cache_write_5m": write - write_1h,
            "cache_write_1h": write_1h,
            "reasoning": 0,
        }
    if protocol == GEMINI:
        cached = u.get("cachedContentTokenCount", 0)
        thoughts = u.get("thoughtsTokenCount", 0)
        return {
            "input": u["promptTokenCount"] - cached,
            "output": u["candidatesTokenCount"] + thoughts,
            "cache_read": cached,
            "cache_write_5m": 0,
            "cache_write_1h": 0,
            "reasoning": thoughts,
        }
    prompt, output = ("prompt_tokens", "completion_tokens") if protocol == CHAT else (
        "input_tokens",
        "output_tokens",
    )
    details = u.get(prompt + "_details", {})
    cached = details.get("cached_tokens", 0)
    written = details.get("cache_write_tokens", 0)
    return {
        "input": u[prompt] - cached - written,
        "output": u[output],
        "cache_read": cached,
        "cache_write_5m": written,
        "cache_write_1h": 0,
        "reasoning": u.get(output + "_details", {}).get("reasoning_tokens", 0),
    }


def request(client: ProtocolName, model: str, *, stream: bool) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of a one-turn request of ``client``'s protocol."""
    if client == GEMINI:
        verb = "streamGenerateContent?alt=sse" if stream else "generateContent"
        body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        return f"/v1beta/models/{model}:{verb}", body
    if client == ANTHROPIC:
        body = {"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
        path = "/v1/messages"
    elif client == CHAT:
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
        path = "/v1/chat/completions"
    else:
        body = {"model": model, "input": "hi"}
        path = "/v1/responses"
    if stream:
        body["stream"] = True
    return path, body


@dataclass
class Scrape:
    """A scrape parsed by the client library's own parser: samples by name and labels."""

    samples: list[tuple[str, dict[str, str], float]]

    @classmethod
    def parse(cls, text: str) -> Scrape:
        out = []
        for family in text_string_to_metric_families(text):
            out += [(s.name, dict(s.labels), s.value) for s in family.samples]
        return cls(out)

    def total(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels``."""
        return sum(
            v
            for n, have, v in self.samples
            if n == name and all(have.get(k) == want for k, want in labels.items())
        )

    def label_values(self) -> set[str]:
        return {v for _, labels, _ in self.samples for v in labels.values()}


Rule = Callable[[Seen], Reply | None]


class Board:
    """The wrapped app and the HTTP upstream at once: ``rule`` first, else ``ok``;
    every request it saw is kept."""

    def __init__(self, *rules: Rule) -> None:
        self.rules = list(rules)
        self.fake = FakeUpstream().push(self.reply)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.fake(scope, receive, send)

    def reply(self, seen: Seen) -> Reply:
        for rule in self.rules:
            found = rule(seen)
            if found is not None:
                return found
        return ok(seen)
