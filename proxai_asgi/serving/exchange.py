"""One request through the middleware: the part every kind of answer shares.

``Exchange`` reads and checks the body, routes it, owns the client's ``send`` (the
response start, body, masking of the upstream key), opens the upstream through the
middleware's transport choice, and logs the exchange. What is sent is decided by one
piece per kind of answer: ``generate`` (through ``failover`` and ``attempts``: relayed
or translated on the route's targets), ``endpoints`` (token counts).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote_to_bytes

import anyio
import msgspec

from .. import canonical as c
from .. import checks
from ..client_values import check_model, check_model_segment, check_query_key, loggable
from ..codec import Codec, PathCall, Relayed, RequestHead, UsageStrip
from ..errors import ProxyError, ResponseAborted
from ..responses_state import stored_claims, stored_responses
from ..routing import Route, Upstream
from ..transport.upstream import (
    Message,
    RawHeaders,
    Receive,
    Scope,
    Send,
    UpstreamResponse,
    client_headers_from_upstream,
    upstream_headers,
)
from ..usage.accounting import new_request_id
from ..usage.record import UsageRecord, count_tokens, iso_time
from . import telemetry
from .key_mask import KeyMask, mask, maskable_key

if TYPE_CHECKING:
    from ..routing.plan import Attempts
    from ..usage.holds import Hold
    from .context import Context

logger = logging.getLogger("proxai_asgi")

DROPPED_HEADER = b"x-proxai-dropped-fields"
COST_HEADER = b"x-proxai-cost"  # USD, on plain answers when ``cost_header=True``
JSON_HEADER = (b"content-type", b"application/json")
_head_decoder = msgspec.json.Decoder(RequestHead)
# Bodies the providers refuse by their label, whatever they hold (no label: JSON).
_NOT_JSON = frozenset(
    {
        b"text/plain",
        b"application/x-www-form-urlencoded",
        b"multipart/form-data",
        b"text/xml",
        b"application/xml",
        b"text/html",
    }
)

Handler = Callable[["Exchange", bytes], Coroutine[Any, Any, None]]
SSE_HEADERS: RawHeaders = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def is_content(event: object) -> bool:
    """The answer's first content: text, thinking or tool arguments, a tool call's
    name, or its end. A message or an empty block opened is not content yet: a
    failure after only those can still go to another target unseen."""
    kind = type(event)
    if kind is c.BlockDelta or kind is c.Finish or kind is tuple:  # (tuple: a text run)
        return True
    return kind is c.BlockStart and cast(c.BlockStart, event).kind == "tool_call"


def _query_key(query: bytes) -> bytes | None:
    for pair in query.split(b"&"):
        name, _, value = pair.partition(b"=")
        if name == b"key" and value:
            return unquote_to_bytes(value)
    return None


async def read_body(
    scope: Scope, receive: Receive, limit: int, timeout: float | None = None
) -> bytes | None:
    """The request body, refused early when it is too large or labelled as something
    other than JSON, and with a 408 when it has not all come within ``timeout``
    seconds (the connection is then closed: the rest of the body is never read);
    None when the client left before sending it."""
    if timeout is None:
        return await _read_body(scope, receive, limit)
    with anyio.move_on_after(timeout):
        return await _read_body(scope, receive, limit)
    raise ProxyError(
        408,
        f"the request body was not received within {timeout:g} seconds",
        kind="invalid_request",
        code="request_timeout",
        headers=[(b"connection", b"close")],
    )


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    for k, v in scope.get("headers", []):
        if k == b"content-length" and v.isdigit() and int(v) > limit:
            raise ProxyError(413, f"request body exceeds {limit} bytes", kind="request_too_large")
        if k == b"content-type" and v.split(b";", 1)[0].strip().lower() in _NOT_JSON:
            raise ProxyError.invalid(
                f"Content-Type {v.decode('latin-1')!r} is not supported: send the "
                "request body as application/json"
            )
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ProxyError(413, f"request body exceeds {limit} bytes", kind="request_too_large")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


class Exchange:
    """One request: the client codec, what routing chose, and the client's ``send``."""

    def __init__(
        self,
        mw: Context,
        client: Codec,
        scope: Scope,
        receive: Receive,
        send: Send,
        call: PathCall | None = None,
    ) -> None:
        self.mw = mw
        self.client = client
        self.call = call  # what the URL says, for a path-addressed client protocol
        self.upstream_call: PathCall | None = None  # the (routed) model and stream upstream
        self.scope = scope
        self.receive = receive
        self._send = send
        self.started = False
        self.status = 0
        self.t0 = time.perf_counter()
        self.wall_t0 = time.time()
        self.ttfb: float | None = None
        self.upstream: Upstream | None = None  # the target that answered (or was routed)
        self.matched: Route | None = None  # the route the model chose
        self.model: str | None = None
        self.requested_model: str | None = None  # the client's, before routing
        self.request_body = b""  # the body attempts send (stored turns expanded)
        self.routing: Attempts | None = None  # the attempts routing made
        self.stream = False
        self.dropped: list[str] = []
        self.usage: c.Usage | None = None
        self.response_model: str | None = None
        self.span = telemetry.start(client.name)
        self.secret: KeyMask | None = None  # the upstream key, masked in whatever we relay
        # A Responses answer to store, or whose owner to record (``stored_claims``).
        self.turn: stored_responses.Turn | stored_claims.Claimer | None = None
        # Accounting (``usage.accounting``): the ledger's id, who pays, the budget held.
        self.request_id: str | None = None  # made with its ledger record
        self.owner: str | None = None
        self.budget_hold: Hold | None = None
        self.priced: tuple[c.Usage, tuple[float | None, str | None]] | None = None

    # ------------------------------------------------------------------ driving

    async def run(self, handler: Handler) -> None:
        """The body and its limits, admission, then ``handler``; every failure before
        the response started is answered in the client's protocol. The concurrency
        slot is taken once the body is in and checked: a client slow to send it (or
        never finishing it) holds no slot, only its own 408."""
        limiter = self.mw.limiter
        acquired = False
        metrics = self.mw.accounting.metrics
        if metrics is not None:
            metrics.started(self.client.name)
        try:
            body = await read_body(
                self.scope, self.receive, self.mw.max_body_size, self.mw.body_timeout
            )
            if body is None:
                return  # the client left before sending its body
            if checks.json_too_deep(body, self.mw.max_json_depth):
                raise ProxyError.invalid(
                    f"request body is nested deeper than {self.mw.max_json_depth} levels"
                )
            if limiter is not None:
                queued = time.perf_counter()
                with anyio.move_on_after(self.mw.queue_timeout):
                    await limiter.acquire()
                    acquired = True
                if metrics is not None:
                    metrics.queued(time.perf_counter() - queued, acquired)
                if not acquired:
                    raise ProxyError(
                        429,
                        "the proxy is at its concurrency limit; retry shortly",
                        kind="rate_limit",
                        headers=[(b"retry-after", b"1")],
                    )
            await handler(self, body)
        except ProxyError as err:
            await self.fail(err)
        except ResponseAborted as abort:
            # Only dropping the connection tells the client its body is incomplete.
            logger.warning("proxai_asgi aborted a %s response: %s", self.client.name, abort)
            raise
        except RecursionError:
            # Only JSON nested deeper than the interpreter's recursion limit gets here.
            await self.fail(ProxyError.invalid("request body is nested too deeply"))
        except Exception:
            logger.exception("proxai_asgi failed while serving %s", self.client.name)
            await self.fail(ProxyError(500, "internal error in the proxy", kind="api_error"))
        finally:
            if self.turn is not None:
                with anyio.CancelScope(shield=True):
                    await self.turn.close()
            if acquired:
                limiter.release()  # type: ignore[union-attr]
            if metrics is not None:
                metrics.finished(self.client.name)
            if self.mw.accounting.active:
                await _settle(self)
            _log(self)

    def head(self, body: bytes) -> RequestHead:
        """The model and stream flag: from the URL for a path-addressed protocol."""
        if self.call is not None:
            check_model_segment(self.call.model)  # it came from a URL, and goes into one
            key = _query_key(self.scope.get("query_string", b""))
            if key:  # becomes a header value (``client_headers``)
                check_query_key(key)
            return RequestHead(model=self.call.model, stream=self.call.stream)
        try:
            head = _head_decoder.decode(body)
        except msgspec.ValidationError as exc:
            raise ProxyError.invalid(f"invalid request body: {exc}") from None
        except msgspec.DecodeError:
            raise ProxyError.invalid("request body is not valid JSON") from None
        if not head.model:
            raise ProxyError.invalid("model: field required", param="model")
        check_model(head.model)
        return head

    def route(self, head: RequestHead) -> Route:
        """Choose the upstream for the request's model, and remember the choice."""
        route = self.mw.router.select(head.model or "")
        if route is None:
            raise ProxyError(404, f"no upstream is configured for model {head.model!r}")
        model = route.model_rewrite or head.model or ""
        if route.upstream.model_in_path:
            # Before anything is sent: a model that would add a path or a query to the
            # upstream's URL (and matched a glob by doing so) is refused.
            check_model_segment(model)
        self.upstream = route.upstream
        self.matched = route
        self.requested_model = head.model
        self.model = model
        self.stream = bool(head.stream)
        self.upstream_call = PathCall(model=model, stream=self.stream)
        return route

    # ------------------------------------------------------------ client output

    async def start(self, status: int, headers: RawHeaders) -> None:
        self.started = True
        self.status = status
        secret = maskable_key(self.upstream)
        if secret is not None:
            # An upstream that quotes our key back (an error echoing the credential)
            # must not hand it to the client.
            self.secret = KeyMask(secret)
            headers = [(k, mask(v, secret)) for k, v in headers]
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def body(self, data: bytes, more: bool = True) -> None:
        if self.ttfb is None and data:
            self.ttfb = time.perf_counter() - self.t0
        if self.secret is not None:
            data = self.secret.feed(data, more)
        if self.turn is not None:
            await self.turn.observe(self.status, data, more)
        await self._send({"type": "http.response.body", "body": data, "more_body": more})

    async def json(self, status: int, body: bytes, extra: RawHeaders) -> None:
        headers = [JSON_HEADER, (b"content-length", str(len(body)).encode()), *extra]
        await self.start(status, headers)
        await self.body(body, more=False)

    async def fail(self, err: ProxyError) -> None:
        if self.started:
            return  # a started stream ends through its encoder; nothing else to say
        await self.json(err.status, self.client.encode_error(err), err.headers)

    async def passthrough_send(self, message: Message) -> None:
        """Messages of an in-process upstream that are not the response's own."""
        await self._send(message)

    def translation_headers(
        self, upstream_resp: UpstreamResponse, error: ProxyError | None = None
    ) -> RawHeaders:
        headers = client_headers_from_upstream(upstream_resp.headers, passthrough=False)
        # The upstream's limits in the client's scheme, so the client backs off (or
        # stops) as its own provider would have it.
        exhausted = error is not None and error.code == "insufficient_quota"
        headers += self.client.rate_limit_headers(headers, exhausted=exhausted)
        if self.dropped:
            # Field names can be the client's own (unknown keys): escaped, so that a
            # CR or LF cannot end the header (the server would drop the whole answer).
            headers.append((DROPPED_HEADER, loggable(", ".join(self.dropped)).encode()))
        return headers

    # ---------------------------------------------------------------- upstreams

    def open(
        self,
        up: Upstream,
        body: bytes,
        *,
        passthrough: bool,
        call: PathCall | None = None,
        raw: bool | None = None,
    ) -> AbstractAsyncContextManager[UpstreamResponse]:
        """The upstream request, through the middleware's transport for ``up``.
        ``raw`` (default: a pass-through's) keeps the body's content-encoding."""
        headers = upstream_headers(
            self.client_headers(), up, passthrough=passthrough, stream=self.stream
        )
        return self.mw.open_upstream(
            self.scope,
            up,
            headers,
            body,
            call or self.upstream_call,
            raw=passthrough if raw is None else raw,
        )

    def client_headers(self) -> RawHeaders:
        """The client's headers; a key a path-addressed client put in the query
        (Gemini's ``?key=``) joins them as that protocol's key header, so it is handled
        like any credential and never goes into an upstream URL."""
        headers: RawHeaders = self.scope.get("headers", [])
        if self.call is not None:
            key = _query_key(self.scope.get("query_string", b""))
            if key and not any(k == self.client.auth_header for k, _ in headers):
                headers = [*headers, (self.client.auth_header, key)]
        return headers


