"""The contract every protocol codec implements, and the registry of codecs.

A codec owns one wire protocol, both as the client side (decode requests, encode
responses, streams and errors) and as the upstream side (encode requests, decode
responses, streams and errors). It never knows which protocol is on the other side
of the hub; capabilities it lacks are handled in its own encoder (translate, drop and
report, or reject through ``TranslationReport``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Generic, Literal, NamedTuple, Protocol, TypeVar, get_args

import msgspec

from . import canonical as c
from . import reasoning_carry
from .errors import ProxyError, TranslationReport
from .lazy_decoder import LazyDecoder
from .settings import UpstreamOptions as UpstreamOptions  # what encoders consult
from .sse import SSEEvent
from .stream_tail import StreamTail

_S = TypeVar("_S", bound=msgspec.Struct)

if TYPE_CHECKING:
    from collections.abc import Sequence

ProtocolName = Literal[
    "openai_chat_completions", "openai_responses", "anthropic_messages", "gemini_generate_content"
]
PROTOCOLS: tuple[ProtocolName, ...] = get_args(ProtocolName)


# How a failed attempt is answered (``routing.failures``): ``request`` never retried,
# answered as the provider answered; ``context`` not retried on the same target (a
# fallback may take it); ``key`` the next key at once; ``target`` retried with backoff.
FailureClass = Literal["request", "context", "key", "target"]


class FailureHint(NamedTuple):
    """What an upstream's error says about a failure beyond its HTTP status, read by
    the codec that knows the provider's vocabulary."""

    cls: FailureClass | None = None  # None: the status decides
    code: str | None = None  # the provider's code, for the log (escape before logging)
    retry_after: float | None = None  # seconds the error body asks to wait


NO_HINT = FailureHint()


class RequestHead(msgspec.Struct):
    """The two fields the middleware needs before it decides anything. Decoding only
    these is cheap and leaves the rest of the body untouched for pass-through."""

    model: str | None = None
    stream: bool | None = None


Action = Literal["generate", "count_tokens", "compact", "search"]


class SessionHint(NamedTuple):
    """What names a request's conversation in its body (``Codec.session_hint``):
    where it came from (a field's name, or ``prefix``) and the value, which routing
    only hashes."""

    source: bytes
    value: bytes


class Relayed(NamedTuple):
    """What a relayed (same-protocol) answer says it used, read from its bytes."""

    model: str  # the serving model the answer names ("" when it names none)
    usage: c.Usage


class UsageStrip(Protocol):
    """Takes out of a relayed stream what the upstream sent only because the proxy
    asked it for usage (``Codec.ask_usage``), and keeps the usage it read there."""

    usage: Relayed | None

    def feed(self, data: bytes, last: bool = False) -> bytes:
        """``data`` as the client gets it; a frame not yet whole may be held until
        the next ``feed`` (``last``: the body ended, nothing is held)."""
        ...


class UsageAsked(NamedTuple):
    """A pass-through stream request edited to ask the upstream for its usage."""

    body: bytes  # the request as it goes upstream
    strip: UsageStrip  # applied to the answer, so the client gets what it asked for


class PathCall(msgspec.Struct, frozen=True):
    """What the URL of a path-addressed protocol says (Gemini:
    ``/v1beta/models/{model}:streamGenerateContent``): the model, whether the answer
    streams, and the method."""

    model: str
    stream: bool
    action: Action = "generate"


class Served(NamedTuple):
    """A client path a codec serves: the method, and for a path-addressed protocol
    the model and stream flag its URL names (None: they are in the body)."""

    action: Action
    call: PathCall | None


