"""One attempt of a generation request on one target, held back until the answer's
first content so that a failure before it can go to another target unseen.

Same protocol on both sides, the answer's bytes are relayed untouched
(``passthrough.PassthroughRelay`` ends the exchange); the events before the first
content are read with the protocol's own stream decoder only to find where the
content starts (``Preamble``), then released as they came. Two protocols, the answer
goes through ``pipeline``'s translators, whose output is held the same way. Either
way an attempt returns ``Failed`` (nothing was sent) or None (it answered, or lost
the race to another attempt). A stream cut after its content started is finished by
``continuing`` where it can be.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, cast

import msgspec

from .. import canonical as c
from .. import pipeline
from ..codec import Codec, PathCall
from ..errors import ErrorKind, ProxyError
from ..protocols import get_codec, holds_search_placeholder
from ..responses_state.stored_responses import Turn
from ..routing.continuation import Sent, frames_end
from ..routing.failures import Failure, classify_exception, classify_status, classify_stream_error
from ..sse import SSEDecoder
from ..transport.pumping import pump
from ..transport.upstream import RawHeaders, UpstreamResponse, client_headers_from_upstream
from . import continuing, searching
from .exchange import SSE_HEADERS, ask_usage, cost_headers, is_content, usage_sink
from .failover import Failed, Race
from .model_rewrite import rewrite_model
from .passthrough import PassthroughRelay, relayed_usage

if TYPE_CHECKING:
    from ..routing import Upstream
    from ..routing.plan import Target
    from .exchange import Exchange

logger = logging.getLogger("proxai_asgi")

MAX_ERROR_BODY = 1024 * 1024
MAX_JSON_BODY = 64 * 1024 * 1024
# Silent this long before a cut: a stalled target (``_stalled``).
STALL = 5.0
# A relayed stream keeps its bytes up to this size, to continue it if it is cut.
MAX_KEPT_STREAM = 4 * 1024 * 1024


class Preamble:
    """A stream's events up to its first content (or its failure), decoded only to
    find that point: after it, nothing more is decoded."""

    __slots__ = ("_decoder", "_sse", "content", "error")

    def __init__(self, codec: Codec) -> None:
        self._sse = SSEDecoder()
        self._decoder = codec.stream_decoder()
        self.content = False
        self.error: c.StreamError | None = None

    def feed(self, data: bytes) -> bool:
        """True once the content started or the stream failed (``error``)."""
        try:
            for frame in self._sse.decode(data):
                for ev in self._decoder.feed(frame):
                    if is_content(ev):
                        self.content = True
                        return True
                    if isinstance(ev, c.StreamError):
                        self.error = ev
                        return True
        except ProxyError:
            # Bytes this decoder cannot follow (a stream stricter readers refuse): no
            # longer ours to judge; relayed as they came, as pass-through always is.
            self.content = True
            return True
        return False


def _stalled(up: Upstream, quiet: list[float]) -> bool:
    """The stream had gone silent (for as long as a first answer may take) before it
    broke: the target is stuck, so another one is asked to continue first."""
    return bool(quiet) and quiet[-1] >= min(STALL, up.first_content_timeout)


def _error_of(event: c.StreamError) -> ProxyError:
    return ProxyError(event.status, event.message, kind=cast(ErrorKind, event.kind))


def _event_of(error: ProxyError) -> c.StreamError:
    return c.StreamError(status=error.status, kind=error.kind, message=error.message)


def _now() -> float:
    return time.time()


async def attempt(race: Race, target: Target) -> Failed | None:
    """``target`` asked for the answer; the failure before its first content, if any."""
    ex = race.ex
    try:
        up = target.upstream
        # (an upstream the proxy searches for: a body that may search is translated;
        # a body holding our search placeholder is translated, never relayed)
        searches = up.proxy_search and searching.may_search(ex.request_body)
        if (
            up.protocol == ex.client.name
            and not isinstance(ex.turn, Turn)
            and not searches
            and not holds_search_placeholder(ex.request_body)
        ):
            return await _relay(race, target)
        return await _translate(race, target)
    except ProxyError as err:
        if ex.started:
            raise
        failure = classify_exception(err) or Failure("target", err.status, err.message)
        if err.status in (400, 404, 413, 422) and err.kind == "invalid_request":
            failure = Failure("request", err.status, err.message)
        silent = err.kind == "timeout"
        return Failed(target, failure, _answer(ex, target, err), silent)


def _answer(ex: Exchange, target: Target, err: ProxyError) -> continuing.Respond:
    async def respond() -> None:
        ex.upstream = target.upstream
        await ex.fail(err)

    return respond


def _call(ex: Exchange, target: Target) -> PathCall:
    return PathCall(model=target.model, stream=ex.stream)


# ---------------------------------------------------------------- same protocol


async def _relay(race: Race, target: Target) -> Failed | None:
    ex = race.ex
    up = target.upstream
    body = ex.request_body
    if target.model != ex.requested_model and not ex.client.model_in_path:
        body = rewrite_model(body, target.model)
    body, strip = ask_usage(ex, body)
    async with ex.open(up, body, passthrough=True, call=_call(ex, target)) as resp:
        headers = client_headers_from_upstream(resp.headers, passthrough=True)
        if not 200 <= resp.status < 300:
            data = await resp.read(MAX_ERROR_BODY)
            failure = classify_status(ex.client, resp.status, resp.headers, data, _now())
            return Failed(target, failure, _replay(ex, target, resp.status, headers, data))
        if not resp.is_event_stream:
            data = await resp.read(MAX_JSON_BODY)  # a cut body fails here, unseen
            if up.inner:  # (an HTTP transport raises on a short body by itself)
                _check_length(resp, data)
            if race.state is not None and not _is_json(data):
                raise ProxyError(502, "upstream answer is not JSON", kind="bad_gateway")
            if not race.claim(target):
                return None
            sink = usage_sink(ex)
            if sink is not None:
                sink(relayed_usage(ex.client, resp.headers, data))
                headers = [*headers, *cost_headers(ex)]
            await _replay(ex, target, resp.status, headers, data)()
            return None
        preamble = Preamble(ex.client)
        held: list[bytes] = []

        async def hold(chunk: bytes) -> bool:
            held.append(chunk)
            return preamble.feed(chunk)

        await pump(resp, up, hold)
        if preamble.error is not None:
            failure = classify_stream_error(ex.client, preamble.error)
            err = _error_of(preamble.error)
            return Failed(target, failure, _answer(ex, target, err))
        if not preamble.content:
            err = ProxyError(502, "upstream stream ended before any content", kind="bad_gateway")
            return Failed(target, Failure("target", 502, err.message), _answer(ex, target, err))
        if not race.claim(target):
            return None
        ex.upstream = up
        relay = PassthroughRelay(ex.client, ex.start, ex.body, usage_sink(ex), strip)
        await relay.start(resp.status, headers)
        kept = continuing.Kept(MAX_KEPT_STREAM)
        # Only whole frames reach the client, so that a continuation can follow the
        # last one; a frame's rest waits for the read that completes it.
        partial = b""
        # On a route with somewhere else to go, a frame that is not JSON is dropped
        # (and logged): the client could not read it, and the answer goes on after it.
        screen = race.state is not None

        async def forward(chunk: bytes) -> bool:
            nonlocal partial
            if partial:
                chunk, partial = partial + chunk, b""
            end = frames_end(chunk)
            if end < len(chunk):
                chunk, partial = chunk[:end], chunk[end:]
            if chunk and screen:
                chunk = _readable_frames(chunk, ex.client.name)
            if chunk:
                kept.add(chunk)
                await relay.chunk(chunk)
            return False

        await forward(b"".join(held))
        cut: ProxyError | None = None
        quiet: list[float] = []
        try:
            await pump(resp, up, forward, quiet=quiet)
        except ProxyError as err:
            cut = err
    # The upstream is closed: a continuation asks another (or the same) anew.
    if cut is None and partial:
        await relay.chunk(partial, last=True)  # the last frame, not ended by a blank line
        partial = b""
    if cut is None and (relay.complete() or relay.ended_by_upstream()):
        # Whole, or ended by the upstream's own error event (already relayed: the
        # client has the terminal error, which a continuation cannot take back).
        await relay.end()
        return None
    error = cut or ProxyError(502, "upstream stream ended before its end", kind="bad_gateway")
    stalled = _stalled(up, quiet)
    relay.note_usage()  # the cut answer's, billed beside its continuation's
    if not partial and await continuing.relayed(race, target, kept, error, stalled):
        await ex.body(b"", more=False)
        return None
    if cut is None:
        await relay.end()
    else:
        await relay.fail(cut)
    return None


_raw = msgspec.json.Decoder(msgspec.Raw)


def _readable_frames(chunk: bytes, protocol: str) -> bytes:
    """``chunk`` (whole frames) without the frames whose data is not JSON."""
    if chunk.startswith(b"data: ") and chunk.find(b"\n\n") == len(chunk) - 2:
        data = chunk[6:-2]  # one frame, one data line: the usual read
        if data == b"[DONE]" or _is_json(data):
            return chunk
        logger.warning("proxai_asgi dropped an unreadable %s stream frame", protocol)
        return b""
    sep = b"\r\n\r\n" if b"\r\n\r\n" in chunk else b"\n\n"
    kept: list[bytes] = []
    for frame in chunk.split(sep):
        data = b"".join(
            line[5:].lstrip(b" ") for line in frame.splitlines() if line.startswith(b"data:")
        )
        if data and data != b"[DONE]" and not _is_json(data):
            logger.warning("proxai_asgi dropped an unreadable %s stream frame", protocol)
            continue
        kept.append(frame)
    return sep.join(kept)


def _is_json(data: bytes) -> bool:
    try:
        _raw.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return False
    return True


def _check_length(resp: UpstreamResponse, data: bytes) -> None:
    """A body shorter than its ``content-length`` (a wrapped app can end one short;
    an HTTP transport raises by itself) fails the attempt."""
    for k, v in resp.headers:
        if k == b"content-length" and v.isdigit() and len(data) < int(v):
            raise ProxyError(
                502, f"upstream body ended after {len(data)} of {int(v)} bytes", kind="bad_gateway"
            )


def _replay(
    ex: Exchange, target: Target, status: int, headers: RawHeaders, data: bytes
) -> continuing.Respond:
    """The upstream's own answer (an error, a plain body) as a relay would send it."""

    async def respond() -> None:
        ex.upstream = target.upstream
        relay = PassthroughRelay(ex.client, ex.start, ex.body)
        await relay.start(status, headers)
        if data:
            await relay.chunk(data)
        await relay.end()

    return respond