def _log(ex: Exchange) -> None:
    """The exchange's span and its log line."""
    up = ex.upstream
    usage = ex.usage
    routed = ex.routing
    served = routed.served_by if routed is not None else None
    telemetry.finish(
        ex.span,
        upstream=up,
        request_model=ex.model,
        response_model=ex.response_model,
        status=ex.status,
        input_tokens=usage.input_tokens if usage else None,
        output_tokens=usage.output_tokens if usage else None,
        stream=ex.stream,
        routing=routed,
    )
    if not logger.isEnabledFor(logging.INFO):
        return
    logger.info(
        "exchange client=%s upstream=%s pair=%s model=%s stream=%s status=%s "
        "duration_ms=%.1f ttfb_ms=%s input_tokens=%s output_tokens=%s dropped=%s "
        "attempts=%s fallback=%s key=%s failures=%s",
        ex.client.name,
        up.label if up else "-",
        f"{ex.client.name}->{up.protocol}" if up else "-",
        loggable(ex.model or "-"),
        ex.stream,
        ex.status,
        (time.perf_counter() - ex.t0) * 1000,
        f"{ex.ttfb * 1000:.1f}" if ex.ttfb is not None else "-",
        usage.input_tokens if usage else "-",
        usage.output_tokens if usage else "-",
        loggable(",".join(ex.dropped) or "-"),
        routed.count if routed is not None else 1,
        served.fallback_index if served is not None else "-",
        served.upstream.key_id if served is not None else "-",
        ",".join(routed.failures) if routed is not None and routed.failures else "-",
    )