class BodyAddressed:
    """How protocols with the model and stream flag in the body, served on fixed paths,
    are addressed: ``paths`` maps each served path to its method; the upstream URL is
    ``base_url + upstream_path`` (an Anthropic-style ``/v1/...`` path tolerates a
    base_url that already ends in ``/v1``); an in-process upstream is called on the
    first path of the method."""

    model_in_path: bool = False
    upstream_path: str = ""
    paths: Mapping[str, Action] = {}

    def serves(self, path: str) -> Served | None:
        action = self.paths.get(path)
        return None if action is None else Served(action, None)

    def upstream_url(self, base_url: str, call: PathCall | None = None) -> str:
        path = self.upstream_path
        if call is not None and call.action == "count_tokens":
            path += "/count_tokens"
        if path.startswith("/v1/") and base_url.endswith("/v1"):
            base_url = base_url[:-3]
        return base_url + path

    def inner_path(self, call: PathCall | None = None) -> str:
        wanted = call.action if call is not None else "generate"
        for path, action in self.paths.items():
            if action == wanted:
                return path
        raise ValueError(f"{type(self).__name__} serves no {wanted} path")


class StreamDecoder(Protocol):
    """Upstream SSE events -> canonical stream events (sans-IO)."""

    def feed(self, event: SSEEvent) -> list[c.StreamEvent]: ...

    def close(self) -> list[c.StreamEvent]:
        """End of the upstream body. Returns the held terminal events, or a
        ``StreamError`` when the stream ended before its terminal event."""
        ...

    def delta_run(self, events: list[SSEEvent], start: int) -> tuple[int, int, list[str]]:
        """The text deltas of one block that open ``events[start:]``, read in one go:
        ``(end, index, texts)`` where ``events[start:end]`` are exactly what ``feed``
        would turn into ``BlockDelta(index, text)`` each (or nothing: an empty
        fragment), now consumed, and ``texts`` their non-empty fragments. ``end`` is
        ``start`` when the first is no such frame; nothing else changes then. See
        ``delta_runs``."""
        ...


class StreamEncoder(Protocol):
    """Canonical stream events -> client SSE bytes (sans-IO)."""

    def encode(self, event: c.StreamEvent) -> bytes: ...

    def encode_deltas(self, index: int, texts: list[str]) -> bytes:
        """The same bytes as ``encode(BlockDelta(index=index, text=t))`` for each of
        ``texts`` (non-empty fragments) in turn. See ``delta_runs``."""
        ...