# ---------------------------------------------------------------- two protocols


async def _translate(race: Race, target: Target) -> Failed | None:
    ex = race.ex
    up = target.upstream
    codec = get_codec(up.protocol)
    found = searching.Offer(ex.mw.search, codec, up)
    translation = pipeline.prepare(
        ex.client, codec, ex.request_body, up, model=target.model, stream=ex.stream, offer=found
    )
    if isinstance(ex.turn, Turn):  # a stored turn: the answer names what it continued,
        translation.request.previous_response_id = ex.turn.previous_id
        translation.request.response_id = ex.turn.response_id  # and the id it is kept under
    if found.web_search is not None:  # the proxy runs the client's web search
        return await searching.searched(
            race, target, translation, found, lambda err: _answer(ex, target, err)
        )
    async with ex.open(up, translation.body, passthrough=False, call=_call(ex, target)) as resp:
        if not 200 <= resp.status < 300:
            data = await resp.read(MAX_ERROR_BODY)
            err = codec.decode_error(resp.status, data)
            err.headers = ex.translation_headers(resp, err)
            failure = classify_status(codec, resp.status, resp.headers, data, _now())
            return Failed(target, failure, _answer(ex, target, err))
        if translation.request.stream:
            return await _stream(race, target, translation, resp)
        return await _whole(race, target, translation, resp)