# ---------------------------------------------------------------- accounting


def owner_now(ex: Exchange) -> str | None:
    """``owner_of`` when the owner key is loaded already (no wait); else None."""
    owners = ex.mw.stored.owners
    if owners.key is None and owners.owner is None:
        return None
    return owners({"headers": ex.client_headers()})


async def owner_of(ex: Exchange) -> str:
    """Who pays for ``ex``: the owner the stored Responses use (the application's id,
    or the keyed hash of the client's credential, a Gemini ``?key=`` included)."""
    if ex.owner is None:
        stored = ex.mw.stored
        await stored.ready()
        ex.owner = stored.owners({"headers": ex.client_headers()})
    return ex.owner


async def admit(ex: Exchange, route: Route, body: bytes) -> None:
    """The budgets ``ex`` draws on, before any upstream is called (a 429 when spent)."""
    accounting = ex.mw.accounting
    if accounting.budgets is not None:
        try:
            ex.budget_hold = await accounting.admit(await owner_of(ex), route, body, ex.model)
        except ProxyError as err:
            # A spent quota, told in the client's own scheme (Claude Code stops on
            # Anthropic's "rejected"; the SDKs on x-should-retry: false).
            err.headers = err.headers + ex.client.rate_limit_headers(err.headers, exhausted=True)
            raise