class Codec(Protocol):
    """One wire protocol, both sides, and its identity: the paths it serves, how its
    requests are addressed, its credentials and header family."""

    name: ProtocolName
    # OpenTelemetry ``gen_ai.system`` of the provider family this protocol belongs to.
    system: str
    # OpenTelemetry ``gen_ai.operation.name`` of a generation in this protocol.
    operation: str
    # Header name prefixes of this protocol's family, not forwarded to other families.
    header_family: tuple[bytes, ...]
    auth_header: bytes  # the header that carries the upstream key ("authorization": Bearer)
    # Headers besides ``authorization`` that carry a client's key in this protocol: read
    # as the client's credential, never forwarded beside a key of the proxy's own.
    credential_headers: tuple[bytes, ...]
    # Client paths of a models listing (``GET``); whose shape answers one is the
    # registry's ``model_listing``.
    listing_paths: tuple[str, ...]
    required_headers: tuple[tuple[bytes, bytes], ...]  # sent upstream unless the client did
    model_in_path: bool  # True: the URL names the model (``serves`` gives it), not the body
    # Client side: this protocol's freeform custom tools may reach an upstream without
    # them wrapped as one-field JSON functions (and are unwrapped on the way back).
    wraps_custom_tools: bool
    # Client side: a WebSocket on the generate path is this protocol's session
    # transport (Codex's Responses WebSocket); ``stateful``: the protocol promises
    # server-side state (stored answers, compaction) that the proxy keeps itself when
    # the upstream speaks another protocol.
    serves_websocket: bool
    stateful: bool
    # How much of a relayed stream's end accounting keeps to read its usage from
    # (``relayed_stream_usage``): the whole of its last frame that carries usage.
    usage_tail_bytes: int
    # Upstream side: a search's results come after the text citing them (Gemini).
    search_results_last: bool
    # Client side: headers this protocol's clients send that name their session
    # (conversation), most specific first; routing keeps a session on one key and
    # target (``routing.affinity``).
    session_headers: tuple[bytes, ...]

    def session_hint(self, body: bytes) -> SessionHint | None:
        """Client side: what names the request's session in its body — a field the
        clients send for it, else a digest of the conversation's stable prefix (what
        stays the same across its turns) — or None. Never raises, whatever the body."""
        ...

    # Upstream side: how an answer cut after its first content is finished here unless
    # ``UpstreamOptions.continuation`` says otherwise (``routing/continuation.py``):
    # "prefill" (a final assistant turn holding the text sent is continued) or
    # "restart" (asked again; only what extends the text sent is released).
    continues: Literal["prefill", "restart"]

    def serves(self, path: str) -> Served | None:
        """The method a client path names, or None when it is not this protocol's."""
        ...

    def takes_custom_tools(self, options: UpstreamOptions) -> bool:
        """Upstream side: freeform custom tools can be sent as they are."""
        ...

    def hosts_web_search(self, options: UpstreamOptions) -> bool:
        """Upstream side: the upstream runs a web search itself (its protocol's hosted
        search tool), so a client's ``Request.web_search`` is written as that tool;
        otherwise the proxy runs the search, or its encoder reports it."""
        ...

    def inner_path(self, call: PathCall | None = None) -> str:
        """Path (and query) an in-process upstream of this protocol is called on."""
        ...

    def upstream_url(self, base_url: str, call: PathCall | None = None) -> str:
        """The upstream URL for a call (its model and stream flag, when they belong in
        the URL)."""
        ...

    # ---- client side
    def decode_request(self, body: bytes, report: TranslationReport) -> c.Request:
        """Client body -> canonical request; ``ProxyError`` (400) for bad input."""
        ...

    def encode_response(self, response: c.Response, request: c.Request) -> bytes: ...

    def stream_encoder(self, request: c.Request) -> StreamEncoder: ...

    def encode_error(self, error: ProxyError) -> bytes:
        """The JSON error body for a non-stream error."""
        ...

    # ---- upstream side
    def encode_request(
        self, request: c.Request, report: TranslationReport, options: UpstreamOptions
    ) -> bytes: ...

    def decode_response(self, body: bytes) -> c.Response:
        """Upstream 2xx JSON body -> canonical response; ``ProxyError`` (502) when
        the upstream answered something this protocol cannot contain."""
        ...

    def stream_decoder(self) -> StreamDecoder: ...

    def decode_error(self, status: int, body: bytes) -> ProxyError:
        """Upstream non-2xx body (any content) -> error with the upstream's message."""
        ...

    def rate_limit_headers(
        self, upstream_headers: list[tuple[bytes, bytes]], *, exhausted: bool
    ) -> list[tuple[bytes, bytes]]:
        """Headers that tell this protocol's clients the upstream's rate limits in
        their own scheme (``exhausted``: the upstream said its quota is used up)."""
        ...

    # ---- upstream side, failures (only on the failure path: never on a healthy one)
    def failure_hint(self, status: int, body: bytes) -> FailureHint:
        """What an upstream non-2xx body (any content) says: the failure's class when
        the provider's code names one (a context overflow, a revoked key, a spent
        quota), the code, and the delay it asks for (Gemini's ``RetryInfo``)."""
        ...

    def stream_failure_hint(self, error: c.StreamError) -> FailureHint:
        """The same for an in-band error this codec's stream decoder produced."""
        ...

    def rate_limit_wait(self, headers: list[tuple[bytes, bytes]], now: float) -> float | None:
        """Seconds until the exhausted one of this protocol's rate limits resets, from
        its reset headers (None when none is exhausted or they say nothing)."""
        ...

    # ---- side endpoints
    def count_tokens_request(self, body: bytes) -> c.Request:
        """Client side: a token-count body (served when ``serves`` names the
        ``count_tokens`` method) as the canonical request it counts."""
        ...

    def encode_token_count(self, tokens: int) -> bytes:
        """Client side: a token count in this protocol's answer shape."""
        ...

    def lists_models(self, path: str, headers: list[tuple[bytes, bytes]], query: bytes) -> bool:
        """Client side: a models-listing request asks for this protocol's shape."""
        ...

    def encode_model_list(self, names: list[str], query: bytes) -> bytes: ...

    def models_url(self, base_url: str) -> str:
        """Upstream side: where the upstream lists its models."""
        ...

    def model_ids(self, body: bytes) -> list[str]:
        """Upstream side: the model ids of a listing (``ValueError`` if it is none)."""
        ...

    # ---- pass-through
    def stream_complete(self, tail: StreamTail) -> bool:
        """Whether a relayed stream reached its successful end (routing continues an
        answer that did not; an upstream's own terminal error is not one)."""

    def resume(self, encoder: StreamEncoder, relayed: bytes) -> None:
        """Client side: ``encoder`` was fed the events decoded from ``relayed`` (this
        protocol's bytes, relayed unchanged); set what they say that the events do not
        (numbering, item ids), so what ``encoder`` writes next continues them."""
        ...

    def stream_epilogue(self, tail: StreamTail, error: ProxyError | None) -> bytes:
        """What a relayed stream of this protocol still needs at its end: nothing when
        it reached its terminal event, else the protocol's terminal error (``error``,
        or a default saying the stream ended early), continuing the stream's own ids."""
        ...

    def relayed_usage(self, body: bytes) -> Relayed | None:
        """The model and usage of a relayed plain answer (only those fields are
        decoded); None when the body says none or is no answer."""
        ...

    def relayed_stream_usage(self, tail: StreamTail) -> Relayed | None:
        """The same from a relayed stream's ends (its first frame and its last ones:
        each protocol reports usage at its end)."""
        ...

    def ask_usage(self, body: bytes) -> UsageAsked | None:
        """Accounting on: a streamed request (the client's, valid JSON) whose answer
        would report no usage, edited to ask for it (every other byte kept), with
        what takes the unasked usage out of the answer; None when the answer reports
        its usage as the request stands."""
        ...


