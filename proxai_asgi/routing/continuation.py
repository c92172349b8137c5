"""Finishing an answer whose upstream stream was cut after content reached the client,
sans-IO: the client sees one whole answer.

``Sent`` is what the client has (from the events its stream encoder was given, or from
the bytes relayed in pass-through); ``continuable`` says whether it can be finished;
``continuation_request`` / ``continuation_body`` ask a target to finish it (``prefill``:
the text sent as a final assistant turn, continued by the upstream; ``restart``: the
request again, only what extends the text sent released); ``Splice`` turns the
continuation's upstream stream into the rest of the client's stream, through the
client's own encoder state (``resume_encoder`` rebuilds that state in pass-through).
Which upstreams can continue how: each codec's ``continues``, overridden by
``UpstreamOptions.continuation``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, cast

import msgspec

from .. import canonical as c
from .. import custom_tools
from ..codec import Codec, StreamEncoder
from ..errors import ProxyError, TranslationReport
from ..pipeline import Logged, Translation
from ..sse import SSEDecoder

if TYPE_CHECKING:
    from ..settings import Continuation, UpstreamOptions

Mode = Literal["prefill", "restart"]

__all__ = [
    "Mode",
    "Sent",
    "SentBlock",
    "Splice",
    "continuable",
    "continuation_body",
    "continuation_mode",
    "continuation_request",
    "frames_end",
    "resume_encoder",
]


@dataclass
class SentBlock:
    index: int  # the canonical index the client's encoder knows it by
    kind: c.BlockKind
    fragments: list[str] = field(default_factory=list)
    stopped: bool = False

    @property
    def text(self) -> str:
        return "".join(self.fragments)


class Sent:
    """What the client's stream has been given.

    The healthy path only appends to ``log`` (``StreamTranslator`` does, one append per
    event or run of deltas); the view (``blocks``, ``text``...) is built when read,
    after a cut, and rebuilt if the log grew since.
    """

    __slots__ = ("_seen", "_view", "log")

    def __init__(self) -> None:
        self.log: list[Logged] = []
        self._seen = -1
        self._view: _View | None = None

    @classmethod
    def from_relayed(cls, codec: Codec, request: c.Request, relayed: bytes) -> Sent:
        """Pass-through: what the client has from the upstream bytes relayed to it
        unchanged (``codec`` is both sides' protocol). A failure the bytes end with is
        not part of it (the lead holds such events back)."""
        sent = cls()
        sent.log.extend(_decoded(codec, relayed))
        return sent

    # ---- the view

    def _current(self) -> _View:
        if self._view is None or self._seen != len(self.log):
            self._view = _View(self.log)
            self._seen = len(self.log)
        return self._view

    @property
    def id(self) -> str:
        return self._current().id

    @property
    def model(self) -> str:
        return self._current().model

    @property
    def blocks(self) -> list[SentBlock]:
        return list(self._current().blocks.values())

    @property
    def finished(self) -> bool:
        """The client's stream reached its terminal event (nothing to continue)."""
        return self._current().finished

    @property
    def text(self) -> str:
        """The answer text the client has, every text block joined."""
        return "".join(b.text for b in self._current().blocks.values() if b.kind == "text")

    @property
    def open_text(self) -> int | None:
        """The text block still open on the client's side (a continuation extends it)."""
        view = self._current()
        last = next(reversed(view.blocks.values()), None)
        if last is not None and last.kind == "text" and not last.stopped:
            return last.index
        return None

    @property
    def next_index(self) -> int:
        """A canonical index no block of the client's stream has used."""
        return max(self._current().blocks, default=-1) + 1

    def note(self, event: c.StreamEvent) -> None:
        self.log.append(event)


class _View:
    __slots__ = ("blocks", "finished", "id", "model")

    def __init__(self, log: list[Logged]) -> None:
        self.id = ""
        self.model = ""
        self.finished = False
        self.blocks: dict[int, SentBlock] = {}
        blocks = self.blocks
        for ev in log:
            if type(ev) is tuple:
                index, texts = ev
                b = blocks.get(index)
                if b is not None:
                    b.fragments += texts
            elif type(ev) is c.BlockDelta:
                b = blocks.get(ev.index)
                if b is not None:
                    b.fragments.append(ev.text)
            elif type(ev) is c.BlockStart:
                blocks.setdefault(ev.index, SentBlock(ev.index, ev.kind))
            elif type(ev) is c.BlockStop:
                if ev.index in blocks:
                    blocks[ev.index].stopped = True
            elif type(ev) is c.MessageStart:
                self.id, self.model = ev.id, ev.model
            elif type(ev) is c.Finish or type(ev) is c.StreamError:
                self.finished = True


def _decoded(codec: Codec, data: bytes) -> list[c.StreamEvent]:
    """A stream's bytes as canonical events, without its terminal failure (a stream cut
    short is what is being decoded, so the decoder's close is not asked)."""
    decoder = codec.stream_decoder()
    out: list[c.StreamEvent] = []
    try:
        for e in SSEDecoder().decode(data):
            out.extend(decoder.feed(e))
    except ProxyError:
        pass  # bytes the codec cannot read end what the client is known to have
    return [e for e in out if type(e) is not c.StreamError]


def continuable(sent: Sent) -> bool:
    """The answer can be finished by a continuation: it has not finished, and holds
    only text blocks and finished reasoning blocks (the client's thinking is kept and
    the continuation's own is not shown). A tool call or refusal started, or a
    reasoning block half sent, cannot be continued: a tool call's arguments and a
    reasoning block's signature are one upstream's, not resumable elsewhere."""
    if sent.finished:
        return False
    for b in sent.blocks:
        if b.kind == "text":
            continue
        if b.kind in ("reasoning", "redacted_reasoning") and b.stopped:
            continue
        return False
    return True


def continuation_mode(target: Codec, options: UpstreamOptions) -> Continuation:
    """How ``target`` is asked to finish an answer: the upstream's setting, else what
    its protocol's upstreams generally accept (``Codec.continues``)."""
    return options.continuation or target.continues


def continuation_request(request: c.Request, sent: Sent, mode: Mode) -> c.Request:
    """The request that finishes the answer ``sent`` holds.

    ``restart``: ``request`` itself. ``prefill``: ``request`` plus a final assistant
    turn holding the text sent (joined to the client's own final assistant turn when
    it prefilled one), trailing whitespace left out (Anthropic rejects a prefill that
    ends with it; ``Splice`` drops it from the continuation when it comes again). No
    text sent yet: the request itself.
    """
    text = sent.text.rstrip()
    if mode == "restart" or not text:
        return request
    messages = list(request.messages)
    part = c.Text(text=text)
    if messages and messages[-1].role == "assistant":
        last = messages[-1]
        messages[-1] = c.Message(role="assistant", content=[*last.content, part])
    else:
        messages.append(c.Message(role="assistant", content=[part]))
    return msgspec.structs.replace(request, messages=messages, stream=True)


def continuation_body(
    translation: Translation, sent: Sent, target: Codec, upstream: UpstreamOptions, mode: Mode
) -> tuple[bytes, Translation]:
    """The continuation's upstream body for ``target``, and the translation a
    ``Splice`` reads its answer with (``translation``: the cut exchange's; its
    ``request`` is what the client's encoder was made with, and stays so)."""
    request = continuation_request(translation.request, sent, mode)
    report = TranslationReport(upstream.lossy)
    wrapped = translation.wrapped  # tools already wrapped in the request stay so
    if (
        not wrapped
        and translation.client.wraps_custom_tools
        and not target.takes_custom_tools(upstream)
    ):
        request = msgspec.structs.replace(request, tools=list(request.tools))
        wrapped = custom_tools.wrap(request)
    body = target.encode_request(request, report, upstream)
    return body, Translation(
        translation.client, target, translation.request, body, report.dropped, wrapped
    )


def frames_end(relayed: bytes) -> int:
    """How much of ``relayed`` is complete frames. Pass-through that may be continued
    relays only those (holding the rest until its frame is complete): a client left
    with half a frame could not read the continuation that follows it."""
    lf, crlf = relayed.rfind(b"\n\n"), relayed.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)