def usage_sink(ex: Exchange) -> Callable[[Relayed | None], None] | None:
    """With accounting on, where a relayed answer's model and usage go (a relay
    otherwise does not read them: it costs a decode)."""
    if not ex.mw.accounting.active:
        return None

    def sink(relayed: Relayed | None) -> None:
        if relayed is not None:
            ex.usage = relayed.usage
            ex.response_model = relayed.model or ex.response_model

    return sink


def ask_usage(ex: Exchange, body: bytes) -> tuple[bytes, UsageStrip | None]:
    """A pass-through stream's upstream body, and what to take out of its answer:
    with accounting on, a client that did not ask for its stream's usage (Chat without
    ``include_usage``) must not make its answer uncountable (``Codec.ask_usage``)."""
    if not ex.stream or not ex.mw.accounting.active:
        return body, None
    asked = ex.client.ask_usage(body)
    return (body, None) if asked is None else asked


def cost_headers(ex: Exchange) -> RawHeaders:
    """``x-proxai-cost`` for a successful plain answer whose usage is known before its
    headers go (``cost_header=True``). A stream's usage comes at its end, after its
    headers, and so does a wrapped app's as the route's only target (``relaying``:
    its headers are relayed before its body): those never carry it (their ledger
    records do)."""
    accounting = ex.mw.accounting
    if not accounting.cost_header or ex.usage is None:
        return []
    priced = accounting.prices.cost(usage_record(ex, status=200))
    ex.priced = (ex.usage, priced)  # the record's cost, unless the usage changes
    usd = priced[0]
    if usd is None:
        return []
    return [(COST_HEADER, (f"{usd:.10f}".rstrip("0").rstrip(".") or "0").encode())]