async def _whole(
    race: Race, target: Target, translation: pipeline.Translation, resp: UpstreamResponse
) -> Failed | None:
    """A client that asked for one answer: the upstream's JSON, or its stream folded;
    an answer that cannot be read fails the attempt (``ProxyError``, caught above)."""
    ex = race.ex
    up = target.upstream
    if resp.is_event_stream:
        collector = pipeline.StreamCollector(translation)

        async def collect(chunk: bytes) -> bool:
            collector.feed(chunk)
            return False

        await pump(resp, up, collect)
        response = collector.close()
        out = pipeline.answer(translation, response)
    else:
        out, response = pipeline.translate_response(translation, await resp.read(MAX_JSON_BODY))
    if not race.claim(target):
        return None
    ex.upstream = up
    ex.dropped = translation.dropped
    ex.usage, ex.response_model = response.usage, response.model
    await ex.json(200, out, [*ex.translation_headers(resp), *cost_headers(ex)])
    return None


async def _stream(
    race: Race, target: Target, translation: pipeline.Translation, resp: UpstreamResponse
) -> Failed | None:
    ex = race.ex
    up = target.upstream
    sent = Sent()  # what the client's encoder was given, to continue a cut answer
    stream = pipeline.StreamTranslator(translation, sent.log)
    if not resp.is_event_stream:
        # The upstream ignored stream=true and answered in one piece: decoded before
        # the client's stream starts, so a body that is no answer fails the attempt.
        whole = translation.target.decode_response(await resp.read(MAX_JSON_BODY))
        if not race.claim(target):
            return None
        _commit(ex, target, translation)
        await ex.start(200, [*SSE_HEADERS, *ex.translation_headers(resp)])
        await ex.body(stream.whole(whole))
        ex.usage, ex.response_model = stream.usage, stream.model
        await ex.body(b"", more=False)
        return None
    held = bytearray()
    content = False

    async def hold(chunk: bytes) -> bool:
        nonlocal content
        seen = len(sent.log)
        held.extend(stream.feed(chunk))
        content = any(map(is_content, sent.log[seen:]))
        return content or stream.done

    await pump(resp, up, hold)
    if not content and not stream.done:
        held.extend(stream.close())  # the stream ended before any content
        content = any(map(is_content, sent.log))
    if not content:
        failed = stream.held_event or _event_of(
            stream.held
            or ProxyError(502, "upstream stream ended before any content", kind="bad_gateway")
        )
        failure = classify_stream_error(translation.target, failed)
        return Failed(target, failure, _answer(ex, target, _error_of(failed)))
    if not race.claim(target):
        return None
    _commit(ex, target, translation)
    await ex.start(200, [*SSE_HEADERS, *ex.translation_headers(resp)])
    if held:
        await ex.body(bytes(held))

    async def forward(chunk: bytes) -> bool:
        out = stream.feed(chunk)
        if out:
            await ex.body(out)
        return stream.done

    cut: ProxyError | None = None
    quiet: list[float] = []
    if not stream.done:
        try:
            await pump(resp, up, forward, lambda: stream.tool_open, quiet)
            tail = stream.close()
            if tail:
                await ex.body(tail)
        except ProxyError as err:  # a stall or a broken upstream connection
            cut = err
    ex.usage, ex.response_model = stream.usage, stream.model
    error = cut or stream.held
    if error is not None:
        # The upstream is closed: a continuation asks another (or the same) anew.
        finished = await continuing.translated(
            race, target, stream.encoder, sent, translation, error, _stalled(up, quiet)
        )
        if not finished:
            tail = stream.fail(error)
            if tail:
                await ex.body(tail)
    await ex.body(b"", more=False)
    return None


def _commit(ex: Exchange, target: Target, translation: pipeline.Translation) -> None:
    ex.upstream = target.upstream
    ex.dropped = translation.dropped