def usage_always_reported(body: bytes) -> None:
    """``Codec.ask_usage`` of a protocol whose streams always report their usage."""


def nothing_to_resume(encoder: StreamEncoder, relayed: bytes) -> None:
    """``Codec.resume`` of a protocol whose stream encoder continues relayed bytes as
    the replayed events leave it (its ids come from the upstream's, its indices from
    the blocks)."""


def fold(events: Sequence[c.StreamEvent]) -> c.Response:
    """A whole canonical stream folded into the response it describes.

    Used when a non-streaming client meets a streaming upstream, and by tests to check
    that streamed and non-streamed translations agree.
    """
    start: c.MessageStart | None = None
    blocks: dict[int, c.Part] = {}
    order: list[int] = []
    finish: c.Finish | None = None
    for ev in events:
        if isinstance(ev, c.MessageStart):
            start = ev
        elif isinstance(ev, c.BlockStart):
            part: c.Part
            if ev.kind == "text":
                part = c.Text(text="")
            elif ev.kind == "refusal":
                part = c.Refusal(text="")
            elif ev.kind == "tool_call":
                part = c.ToolCall(
                    id=ev.call_id or "", name=ev.name or "", kind=ev.tool_kind, item_id=ev.item_id
                )
            else:
                part = c.Reasoning(
                    summary=ev.summary,
                    redacted=ev.redacted,
                    encrypted_content=ev.encrypted_content,
                    item_id=ev.item_id,
                )
            blocks[ev.index] = part
            order.append(ev.index)
        elif isinstance(ev, c.BlockDelta):
            p = blocks.get(ev.index)
            if isinstance(p, (c.Text, c.Refusal, c.Reasoning)):
                p.text += ev.text
            elif isinstance(p, c.ToolCall):
                p.arguments += ev.text
        elif isinstance(ev, c.BlockSignature):
            p = blocks.get(ev.index)
            if isinstance(p, c.Reasoning):
                reasoning_carry.take(p, ev)
        elif isinstance(ev, c.Citations):
            p = blocks.get(ev.index)
            if isinstance(p, c.Text):
                p.citations = (p.citations or []) + ev.citations
        elif isinstance(ev, c.ServerTool):  # a hosted tool's call and result, in place
            blocks[ev.index] = ev.use
            order.append(ev.index)
        elif isinstance(ev, c.Finish):
            finish = ev
        elif isinstance(ev, c.StreamError):
            raise ProxyError(ev.status, ev.message, kind=ev.kind)  # type: ignore[arg-type]
    if start is None or finish is None:
        raise ProxyError(502, "upstream stream ended before it finished", kind="bad_gateway")
    return c.Response(
        id=start.id,
        model=start.model,
        created=start.created,
        content=[blocks[i] for i in order],
        stop_reason=finish.stop_reason,
        stop_sequence=finish.stop_sequence,
        refusal_explanation=finish.refusal_explanation,
        usage=finish.usage,
    )