def usage_record(ex: Exchange, status: int | None = None) -> UsageRecord:
    """The exchange's ledger record (unpriced); ``status``: the one about to be sent."""
    status = ex.status if status is None else status
    routed = ex.routing
    served = routed.served_by if routed is not None else None
    up = served.upstream if served is not None else ex.upstream
    if ex.request_id is None:
        ex.request_id = new_request_id()
    rec = UsageRecord(
        request_id=ex.request_id,
        time=iso_time(ex.wall_t0),
        owner=ex.owner or "",
        route=ex.matched.model if ex.matched is not None else None,
        upstream=up.label if up is not None else None,
        key_id=up.key_id if up is not None else None,
        client_protocol=ex.client.name,
        upstream_protocol=up.protocol if up is not None else None,
        requested_model=ex.requested_model,
        served_model=ex.response_model,
        status=status,
    )
    rec.stream = ex.stream
    rec.attempts = routed.count if routed is not None else (1 if up is not None else 0)
    rec.fallback_index = served.fallback_index if served is not None else None
    rec.ttft_ms = ex.ttfb * 1000 if ex.ttfb is not None and ex.stream else None
    rec.duration_ms = (time.perf_counter() - ex.t0) * 1000
    if ex.usage is not None and 200 <= status < 300:
        # Failed attempts and failed exchanges are recorded, never billed.
        count_tokens(rec, ex.usage)
    return rec


async def _settle(ex: Exchange) -> None:
    """The exchange's account, once its answer is sent. Without budgets nothing here
    waits (the owner known, the ledger queued, the metrics counted), so nothing can be
    cancelled half done; a budget's settlement (Redis) is shielded."""
    accounting = ex.mw.accounting
    if accounting.needs_owner and ex.owner is None:
        ex.owner = owner_now(ex)
        if ex.owner is None:
            with anyio.CancelScope(shield=True):
                await owner_of(ex)
    rec = usage_record(ex)
    priced = ex.priced
    if priced is not None and priced[0] is ex.usage and 200 <= rec.status < 300:
        rec.cost_usd, rec.price_version = priced[1]
    else:
        rec.cost_usd, rec.price_version = accounting.prices.cost(rec)
    accounting.record(rec, ex.dropped, ex.routing)
    if accounting.budgets is not None and ex.budget_hold is not None:
        with anyio.CancelScope(shield=True):
            await accounting.budgets.settle(ex.budget_hold, rec)
