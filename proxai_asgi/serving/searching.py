"""A web search the proxy runs itself, for an upstream that has none.

The client offered its provider's hosted search; the routed upstream cannot run it
(its protocol has none, or ``proxy_search`` says the proxy searches). The search is
offered to the model as a function (``search.offer``); each time the model's answer
calls it, the proxy searches (``Searcher``: bounded in time and number), gives the
model the numbered results and asks again, until it answers without searching. The
client sees one answer, as its own provider would have sent it: each search a
``ServerTool`` where it happened, the text with citations of the sources it cites,
the usage of every round summed (``search.rounds``). A client tool called beside a
search ends the answer as usual. Streamed and not: a stream's rounds are spliced into
one stream; an answer is held back until its first content or search, so a failure
before it goes to the next target unseen (``attempts``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec

from .. import canonical as c
from .. import custom_tools, pipeline
from ..codec import Codec, PathCall, fold, unfold
from ..errors import ProxyError, TranslationReport
from ..routing.failures import classify_status
from ..search import offer
from ..search.rounds import Rounds, history_sources
from ..sse import SSEDecoder
from ..transport.pumping import pump
from .exchange import SSE_HEADERS, cost_headers, is_content
from .failover import Failed

if TYPE_CHECKING:
    from ..routing import Upstream
    from ..routing.plan import Target
    from ..search.backend import Searcher
    from ..transport.upstream import RawHeaders, UpstreamResponse
    from .failover import Race

logger = logging.getLogger("proxai_asgi")

MAX_ERROR_BODY = 1024 * 1024
MAX_JSON_BODY = 64 * 1024 * 1024


class Offer:
    """``pipeline.prepare``'s ``offer``: decides, on the decoded request, whether the
    proxy searches for it, and if so gives the request the upstream gets."""

    __slots__ = ("_proxy", "name", "searcher", "sources", "web_search")

    def __init__(self, searcher: Searcher, target: Codec, up: Upstream) -> None:
        self.searcher = searcher
        self._proxy = not target.hosts_web_search(up)
        self.web_search: c.WebSearch | None = None  # set: the proxy searches
        self.name = offer.TOOL_NAME
        self.sources: list[c.SearchHit] = []

    def __call__(self, request: c.Request) -> c.Request:
        if not self._proxy:
            return request
        ws = offer.web_search_of(request)
        if ws is None:
            return request
        self.web_search = ws
        self.name = offer.tool_name(request)
        self.sources = history_sources(request.messages)
        return offer.upstream_request(request, self.name, ws)


def may_search(body: bytes) -> bool:
    """A same-protocol body that may offer a hosted search (then translated, so the
    proxy can run it): a cheap look at the bytes, a false positive only translates."""
    return b"web_search" in body or b"oogle_search" in body or b"oogleSearch" in body


class _Client:
    """The client's side of the answer: a stream held back until its first content
    (then sent as it comes), or the events folded into one answer at the end."""

    def __init__(
        self,
        race: Race,
        target: Target,
        translation: pipeline.Translation,
        answer: Answer,
    ) -> None:
        self.race = race
        self.answer = answer
        self.ex = race.ex
        self.target = target
        self.translation = translation
        self.stream = translation.request.stream
        self.encoder = translation.client.stream_encoder(translation.request)
        self.claimed = False
        self.lost = False  # another attempt answers
        self.held = bytearray()
        self.events: list[c.StreamEvent] = []
        self.headers: RawHeaders = []
        # Custom tools sent as functions (Codex's apply_patch): their calls go back
        # to the client as custom calls, as on the usual path.
        wrapped = translation.wrapped
        self.unwrap = custom_tools.StreamUnwrapper(wrapped) if wrapped else None

    async def emit(self, events: list[c.StreamEvent]) -> None:
        if not events or self.lost:
            return
        if self.unwrap is not None:
            events = [out for ev in events for out in self.unwrap.feed(ev)]
        if not self.stream:
            self.events.extend(events)
            return
        data = b"".join(map(self.encoder.encode, events))
        if self.claimed:
            if data:
                await self.ex.body(data)
            return
        self.held += data
        if any(_shown(e) for e in events):
            await self._claim()

    async def _claim(self) -> None:
        if not self.race.claim(self.target):
            self.lost = True
            return
        self.claimed = True
        ex = self.ex
        ex.upstream = self.target.upstream
        ex.dropped = self.translation.dropped
        await ex.start(200, [*SSE_HEADERS, *self.headers])
        if self.held:
            await ex.body(bytes(self.held))

    async def finish(self, fin: c.Finish, model: str) -> None:
        ex = self.ex
        if self.stream:
            await self.emit([fin])
            if not self.claimed and not self.lost:
                await self._claim()
            if self.claimed:
                await ex.body(b"", more=False)
            ex.usage, ex.response_model = fin.usage, model
            return
        response = fold([*self.events, fin])
        if not self.race.claim(self.target):
            return
        ex.upstream = self.target.upstream
        ex.dropped = self.translation.dropped
        ex.usage, ex.response_model = response.usage, response.model
        out = pipeline.answer(self.translation, response)
        await ex.json(200, out, [*self.headers, *cost_headers(ex)])

    async def fail(self, err: ProxyError) -> None:
        """A failure after the answer went out: its protocol's terminal error."""
        await self.ex.body(self.encoder.encode(_event_of(err)))
        await self.ex.body(b"", more=False)