class RefusalJoin:
    """Holds each text or refusal block's ``BlockStop`` back by one event, so that a
    refusal block right after a text block (or a text block right after a refusal
    block) starts before the first one stops.

    The overlap is how a canonical stream says that the two belong to one message (one
    Chat message with ``content`` and ``refusal``; one Responses message item with an
    ``output_text`` and a ``refusal`` part, in either order): the Responses stream
    encoder then puts both parts in one message item, as its ``output_items`` does for
    such adjacent parts, so streamed and non-streamed answers have the same items.
    Producers whose parts close first (Responses message parts, ``unfold``) pass their
    events through one of these; the Chat decoder keeps its text block open across a
    refusal on its own. Stateful: one per stream.
    """

    __slots__ = ("_held", "_held_kind", "_open")

    def __init__(self) -> None:
        self._held: c.BlockStop | None = None
        self._held_kind = ""
        self._open: dict[int, str] = {}  # text and refusal blocks started, not stopped

    def __call__(self, events: list[c.StreamEvent]) -> list[c.StreamEvent]:
        out: list[c.StreamEvent] = []
        for ev in events:
            held = self._held
            if held is not None:
                self._held = None
                if (
                    isinstance(ev, c.BlockStart)
                    and ev.kind in _JOINS
                    and ev.kind != self._held_kind
                ):
                    out.append(ev)
                    out.append(held)
                    self._open[ev.index] = ev.kind
                    continue
                out.append(held)
            if isinstance(ev, c.BlockStart) and ev.kind in _JOINS:
                self._open[ev.index] = ev.kind
            elif isinstance(ev, c.BlockStop) and ev.index in self._open:
                self._held_kind = self._open.pop(ev.index)
                self._held = ev
                continue
            out.append(ev)
        return out


_JOINS = ("text", "refusal")


def unfold(response: c.Response) -> list[c.StreamEvent]:
    """A whole response as the canonical stream that would have produced it
    (for a streaming client whose upstream answered with plain JSON); a refusal right
    after a text starts before that text stops (``RefusalJoin``)."""
    out: list[c.StreamEvent] = [
        c.MessageStart(id=response.id, model=response.model, created=response.created)
    ]
    for i, p in enumerate(response.content):
        if isinstance(p, c.Text):
            out.append(c.BlockStart(index=i, kind="text"))
            if p.text:
                out.append(c.BlockDelta(index=i, text=p.text))
            if p.citations:
                out.append(c.Citations(index=i, citations=p.citations))
        elif isinstance(p, c.Refusal):
            out.append(c.BlockStart(index=i, kind="refusal"))
            out.append(c.BlockDelta(index=i, text=p.text))
        elif isinstance(p, c.ToolCall):
            out.append(
                c.BlockStart(
                    index=i,
                    kind="tool_call",
                    call_id=p.id,
                    name=p.name,
                    tool_kind=p.kind,
                    item_id=p.item_id,
                )
            )
            if p.arguments:
                out.append(c.BlockDelta(index=i, text=p.arguments))
        elif isinstance(p, c.Reasoning):
            if p.redacted is not None:
                out.append(c.BlockStart(index=i, kind="redacted_reasoning", redacted=p.redacted))
            else:
                out.append(
                    c.BlockStart(
                        index=i,
                        kind="reasoning",
                        summary=p.summary,
                        item_id=p.item_id,
                        encrypted_content=p.encrypted_content,
                    )
                )
                if p.text:
                    out.append(c.BlockDelta(index=i, text=p.text))
                if p.signature is not None or p.thought_signature is not None:
                    out.append(
                        c.BlockSignature(
                            index=i, signature=p.signature, thought_signature=p.thought_signature
                        )
                    )
        elif isinstance(p, c.ServerToolUse):
            out.append(c.ServerTool(index=i, use=p))  # whole, between blocks
            continue
        else:
            continue
        out.append(c.BlockStop(index=i))
    out.append(
        c.Finish(
            stop_reason=response.stop_reason,
            usage=response.usage,
            stop_sequence=response.stop_sequence,
            refusal_explanation=response.refusal_explanation,
        )
    )
    return RefusalJoin()(out)


