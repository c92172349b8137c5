"""The ASGI glue: recognise an LLM request, route it, and drive the codecs.

A pure ASGI middleware in the manner of Starlette's GZipMiddleware: every exchange
gets a small responder object (``Exchange``) that reads the body, decides, and owns
the client's ``send``. Nothing here knows a wire format; codecs do that.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes

import anyio
import msgspec

from . import canonical as c
from . import (
    checks,
    compaction,
    custom_tools,
    endpoints,
    stored_endpoints,
    stored_responses,
    telemetry,
    websocket_responses,
)
from .codec import PROTOCOLS, Codec, PathCall, ProtocolName, RequestHead, fold, unfold
from .errors import ProxyError, ResponseAborted, TranslationReport
from .model_rewrite import rewrite_model
from .passthrough import PassthroughRelay
from .protocols import get_codec
from .routing import Route, Router, Upstream
from .sse import SSEDecoder
from .store import ResponseStore

if TYPE_CHECKING:
    import httpx  # imported on first use (upstream.py), as is the lean pool (http1.py)
from .upstream import (
    ASGIApp,
    HttpTransport,
    Message,
    RawHeaders,
    Receive,
    Scope,
    Send,
    UpstreamResponse,
    client_headers_from_upstream,
    open_inner,
    upstream_headers,
)

logger = logging.getLogger("proxai_asgi")

DEFAULT_MAX_BODY = 32 * 1024 * 1024
MAX_ERROR_BODY = 1024 * 1024
MAX_JSON_BODY = 64 * 1024 * 1024
DROPPED_HEADER = b"x-proxai-dropped-fields"

_PATHS: dict[str, ProtocolName] = {
    "/v1/chat/completions": "openai_chat_completions",
    "/chat/completions": "openai_chat_completions",
    "/v1/responses": "openai_responses",
    "/responses": "openai_responses",
    "/v1/messages": "anthropic_messages",
    "/messages": "anthropic_messages",
}
_head_decoder = msgspec.json.Decoder(RequestHead)
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


def _query_key(query: bytes) -> bytes | None:
    for pair in query.split(b"&"):
        name, _, value = pair.partition(b"=")
        if name == b"key" and value:
            return unquote_to_bytes(value)
    return None


_JSON = (b"content-type", b"application/json")


def _never() -> bool:
    return False


def _loop_clock() -> Callable[[], float]:
    """``anyio.current_time``, bound once: on asyncio it is the running loop's
    ``time`` (what anyio returns), without the ~1 µs backend lookup per call."""
    try:
        return asyncio.get_running_loop().time
    except RuntimeError:  # another backend (trio)
        return anyio.current_time


@asynccontextmanager
async def _beside(watcher: Callable[[], Coroutine[Any, Any, None]]) -> AsyncIterator[None]:
    """Run ``watcher`` while the body runs; stop it when the body ends."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another backend (trio): a task group
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
        return
    task = loop.create_task(watcher())
    try:
        yield
    finally:
        task.cancel()
        if task.done() and not task.cancelled() and task.exception() is not None:
            logger.debug("watcher failed: %r", task.exception())


def _mask(data: bytes, secret: bytes) -> bytes:
    return data.replace(secret, b"*" * len(secret)) if secret in data else data