def _shown(event: c.StreamEvent) -> bool:
    return type(event) is c.ServerTool or is_content(event)


def _event_of(err: ProxyError) -> c.StreamError:
    return c.StreamError(status=err.status, kind=err.kind, message=err.message)


Answer = Callable[[ProxyError], Callable[[], Awaitable[None]]]


async def searched(
    race: Race,
    target: Target,
    translation: pipeline.Translation,
    found: Offer,
    answer: Answer,
) -> Failed | None:
    """The answer with the proxy's searches; the failure before its first content
    (``answer`` makes what tells the client that failure, if it stays the last)."""
    up = target.upstream
    client = _Client(race, target, translation, answer)
    rounds = Rounds(found.name, found.sources)
    request = translation.upstream or translation.request
    ws = found.web_search or c.WebSearch()
    allowed = found.searcher.limit(ws.max_uses)
    body = translation.body
    used = 0
    stop: c.StopReason | None = None
    while True:
        try:
            failed = await _round(client, rounds, up, translation.target, body)
        except ProxyError as err:
            if not client.claimed:
                raise  # (``attempts.attempt``: a failure before the answer)
            await client.fail(err)
            return None
        if failed is not None or client.lost:
            return failed
        calls = rounds.searches()
        if not calls:
            break
        if used >= found.searcher.max_searches + 1:
            stop = "pause_turn"  # the model goes on searching: the client may continue
            break
        results: list[c.ToolResult] = []
        for call in calls:
            query = offer.query_of(call)
            if query is None:
                use = c.ServerToolUse(
                    id=call.id, name="web_search", input={"query": ""}, error="invalid_tool_input"
                )
            elif used >= allowed:
                use = c.ServerToolUse(
                    id=call.id, name="web_search", input={"query": query}, error="max_uses_exceeded"
                )
            else:
                use = await found.searcher.search(call.id, query)
            used += 1
            first = len(rounds.sources) + 1
            await client.emit([rounds.searched_event(use)])
            results.append(offer.result_of(use, first))
        if client.lost:
            return None
        turns = [rounds.assistant(), c.Message(role="tool", content=list(results))]
        request = msgspec.structs.replace(request, messages=[*request.messages, *turns])
        rounds.next_round()
        body = translation.target.encode_request(request, TranslationReport(lossy=True), up)
    logger.info("proxai_asgi ran %d web searches (%d with results)", used, rounds.searched)
    await client.finish(rounds.finish(stop), rounds.model)
    return None


async def _round(
    client: _Client, rounds: Rounds, up: Upstream, codec: Codec, body: bytes
) -> Failed | None:
    """One upstream answer, its events through ``rounds`` to the client."""
    ex = client.ex
    call = PathCall(model=client.target.model, stream=ex.stream)
    async with ex.open(up, body, passthrough=False, call=call) as resp:
        if not 200 <= resp.status < 300:
            data = await resp.read(MAX_ERROR_BODY)
            err = codec.decode_error(resp.status, data)
            err.headers = ex.translation_headers(resp, err)
            if client.claimed:
                raise err
            return _failed(client, resp, data, err)
        if not client.headers:
            client.headers = ex.translation_headers(resp)
        if not resp.is_event_stream:
            whole = codec.decode_response(await resp.read(MAX_JSON_BODY))
            await client.emit(rounds.feed(unfold(whole)))
            return None
        sse = SSEDecoder()
        decoder = codec.stream_decoder()

        async def feed(chunk: bytes) -> bool:
            for frame in sse.decode(chunk):
                await _events(client, rounds, decoder.feed(frame))
            return client.lost

        await pump(resp, up, feed)
        for frame in sse.flush():
            await _events(client, rounds, decoder.feed(frame))
        await _events(client, rounds, decoder.close())
    return None


async def _events(client: _Client, rounds: Rounds, events: list[c.StreamEvent]) -> None:
    for ev in events:
        if type(ev) is c.StreamError:
            raise ProxyError(ev.status, ev.message, kind=ev.kind)  # type: ignore[arg-type]
    await client.emit(rounds.feed(events))


def _failed(client: _Client, resp: UpstreamResponse, data: bytes, err: ProxyError) -> Failed:
    target = client.translation.target
    failure = classify_status(target, resp.status, resp.headers, data, time.time())
    return Failed(client.target, failure, client.answer(err))
