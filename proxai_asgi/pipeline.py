"""The translation between two codecs, sans-IO: the one pipeline production runs and
the tests and benches call.

``prepare`` turns a client body into the upstream body and keeps what the answer's
side needs; ``StreamTranslator`` turns upstream stream bytes into client stream bytes
(``feed``/``close``, what it learned on the way); ``translate_response`` and
``StreamCollector`` do the same for a client that did not ask for a stream. Nothing
here awaits, reads a socket or knows which protocols are composed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import msgspec

from . import canonical as c
from . import checks, custom_tools
from .codec import Codec, StreamEncoder, fold, unfold
from .errors import ProxyError, TranslationReport
from .sse import SSEDecoder, SSEEvent

if TYPE_CHECKING:
    from .routing import Upstream

logger = logging.getLogger("proxai_asgi")

# Event types as module globals: compared per event, on every token.
_DELTA, _START, _STOP = c.BlockDelta, c.BlockStart, c.BlockStop
_MESSAGE_START, _FINISH, _ERROR = c.MessageStart, c.Finish, c.StreamError

# What a client's stream encoder was given, in order (``routing.continuation.Sent``):
# each event, or a run of text deltas of one block given in one go (``_runs``).
Logged = c.StreamEvent | tuple[int, list[str]]

__all__ = [
    "Logged",
    "StreamCollector",
    "StreamTranslator",
    "Translation",
    "answer",
    "answering",
    "prepare",
    "translate_response",
]


class Translation(msgspec.Struct):
    """One prepared request: the upstream body, and what answering it needs. (A
    Struct: made on every request, in a third of the time of a class's ``__init__``.)"""

    client: Codec
    target: Codec
    request: c.Request  # the canonical request, as the client's encoders see it
    body: bytes  # what goes upstream
    dropped: list[str]  # fields the upstream cannot express, reported to the client
    wrapped: frozenset[str]  # custom tools sent as functions, unwrapped on the way back
    # The canonical request the upstream got, when it is not ``request`` (``offer``).
    upstream: c.Request | None = None


def prepare(
    client: Codec,
    target: Codec,
    body: bytes,
    upstream: Upstream,
    *,
    model: str | None = None,
    stream: bool | None = None,
    offer: Callable[[c.Request], c.Request] | None = None,
) -> Translation:
    """A client request body as ``target``'s upstream request.

    ``model`` and ``stream`` override the body's (a routed ``model_rewrite``, or what a
    path-addressed client's URL says). ``offer`` gives the request the upstream
    gets when it is not the client's (the proxy's search offered as a function).
    Raises ``ProxyError`` for a request the client's provider would reject or the
    upstream cannot honour.
    """
    report = TranslationReport(upstream.lossy)
    request = client.decode_request(body, report)
    checks.check_request(request, lossy=upstream.lossy, settled=report.settled)
    if model is not None:
        request.model = model
    if stream is not None:
        request.stream = stream
    if request.web_search is not None:
        request.search_results_last = target.search_results_last
    wrapped: frozenset[str] = frozenset()
    if client.wraps_custom_tools and not target.takes_custom_tools(upstream):
        wrapped = custom_tools.wrap(request)
    sent = offer(request) if offer is not None else request
    out = target.encode_request(sent, report, upstream)
    if report.dropped:
        logger.debug("dropped fields %s (%s -> %s)", report.dropped, client.name, target.name)
    upstream_request = sent if sent is not request else None
    return Translation(client, target, request, out, report.dropped, wrapped, upstream_request)


def answering(
    client: Codec, target: Codec, request: c.Request, wrapped: frozenset[str] = frozenset()
) -> Translation:
    """The answer side of a translation whose upstream request was made elsewhere
    (a test feeding recorded upstream answers, a bench)."""
    return Translation(client, target, request, b"", [], wrapped)


# ----------------------------------------------------------------- whole answers


def answer(translation: Translation, response: c.Response) -> bytes:
    """A canonical answer as the client's JSON body."""
    if translation.wrapped:
        custom_tools.unwrap_response(response, translation.wrapped)
    return translation.client.encode_response(response, translation.request)


def translate_response(translation: Translation, body: bytes) -> tuple[bytes, c.Response]:
    """An upstream JSON answer as the client's JSON body (and the canonical answer)."""
    response = translation.target.decode_response(body)
    return answer(translation, response), response


class StreamCollector:
    """An upstream stream folded into one answer, for a client that asked for none."""

    __slots__ = ("_decoder", "_events", "_sse")

    def __init__(self, translation: Translation) -> None:
        self._sse = SSEDecoder()
        self._decoder = translation.target.stream_decoder()
        self._events: list[c.StreamEvent] = []

    def feed(self, data: bytes) -> None:
        feed = self._decoder.feed
        for e in self._sse.decode(data):
            self._events.extend(feed(e))

    def close(self) -> c.Response:
        """The folded answer; ``ProxyError`` when the stream failed or never finished."""
        for e in self._sse.flush():
            self._events.extend(self._decoder.feed(e))
        self._events.extend(self._decoder.close())
        return fold(self._events)


# ----------------------------------------------------------------------- streams


class StreamTranslator:
    """Upstream stream bytes in, client stream bytes out, event by event.

    ``feed`` never raises: a failure (the upstream's error event, a stream the
    upstream codec cannot read, a bug) ends the client's stream with its protocol's
    terminal error and sets ``done``. After ``done`` further input is ignored. What it
    learned on the way: ``model``, ``usage``, the ``error`` that cut it short, and
    whether a tool call is half sent (``tool_open``, for the stall watchdog).

    ``sent`` (a ``routing.continuation.Sent``'s ``log``): every event given to the
    client's encoder is appended to it, and a failure (the upstream's error event, a
    stream that ended early or could not be read) is held back instead of sent:
    ``done`` and ``held`` are set, and the caller either finishes the answer with a
    continuation (``encoder`` is the client's) or ends it with ``fail``.
    """

    __slots__ = (
        "_decoder",
        "_encoder",
        "_log",
        "_open_tools",
        "_sse",
        "_unwrap",
        "done",
        "error",
        "held",
        "held_event",
        "model",
        "usage",
    )

    def __init__(self, translation: Translation, sent: list[Logged] | None = None) -> None:
        self._sse = SSEDecoder()
        self._decoder = translation.target.stream_decoder()
        self._encoder: StreamEncoder = translation.client.stream_encoder(translation.request)
        wrapped = translation.wrapped
        self._unwrap = custom_tools.StreamUnwrapper(wrapped) if wrapped else None
        self._open_tools: set[int] = set()
        self._log = sent
        self.held: ProxyError | None = None  # the failure held back (with ``sent``)
        self.held_event: c.StreamError | None = None  # ...when it was the upstream's own
        self.done = False
        # What ended the stream on this side: an upstream stream that could not be read,
        # a stall, a bug (an error the upstream sent in its stream is just its end).
        self.error: ProxyError | None = None
        self.model: str | None = None
        self.usage: c.Usage | None = None

    @property
    def tool_open(self) -> bool:
        return bool(self._open_tools)

    @property
    def encoder(self) -> StreamEncoder:
        """The client's stream encoder (a continuation goes on through it)."""
        return self._encoder

    def feed(self, data: bytes) -> bytes:
        if self.done:
            return b""
        out = bytearray()
        try:
            events = self._sse.decode(data)
            if len(events) > 1 and self._unwrap is None:  # (one event: nothing to gain)
                self._runs(events, out)
            else:
                feed = self._decoder.feed
                for e in events:
                    if self._emit(feed(e), out):
                        break
        except Exception as exc:
            out += self._failure(exc)
        return bytes(out)

    def close(self) -> bytes:
        """The end of the upstream body: what is still held, or the terminal error of
        a stream that ended before its terminal event."""
        if self.done:
            return b""
        out = bytearray()
        try:
            for e in self._sse.flush():
                if self._emit(self._decoder.feed(e), out):
                    return bytes(out)
            self._emit(self._decoder.close(), out)
        except Exception as exc:
            out += self._failure(exc)
        return bytes(out)

    def whole(self, response: c.Response) -> bytes:
        """An upstream that answered a stream request in one piece, as the stream."""
        out = bytearray()
        try:
            self._emit(unfold(response), out)
        except Exception as exc:
            out += self._failure(exc)
        return bytes(out)

    def fail(self, error: ProxyError) -> bytes:
        """End the stream with ``error`` (a stall, a broken connection; with ``sent``,
        also after a failure was held back)."""
        if self.done and self.held is None:
            return b""
        self.done = True
        self.held = None
        return self._error_bytes(error)

    # ------------------------------------------------------------------ inside

    def _runs(self, events: list[SSEEvent], out: bytearray) -> None:
        """A read's events: each run of text deltas in one go (``delta_runs``), the
        frame that ends it through ``feed``. After an attempt that took nothing (other
        deltas: reasoning, tool arguments), the next waits for a frame that was not
        one plain delta (a block boundary), so such frames are not offered twice."""
        run = self._decoder.delta_run
        deltas = self._encoder.encode_deltas
        feed = self._decoder.feed
        i, n = 0, len(events)
        trying = True
        while i < n:
            end = i
            if trying:
                end, index, texts = run(events, i)
                if texts:
                    out += deltas(index, texts)
                    if self._log is not None:
                        self._log.append((index, texts))
                if end == n:
                    return
                trying = end > i
            emitted = feed(events[end])
            if self._emit(emitted, out):
                return
            if not trying:
                trying = len(emitted) != 1 or type(emitted[0]) is not _DELTA
            i = end + 1

    def _emit(self, events: list[c.StreamEvent], out: bytearray) -> bool:
        encode = self._encoder.encode
        unwrap = self._unwrap
        log = self._log
        for ev in events:
            kind = type(ev)
            if kind is _DELTA and unwrap is None:  # the hot path: encode (and note)
                out += encode(ev)
                if log is not None:
                    log.append(ev)
                continue
            if kind is _ERROR and log is not None:
                err = self.held_event = cast(c.StreamError, ev)
                return self._hold(ProxyError(err.status, err.message, kind=err.kind))  # type: ignore[arg-type]
            if kind is _START and cast(c.BlockStart, ev).kind == "tool_call":
                self._open_tools.add(cast(c.BlockStart, ev).index)
            elif kind is _STOP:
                self._open_tools.discard(cast(c.BlockStop, ev).index)
            if unwrap is None:
                out += encode(ev)
                if log is not None:
                    log.append(ev)
            else:
                for e in unwrap.feed(ev):
                    out += encode(e)
                    if log is not None:
                        log.append(e)
            if kind is _MESSAGE_START:
                start = cast(c.MessageStart, ev)
                self.model = start.model
                # the prompt's figures, known early: what a cut answer used, at least
                self.usage = start.usage
            elif kind is _FINISH:
                self.usage = cast(c.Finish, ev).usage
                self.done = True
                return True
            elif kind is _ERROR:
                self.done = True
                return True
        return False

    def _hold(self, error: ProxyError) -> bool:
        self.done = True
        self.held = error
        return True

    def _failure(self, exc: Exception) -> bytes:
        self.done = True
        if isinstance(exc, ProxyError):
            if self._log is not None:
                self.error = exc
                self._hold(exc)
                return b""
            return self._error_bytes(exc)
        logger.exception("stream translation failed", exc_info=exc)
        return self._error_bytes(ProxyError(500, "internal error in the proxy", kind="api_error"))

    def _error_bytes(self, error: ProxyError) -> bytes:
        self.error = error
        ev = c.StreamError(status=error.status, kind=error.kind, message=error.message)
        if self._log is not None:
            self._log.append(ev)
        return self._encoder.encode(ev)