def absent(*names: str) -> Callable[[object], bool]:
    """Whether a struct leaves every one of ``names`` at None: one C call and a tuple
    compare, not a test per field.

    A decoder asks it once for the request-level fields the usual request (an agent
    loop's turn) does not send, and skips the code that handles them when none is
    there: each such field costs a test, a keyword to the canonical ``Request`` (and a
    call of 16 keywords or more is compiled into one taking a dict, which costs a
    Struct half a microsecond more), and sometimes a call. The tests force the
    general path (a guard that answers False) to check that both give the same
    request, report and errors. (A closure: calling it costs less than an instance's
    ``__call__``.)"""
    get = operator.attrgetter(*names)
    none: object = (None,) * len(names) if len(names) > 1 else None
    return lambda struct: bool(get(struct) == none)


# The canonical fields the usual request leaves at None that encoders reject or drop
# (``_check_fields``): one test skips them all.
RARE_REQUEST_FIELDS = absent(
    "n",
    "logprobs",
    "top_logprobs",
    "previous_response_id",
    "background",
    "user",
    "metadata",
    "prompt_cache_key",
    "verbosity",
    "service_tier",
)


class OnePassDecoder(Generic[_S]):
    """A client request body in one parse, when it can be.

    ``client_struct`` is the protocol's request struct plus, declared and left
    undecoded, the top-level fields real clients send that translation drops, with
    ``forbid_unknown_fields``. A body that decodes into it has no unknown field, so
    it needs no second parse to list its keys; the dropped field, when it holds just
    one, is reported. ``decode`` returns None for every other body (an unknown field,
    several dropped ones whose order the report must keep, invalid JSON), and the
    caller's general path says what is wrong.
    """

    __slots__ = ("_decoder", "_dropped", "_names", "_none")

    def __init__(self, client_struct: type[_S], known: Iterable[str]) -> None:
        known = frozenset(known)
        self._decoder: LazyDecoder[_S] = LazyDecoder(client_struct)
        self._names = tuple(n for n in client_struct.__struct_fields__ if n not in known)
        # Read in one C call; a tuple even for one name.
        getter = operator.attrgetter(*self._names)
        self._dropped: Callable[[_S], tuple[object, ...]] = (
            getter if len(self._names) > 1 else lambda s: (getter(s),)
        )
        self._none = (msgspec.UNSET,) * len(self._names)

    def decode(self, body: bytes, report: TranslationReport) -> _S | None:
        try:
            req = self._decoder.decode(body)
        except (msgspec.DecodeError, ValueError):  # ValueError: invalid UTF-8
            return None
        values = self._dropped(req)
        if values == self._none:
            return req
        present = [n for n, v in zip(self._names, values, strict=True) if v is not msgspec.UNSET]
        if len(present) > 1:
            return None
        report.drop(present[0])  # one field: its place in the body does not matter
        return req