_SSE_HEADERS: RawHeaders = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class ProxaiMiddleware:
    """Serve the three LLM protocols in front of ``app``, translating to ``upstream``
    (or to the upstream of the first ``routes`` entry whose model glob matches).

    ``lean_http=True`` sends requests to plain-``http://`` upstreams through a lean
    built-in HTTP/1.1 pool instead of httpx (about 0.5 ms less per request on a LAN);
    HTTPS upstreams, environment proxies and a given ``http_client`` keep httpx.

    ``max_connections`` bounds the pooled upstream connections; ``max_concurrency``
    bounds exchanges in flight (excess requests queue for ``queue_timeout`` seconds,
    then get a 429 with ``retry-after``). Bodies over ``max_body_size`` bytes get a 413
    and bodies nesting JSON deeper than ``max_json_depth`` a 400, before any other work.

    A WebSocket on the Responses path is served as Codex's Responses WebSocket
    transport (``responses_websocket=False`` refuses it with a 426 so clients fall back
    to HTTP). Requests to other paths, other methods, other websockets and lifespan
    reach ``app`` untouched. ``prefix`` serves the LLM paths under a mount point
    (``/llm/v1/...``).

    ``store`` keeps Responses answers for ``previous_response_id``, retrieve and
    delete over stateless upstreams (``stored_responses.py``): None or "memory" (the
    default), "sqlite:///path", "redis://host:port/db", "off", or a store object;
    ``store_owner`` (scope -> owner id) replaces the keyed hash of the client's
    credential, whose key is ``store_secret`` (random per process when None).
    """

    def __init__(
        self,
        app: ASGIApp,
        upstream: Upstream | None = None,
        routes: Sequence[Route] | None = None,
        *,
        prefix: str = "",
        max_body_size: int = DEFAULT_MAX_BODY,
        http_client: httpx.AsyncClient | None = None,
        max_connections: int = 1000,
        max_concurrency: int | None = None,
        queue_timeout: float = 10.0,
        serve_models: bool = True,
        max_json_depth: int = checks.DEFAULT_MAX_JSON_DEPTH,
        lean_http: bool = False,
        responses_websocket: bool = True,
        store: str | ResponseStore | None = None,
        store_owner: stored_responses.OwnerFunction | None = None,
        store_secret: str | bytes | None = None,
    ) -> None:
        if (upstream is None) == (not routes):
            raise ValueError("give exactly one of upstream= or routes=")
        self.app = app
        self.router = Router(list(routes) if routes else [Route("*", upstream)])  # type: ignore[arg-type]
        self.prefix = prefix.rstrip("/")
        self.max_body_size = max_body_size
        self.http = HttpTransport(http_client, max_connections=max_connections)
        self.lean = None
        if lean_http and http_client is None:
            from .http1 import Http1Pool

            self.lean = Http1Pool(max_connections)
        # Past max_concurrency exchanges, requests wait up to queue_timeout for a
        # slot, then get a 429 in their own protocol's shape.
        self.limiter = anyio.Semaphore(max_concurrency) if max_concurrency else None
        self.queue_timeout = queue_timeout
        self.serve_models = serve_models
        self.max_json_depth = max_json_depth
        self.responses_websocket = responses_websocket
        self.stored = stored_responses.StoredResponses(
            store, secret=store_secret, owner=store_owner
        )
        # Protocols whose URL names the model (Gemini): matched by their codec.
        self.path_codecs = [get_codec(p) for p in PROTOCOLS if get_codec(p).model_in_path]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            path: str = scope["path"]
            if self.prefix:
                path = path[len(self.prefix) :] if path.startswith(self.prefix + "/") else ""
            protocol = _PATHS.get(path)
            if protocol is not None:
                await Exchange(self, get_codec(protocol), scope, receive, send).run()
                return
            if path in ("/v1/responses/compact", "/responses/compact"):
                ex = Exchange(self, get_codec("openai_responses"), scope, receive, send)
                await ex.run(lambda body: compaction.compact(ex, body))
                return
            for codec in self.path_codecs:
                call = codec.path_call(path)
                if call is not None:
                    await self._path_addressed(codec, call, scope, receive, send)
                    return
            if path in ("/v1/messages/count_tokens", "/messages/count_tokens"):
                ex = Exchange(self, get_codec("anthropic_messages"), scope, receive, send)
                await ex.run(lambda body: endpoints.count_tokens(ex, body))
                return
        elif scope["type"] == "http" and scope["method"] in ("GET", "DELETE"):
            path = scope["path"]
            if self.prefix:
                path = path[len(self.prefix) :] if path.startswith(self.prefix + "/") else ""
            stored = stored_endpoints.parse_path(path)
            if stored is not None:
                await stored_endpoints.endpoint(self, scope, receive, send, *stored)
                return
            if (
                scope["method"] == "GET"
                and self.serve_models
                and path in ("/v1/models", "/models", "/v1beta/models")
            ):
                body = await endpoints.list_models(
                    self, scope.get("headers", []), scope.get("query_string", b""), path
                )
                headers = [_JSON, (b"content-length", str(len(body)).encode())]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        elif scope["type"] == "lifespan":
            await self.app(scope, receive, self._lifespan_send(send))
            return
        elif scope["type"] == "websocket":
            path = scope["path"]
            if self.prefix:
                path = path[len(self.prefix) :] if path.startswith(self.prefix + "/") else ""
            if _PATHS.get(path) == "openai_responses":
                # Codex's Responses WebSocket: each frame is served by the HTTP path above.
                if not self.responses_websocket:
                    await websocket_responses.deny(scope, send)
                    return
                await websocket_responses.ResponsesSocket(self, scope, receive, send).run()
                return
        await self.app(scope, receive, send)

    async def _path_addressed(
        self, codec: Codec, call: PathCall, scope: Scope, receive: Receive, send: Send
    ) -> None:
        ex = Exchange(self, codec, scope, receive, send, call)
        if call.action == "count_tokens":
            await ex.run(lambda body: endpoints.count_tokens_in_path(ex, body))
        else:
            await ex.run()

    def _lifespan_send(self, send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                await self.aclose()
            await send(message)

        return wrapped

    async def aclose(self) -> None:
        """Close pooled upstream connections (done on lifespan shutdown)."""
        await self.http.aclose()
        if self.lean is not None:
            await self.lean.aclose()
        await self.stored.aclose()


class Exchange:
    """One request through the middleware."""

    def __init__(
        self,
        mw: ProxaiMiddleware,
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
        self.ttfb: float | None = None
        self.upstream: Upstream | None = None
        self.model: str | None = None
        self.stream = False
        self.dropped: list[str] = []
        self.usage: c.Usage | None = None
        self.response_model: str | None = None
        self.span = telemetry.start(client.name)
        self.secret: bytes | None = None  # the upstream key, masked in whatever we relay
        self.turn: stored_responses.Turn | None = None  # stored-Responses bookkeeping

    # ------------------------------------------------------------------ driving

    async def run(
        self, handler: Callable[[bytes], Coroutine[Any, Any, None]] | None = None
    ) -> None:
        limiter = self.mw.limiter
        acquired = False
        try:
            if limiter is not None:
                with anyio.move_on_after(self.mw.queue_timeout):
                    await limiter.acquire()
                    acquired = True
                if not acquired:
                    raise ProxyError(
                        429,
                        "the proxy is at its concurrency limit; retry shortly",
                        kind="rate_limit",
                        headers=[(b"retry-after", b"1")],
                    )
            body = await self._read_body()
            if body is None:
                return  # the client left before sending its body
            if checks.json_too_deep(body, self.mw.max_json_depth):
                raise ProxyError.invalid(
                    f"request body is nested deeper than {self.mw.max_json_depth} levels"
                )
            await (handler or self._dispatch)(body)
        except ProxyError as err:
            await self._fail(err)
        except ResponseAborted as abort:
            # Only dropping the connection tells the client its body is incomplete.
            logger.warning("proxai_asgi aborted a %s response: %s", self.client.name, abort)
            raise
        except RecursionError:
            # Only JSON nested deeper than the interpreter's recursion limit gets here.
            await self._fail(ProxyError.invalid("request body is nested too deeply"))
        except Exception:
            logger.exception("proxai_asgi failed while serving %s", self.client.name)
            await self._fail(ProxyError(500, "internal error in the proxy", kind="api_error"))
        finally:
            if self.turn is not None:
                with anyio.CancelScope(shield=True):
                    await self.turn.close()
            if acquired:
                limiter.release()  # type: ignore[union-attr]
            self._log()

    async def _dispatch(self, body: bytes) -> None:
        head = self._head(body)
        route = self.mw.router.select(head.model or "")
        if route is None:
            raise ProxyError(404, f"no upstream is configured for model {head.model!r}")
        self.upstream = up = route.upstream
        self.model = model = route.model_rewrite or head.model or ""
        self.stream = bool(head.stream)
        self.upstream_call = PathCall(model=model, stream=self.stream)
        if self.client.name == "openai_responses" and up.protocol != self.client.name:
            # previous_response_id expanded from the store; the answer recorded.
            body, self.turn = await stored_responses.prepare(self.mw.stored, self.scope, body)
        if self.client.name == "openai_responses" and compaction.mentions(body):
            # Codex compaction: our compaction items expanded, a trigger answered here.
            rewritten = await compaction.serve(self, up, body)
            if rewritten is None:
                return
            body = rewritten
        if up.protocol == self.client.name:
            if model != head.model and not self.client.model_in_path:
                body = rewrite_model(body, model)  # a path-addressed model is in the URL
            if up.inner:
                await self._inner_untouched(body)
            else:
                await self._watching_disconnect(self._passthrough(up, body))
        else:
            await self._watching_disconnect(self._translate(up, body, model))

    def _head(self, body: bytes) -> RequestHead:
        if self.call is not None:
            return RequestHead(model=self.call.model, stream=self.call.stream)
        try:
            head = _head_decoder.decode(body)
        except msgspec.ValidationError as exc:
            raise ProxyError.invalid(f"invalid request body: {exc}") from None
        except msgspec.DecodeError:
            raise ProxyError.invalid("request body is not valid JSON") from None
        if not head.model:
            raise ProxyError.invalid("model: field required", param="model")
        return head

    async def _read_body(self) -> bytes | None:
        limit = self.mw.max_body_size
        for k, v in self.scope.get("headers", []):
            if k == b"content-length" and v.isdigit() and int(v) > limit:
                raise ProxyError(
                    413, f"request body exceeds {limit} bytes", kind="request_too_large"
                )
            if k == b"content-type" and v.split(b";", 1)[0].strip().lower() in _NOT_JSON:
                # The providers answer a body labelled as something else with a 400,
                # whatever it holds; a request with no content-type is read as JSON.
                raise ProxyError.invalid(
                    f"Content-Type {v.decode('latin-1')!r} is not supported: send the "
                    "request body as application/json"
                )
        parts: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise ProxyError(
                    413, f"request body exceeds {limit} bytes", kind="request_too_large"
                )
            parts.append(chunk)
            if not message.get("more_body", False):
                return b"".join(parts)

    async def _watching_disconnect(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` and cancel it the moment the client goes away, which closes
        the upstream request with it.

        The watcher cancels a plain cancel scope. On asyncio it is a bare task: an
        anyio task group costs ~75 µs to open and close, a task ~9 µs, and this runs
        on every request."""
        error: ProxyError | ResponseAborted | None = None
        with anyio.CancelScope() as scope:

            async def watch() -> None:
                while (await self.receive())["type"] != "http.disconnect":
                    pass
                scope.cancel()

            async with _beside(watch):
                try:
                    await work
                except (ProxyError, ResponseAborted) as exc:
                    error = exc  # raised after the scope, unwrapped
        if error is not None:
            raise error

    # ------------------------------------------------------------ client output

    async def _start(self, status: int, headers: RawHeaders) -> None:
        self.started = True
        self.status = status
        up = self.upstream
        if up is not None and up.api_key and len(up.api_key) >= 12:
            # An upstream that quotes our key back (an error echoing the credential)
            # must not hand it to the client: masked with as many bytes, so that
            # content-length and framing still hold. (Keys too short to be real ones
            # would mask ordinary text.)
            self.secret = up.api_key.encode()
            headers = [(k, _mask(v, self.secret)) for k, v in headers]
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def _body(self, data: bytes, more: bool = True) -> None:
        if self.ttfb is None and data:
            self.ttfb = time.perf_counter() - self.t0
        if self.secret is not None:
            data = _mask(data, self.secret)
        if self.turn is not None:
            await self.turn.observe(self.status, data, more)
        await self._send({"type": "http.response.body", "body": data, "more_body": more})

    async def _json(self, status: int, body: bytes, extra: RawHeaders) -> None:
        headers = [_JSON, (b"content-length", str(len(body)).encode()), *extra]
        await self._start(status, headers)
        await self._body(body, more=False)

    async def _fail(self, err: ProxyError) -> None:
        if self.started:
            return  # a started stream ends through its encoder; nothing else to say
        await self._json(err.status, self.client.encode_error(err), err.headers)

    def _translation_headers(
        self, upstream_resp: UpstreamResponse, error: ProxyError | None = None
    ) -> RawHeaders:
        headers = client_headers_from_upstream(upstream_resp.headers, passthrough=False)
        # The upstream's limits in the client's scheme, so the client backs off (or
        # stops) as its own provider would have it.
        exhausted = error is not None and error.code == "insufficient_quota"
        headers += self.client.rate_limit_headers(headers, exhausted=exhausted)
        if self.dropped:
            headers.append((DROPPED_HEADER, ", ".join(self.dropped).encode()))
        return headers

    # ---------------------------------------------------------------- upstreams

    def _open(
        self, up: Upstream, body: bytes, *, passthrough: bool
    ) -> AbstractAsyncContextManager[UpstreamResponse]:
        headers = upstream_headers(
            self.client_headers(),
            up,
            self.client.name,
            passthrough=passthrough,
            stream=self.stream,
        )
        if up.inner:
            return open_inner(self.mw.app, self.scope, up, headers, body, self.upstream_call)
        url = up.url_for(self.upstream_call)
        lean = self.mw.lean
        if lean is not None and lean.serves(up, url):
            return lean.open(up, headers, body, raw=passthrough, url=url)
        return self.mw.http.open(up, headers, body, raw=passthrough, url=url)

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

    async def _pump(
        self,
        resp: UpstreamResponse,
        up: Upstream,
        on_chunk: Callable[[bytes], Awaitable[bool]],
        tool_open: Callable[[], bool] = _never,
    ) -> None:
        """Feed the upstream body to ``on_chunk`` (which returns True to stop early),
        failing with 504 when the upstream stalls: ``stream_idle_timeout`` anywhere,
        or the shorter ``tool_stall_timeout`` while a tool call's arguments are half
        sent (``tool_open``).

        One watchdog task per stream wakes only at possible deadlines, so the cost
        per chunk is a clock read, not a timer (a per-chunk ``fail_after`` cost
        several µs on every token)."""
        # read_timeout bounds every wait for upstream bytes, here as in httpx.
        idle = min(up.stream_idle_timeout, up.read_timeout)
        tool_idle = min(idle, up.tool_stall_timeout)
        clock = _loop_clock()
        last = clock()
        stalled: float | None = None
        error: ProxyError | None = None
        with anyio.CancelScope() as scope:

            async def watchdog() -> None:
                nonlocal stalled
                while True:
                    limit = tool_idle if tool_open() else idle
                    now = clock()
                    if now - last >= limit:
                        stalled = limit
                        scope.cancel()
                        return
                    # Wake by this deadline, or within tool_idle of now: a chunk that
                    # arrives meanwhile may open a tool call and shorten the limit.
                    await anyio.sleep(min(last + limit - now, tool_idle) + 0.001)

            async with _beside(watchdog):
                try:
                    async for chunk in resp:
                        last = clock()
                        if await on_chunk(chunk):
                            break
                except ProxyError as exc:
                    error = exc
        if stalled is not None:
            where = "in the middle of tool-call arguments" if stalled != idle else "mid-stream"
            raise ProxyError(504, f"upstream sent nothing for {stalled:g}s {where}", kind="timeout")
        if error is not None:
            raise error

    def _relay(self) -> PassthroughRelay:
        async def body(data: bytes, more: bool) -> None:
            await self._body(data, more)

        return PassthroughRelay(self.client, self._start, body)

    async def _inner_untouched(self, body: bytes) -> None:
        """Same protocol, wrapped app as upstream: hand the request down unchanged,
        and relay what it sends through the same pass-through ending as HTTP."""
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await self.receive()

        scope = dict(self.scope)
        scope["headers"] = [
            (k, v) for k, v in self.scope.get("headers", []) if k != b"content-length"
        ] + [(b"content-length", str(len(body)).encode())]
        relay = self._relay()
        ended = False

        async def send(message: Message) -> None:
            nonlocal ended
            kind = message["type"]
            if kind == "http.response.start":
                headers = [(bytes(k).lower(), bytes(v)) for k, v in message.get("headers", [])]
                await relay.start(int(message["status"]), headers)
            elif kind == "http.response.body" and not ended:
                data = message.get("body", b"")
                if data:
                    await relay.chunk(data)
                if not message.get("more_body", False):
                    ended = True
                    await relay.end()
            else:
                await self._send(message)

        try:
            await self.mw.app(scope, replay, send)
        except (ProxyError, ResponseAborted):
            raise
        except Exception:
            logger.exception("inner app raised while serving %s", self.client.name)
            await relay.fail(ProxyError(502, "inner app failed", kind="bad_gateway"))
            return
        if not ended:
            await relay.fail(
                ProxyError(502, "inner app sent no complete response", kind="bad_gateway")
            )

    async def _passthrough(self, up: Upstream, body: bytes) -> None:
        """Same protocol: bytes in, bytes out, streamed as they arrive."""
        async with self._open(up, body, passthrough=True) as resp:
            relay = self._relay()
            await relay.start(
                resp.status, client_headers_from_upstream(resp.headers, passthrough=True)
            )

            async def forward(chunk: bytes) -> bool:
                await relay.chunk(chunk)
                return False

            try:
                await self._pump(resp, up, forward)
            except ProxyError as err:
                await relay.fail(err)
                return
            await relay.end()

    async def _translate(self, up: Upstream, body: bytes, model: str) -> None:
        target = get_codec(up.protocol)
        report = TranslationReport(up.lossy)
        creq = self.client.decode_request(body, report)
        checks.check_request(creq, lossy=up.lossy)
        creq.model = model
        creq.stream = self.stream  # the same as the body's, or what the URL says
        wrapped: frozenset[str] = frozenset()
        if self.client.name == "openai_responses" and not (
            target.supports_custom_tools
            and (target.name != "openai_chat_completions" or up.native_custom_tools)
        ):
            wrapped = custom_tools.wrap(creq)
        upstream_body = target.encode_request(creq, report, up.options())
        if self.turn is not None:  # expanded from the store, echoed in the answer
            creq.previous_response_id = self.turn.previous_id
        self.dropped = report.dropped
        if report.dropped:
            logger.debug(
                "dropped fields %s (%s -> %s)", report.dropped, self.client.name, target.name
            )

        async with self._open(up, upstream_body, passthrough=False) as resp:
            if not 200 <= resp.status < 300:
                err = target.decode_error(resp.status, await resp.read(MAX_ERROR_BODY))
                err.headers = self._translation_headers(resp, err)
                raise err
            if creq.stream:
                await self._translate_stream(target, creq, resp, up, wrapped)
            else:
                cres = await self._whole_response(target, resp, up)
                self.usage, self.response_model = cres.usage, cres.model
                if wrapped:
                    custom_tools.unwrap_response(cres, wrapped)
                await self._json(
                    200, self.client.encode_response(cres, creq), self._translation_headers(resp)
                )

    async def _whole_response(
        self, target: Codec, resp: UpstreamResponse, up: Upstream
    ) -> c.Response:
        if not resp.is_event_stream:
            return target.decode_response(await resp.read(MAX_JSON_BODY))
        sse = SSEDecoder()
        dec = target.stream_decoder()
        events: list[c.StreamEvent] = []

        async def collect(chunk: bytes) -> bool:
            for e in sse.decode(chunk):
                events.extend(dec.feed(e))
            return False

        await self._pump(resp, up, collect)
        for e in sse.flush():
            events.extend(dec.feed(e))
        events.extend(dec.close())
        return fold(events)

    async def _translate_stream(
        self,
        target: Codec,
        creq: c.Request,
        resp: UpstreamResponse,
        up: Upstream,
        wrapped: frozenset[str],
    ) -> None:
        enc = self.client.stream_encoder(creq)
        unwrap = custom_tools.StreamUnwrapper(wrapped) if wrapped else None
        whole: c.Response | None = None
        if not resp.is_event_stream:
            # The upstream ignored stream=true and answered in one piece: decoded before
            # the client's stream starts, so a body that is no answer is a plain 502.
            whole = target.decode_response(await resp.read(MAX_JSON_BODY))
        await self._start(200, [*_SSE_HEADERS, *self._translation_headers(resp)])
        done = False
        open_tools: set[int] = set()

        def emit(events: list[c.StreamEvent], out: bytearray) -> bool:
            for ev in events:
                if isinstance(ev, c.BlockStart) and ev.kind == "tool_call":
                    open_tools.add(ev.index)
                elif isinstance(ev, c.BlockStop):
                    open_tools.discard(ev.index)
                for e in unwrap.feed(ev) if unwrap else (ev,):
                    out += enc.encode(e)
                if isinstance(ev, c.MessageStart):
                    self.response_model = ev.model
                elif isinstance(ev, c.Finish):
                    self.usage = ev.usage
                    return True
                elif isinstance(ev, c.StreamError):
                    return True
            return False

        out = bytearray()
        try:
            if whole is not None:
                done = emit(unfold(whole), out)
            else:
                sse = SSEDecoder()
                dec = target.stream_decoder()

                async def translate(chunk: bytes) -> bool:
                    nonlocal done
                    for e in sse.decode(chunk):
                        if emit(dec.feed(e), out):
                            done = True
                            break
                    if out:
                        await self._body(bytes(out))
                        out.clear()
                    return done

                await self._pump(resp, up, translate, lambda: bool(open_tools))
                if not done:
                    for e in sse.flush():
                        if emit(dec.feed(e), out):
                            done = True
                            break
                if not done:
                    done = emit(dec.close(), out)
        except ProxyError as err:
            out += enc.encode(c.StreamError(status=err.status, kind=err.kind, message=err.message))
        except Exception:
            logger.exception("stream translation failed (%s -> %s)", target.name, self.client.name)
            out += enc.encode(
                c.StreamError(status=500, kind="api_error", message="internal error in the proxy")
            )
        if out:
            await self._body(bytes(out))
        await self._body(b"", more=False)

    # ------------------------------------------------------------------ logging

    def _log(self) -> None:
        up = self.upstream
        usage = self.usage
        telemetry.finish(
            self.span,
            upstream_protocol=up.protocol if up else None,
            request_model=self.model,
            response_model=self.response_model,
            status=self.status,
            input_tokens=usage.input_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
            stream=self.stream,
        )
        if not logger.isEnabledFor(logging.INFO):
            return
        logger.info(
            "exchange client=%s upstream=%s pair=%s model=%s stream=%s status=%s "
            "duration_ms=%.1f ttfb_ms=%s input_tokens=%s output_tokens=%s dropped=%s",
            self.client.name,
            up.label if up else "-",
            f"{self.client.name}->{up.protocol}" if up else "-",
            self.model or "-",
            self.stream,
            self.status,
            (time.perf_counter() - self.t0) * 1000,
            f"{self.ttfb * 1000:.1f}" if self.ttfb is not None else "-",
            usage.input_tokens if usage else "-",
            usage.output_tokens if usage else "-",
            ",".join(self.dropped) or "-",
        )