def resume_encoder(codec: Codec, request: c.Request, relayed: bytes) -> StreamEncoder:
    """Pass-through: the client's stream encoder in the state the relayed bytes left
    the client in (``codec`` speaks both sides), so what it writes next continues them:
    the relayed events replayed into a fresh encoder, its output discarded, then the
    codec's ``resume`` told what the bytes said that the events do not (sequence
    numbers, item ids)."""
    encoder = codec.stream_encoder(request)
    for ev in _decoded(codec, relayed):
        encoder.encode(ev)
    codec.resume(encoder, relayed)
    return encoder


# ------------------------------------------------------------------------- the splice

_SKIP = -1  # a continuation block the client never sees (its own reasoning)


class Splice:
    """A continuation's upstream stream bytes in, the rest of the client's stream out.

    The continuation's message start is swallowed; its first text block goes on as the
    client's open text block (or as a new one after the client's last); its reasoning
    is not shown; its other blocks get indices after the client's. ``restart``: text is
    released only past the ``len(sent.text)`` characters already sent, which must
    equal them (compared as deltas come, across the continuation's text blocks until
    then); a mismatch, another block first, or an answer that ends before reaching
    them (``diverged``) ends the client's stream with ``error``, the original failure.
    Finish ends the client's stream normally, with the continuation's usage.

    A failure of the continuation itself is held back (``done``, and ``failure`` says
    what it was): the caller starts another ``Splice`` (``sent`` has grown by what
    this one released) or ends the client's stream with ``fail()``.
    """

    __slots__ = (
        "_decoder",
        "_encoder",
        "_error",
        "_first",
        "_map",
        "_next",
        "_pending",
        "_restart",
        "_sent",
        "_sse",
        "_started",
        "_text",
        "_unwrap",
        "diverged",
        "done",
        "failure",
        "model",
        "usage",
    )

    def __init__(
        self,
        encoder: StreamEncoder,
        sent: Sent,
        continuation: Translation,
        mode: Mode,
        error: ProxyError,
    ) -> None:
        self._encoder = encoder
        self._sent = sent
        self._error = error
        self._sse = SSEDecoder()
        self._decoder = continuation.target.stream_decoder()
        wrapped = continuation.wrapped
        self._unwrap = custom_tools.StreamUnwrapper(wrapped) if wrapped else None
        self._map: dict[int, int] = {}  # continuation index -> client index (or _SKIP)
        self._next = sent.next_index
        # Where the continuation's text goes: the client's open text block, else a new
        # one whose start is released with its first text.
        open_text = sent.open_text
        self._started = open_text is not None
        self._text = open_text if open_text is not None else self._take_index()
        self._first = True  # the next text block started is the continuation's first
        # Text to match and drop before any is released: all of it (restart), or the
        # trailing whitespace left out of the prefill.
        text = sent.text
        self._restart = mode == "restart"
        self._pending = text if self._restart else text[len(text.rstrip()) :]
        self.diverged = False
        self.done = False
        self.failure: ProxyError | None = None
        self.model: str | None = None
        self.usage: c.Usage | None = None

    def feed(self, data: bytes) -> bytes:
        if self.done:
            return b""
        out = bytearray()
        try:
            feed = self._decoder.feed
            for e in self._sse.decode(data):
                if self._events(feed(e), out):
                    break
        except Exception as exc:
            self._hold(exc)
        return bytes(out)

    def close(self) -> bytes:
        """The end of the continuation's body."""
        if self.done:
            return b""
        out = bytearray()
        try:
            for e in self._sse.flush():
                if self._events(self._decoder.feed(e), out):
                    return bytes(out)
            self._events(self._decoder.close(), out)
        except Exception as exc:
            self._hold(exc)
        return bytes(out)

    def fail(self, error: ProxyError | None = None) -> bytes:
        """End the client's stream with its terminal error: ``error``, by default the
        original failure given at the start (never the continuation's)."""
        err = error or self._error
        self.done = True
        ev = c.StreamError(status=err.status, kind=err.kind, message=err.message)
        self._sent.note(ev)
        return self._encoder.encode(ev)

    # ---- inside

    def _take_index(self) -> int:
        index = self._next
        self._next += 1
        return index

    def _hold(self, exc: Exception) -> None:
        self.done = True
        if isinstance(exc, ProxyError):
            self.failure = exc
        else:
            self.failure = ProxyError(502, f"continuation failed: {exc!r}", kind="api_error")

    def _diverge(self, out: bytearray) -> bool:
        self.diverged = True
        out += self.fail()
        return True

    def _unmatched(self) -> bool:
        return self._restart and bool(self._pending)

    def _events(self, events: list[c.StreamEvent], out: bytearray) -> bool:
        unwrap = self._unwrap
        for ev in events:
            for e in unwrap.feed(ev) if unwrap is not None else (ev,):
                if self._event(e, out):
                    return True
        return False

    def _event(self, ev: c.StreamEvent, out: bytearray) -> bool:
        kind = type(ev)
        if kind is c.BlockDelta:
            ev = cast(c.BlockDelta, ev)
            target = self._map.get(ev.index, _SKIP)
            if target == _SKIP or not ev.text:
                return False
            if target == self._text and self._pending:
                return self._match(ev.text, out)
            self._release(c.BlockDelta(index=target, text=ev.text), out)
            return False
        if kind is c.BlockStart:
            return self._start(cast(c.BlockStart, ev), out)
        if kind is c.MessageStart:
            self.model = cast(c.MessageStart, ev).model
            return False
        if kind is c.Finish:
            if self._unmatched():
                return self._diverge(out)  # ended before reaching the text already sent
            self.usage = cast(c.Finish, ev).usage
            self._release(ev, out)
            self.done = True
            return True
        if kind is c.StreamError:
            err = cast(c.StreamError, ev)
            self._hold(ProxyError(err.status, err.message, kind=err.kind))  # type: ignore[arg-type]
            return True
        index = cast(c.BlockStop | c.BlockSignature | c.Citations, ev).index
        target = self._map.get(index, _SKIP)
        if target == _SKIP:
            return False
        if target == self._text and (self._unmatched() or not self._started):
            return False  # the text block goes on (restart), or never showed text
        self._release(msgspec.structs.replace(ev, index=target), out)
        return False

    def _start(self, ev: c.BlockStart, out: bytearray) -> bool:
        if ev.kind in ("reasoning", "redacted_reasoning"):
            self._map[ev.index] = _SKIP
            return False
        if ev.kind == "text" and (self._first or self._unmatched()):
            self._first = False
            self._map[ev.index] = self._text
            return False
        if self._unmatched():
            return self._diverge(out)  # something else before the text already sent
        self._first = False
        target = self._take_index()
        self._map[ev.index] = target
        self._release(msgspec.structs.replace(ev, index=target), out)
        return False

    def _match(self, text: str, out: bytearray) -> bool:
        pending = self._pending
        n = min(len(pending), len(text))
        if text[:n] != pending[:n]:
            if self._restart:
                return self._diverge(out)
            n = 0  # prefill: the model went on without that whitespace
            self._pending = ""
        else:
            self._pending = pending[n:]
        if len(text) > n:
            self._release(c.BlockDelta(index=self._text, text=text[n:]), out)
        return False

    def _release(self, ev: c.StreamEvent, out: bytearray) -> None:
        if not self._started and type(ev) is c.BlockDelta and ev.index == self._text:
            self._started = True
            self._release(c.BlockStart(index=self._text, kind="text"), out)
        self._sent.log.append(ev)
        out += self._encoder.encode(ev)
