"""The ASGI glue: recognise an LLM request and hand it to the piece that answers it.

A pure ASGI middleware in the manner of Starlette's GZipMiddleware: every exchange
gets a small responder (``serving.exchange.Exchange``) that owns the client's ``send``
and reads the middleware only through ``serving.context.Context``; which responder
answers is decided here (``serving.generate`` relays one protocol or translates
between two, ``serving.endpoints`` answers token counts and model listings). Which
paths are whose comes from the codec registry; nothing here knows a wire format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

from . import checks
from .codec import Action, Codec
from .errors import ProxyError
from .metrics import Metrics, open_metrics
from .protocols import all_codecs, model_listing
from .responses_state import (
    stored_endpoints,
    stored_responses,
    websocket_responses,
)
from .routing import Route, Router, Upstream
from .routing.state import open_routing_state
from .search import SearchBackend, Searcher
from .serving import alpha_search, endpoints
from .serving.context import Context
from .serving.exchange import JSON_HEADER, Exchange, Handler
from .serving.generate import compact, generate
from .serving.origins import OriginPolicy, preflight_headers, with_cors
from .store import ResponseStore
from .transport.base import Transports
from .transport.upstream import (
    ASGIApp,
    HttpTransport,
    Message,
    Receive,
    Scope,
    Send,
)
from .usage import Accounting, Ledger, PriceTable, open_ledger
from .usage.budgets import Budget, Budgets, open_budgets
from .usage.prices import load_prices

if TYPE_CHECKING:
    import httpx  # imported on first use (upstream.py), as is the lean pool (http1.py)

DEFAULT_MAX_BODY = 32 * 1024 * 1024
DEFAULT_BODY_TIMEOUT = 30.0
_ORIGIN_REFUSED = (
    "this proxy does not serve web pages of other origins; its operator can list the "
    "page's origin in allowed_origins"
)


_HANDLERS: dict[Action, Handler] = {
    "generate": generate,
    "count_tokens": endpoints.count_tokens,
    "compact": compact,
    "search": alpha_search.search,
}


class ProxaiMiddleware:
    """Serve the LLM protocols in front of ``app``, translating to ``upstream`` (or to
    the upstream of the first ``routes`` entry whose model glob matches).

    Upstream requests go through a lean built-in HTTP/1.1 pool (``http://`` and
    ``https://``, certificates verified as httpx verifies them; about 0.5 ms less per
    request than httpx). Upstreams an environment proxy applies to, a given
    ``http_client``, event loops other than asyncio, and ``lean_http=False`` (needed
    when tests patch httpx, e.g. with respx) use httpx.

    ``max_connections`` bounds the pooled upstream connections; ``max_concurrency``
    bounds exchanges in flight (excess requests queue for ``queue_timeout`` seconds,
    then get a 429 with ``retry-after``); a slot is taken only once the body is in, and a
    body not received within ``body_timeout`` seconds gets a 408, so clients that never
    finish their bodies hold no slot. Bodies over ``max_body_size`` bytes get a 413
    and bodies nesting JSON deeper than ``max_json_depth`` a 400, before any other work.

    Browser pages (``origins.py``): a request to an LLM path from a page of another
    origin gets a 403 unless that origin is in ``allowed_origins`` ("*": any), which
    then gets the CORS headers and preflight answers it needs. Clients that send no
    ``Origin`` (CLIs, SDKs) are not concerned.

    A WebSocket on the Responses path is served as Codex's Responses WebSocket
    transport (``responses_websocket=False`` refuses it with a 426 so clients fall back
    to HTTP). A connection idle for ``websocket_idle_timeout`` seconds is closed (1000);
    past ``websocket_max_connections`` open ones, a handshake gets a 503; what a
    connection keeps to continue its last response is JSON bytes, at most
    ``websocket_max_history`` (default ``max_body_size``). Requests to other paths,
    other methods, other websockets and lifespan reach ``app`` untouched. ``prefix``
    serves the LLM paths under a mount point (``/llm/v1/...``).

    ``store`` keeps Responses answers for ``previous_response_id``, retrieve and
    delete over stateless upstreams (``stored_responses.py``): None or "memory" (the
    default), "sqlite:///path", "redis://host:port/db", "off", or a store object;
    ``store_owner`` (scope -> owner id) replaces the keyed hash of the client's
    credential, whose key is ``store_secret`` (when None: a key the SQLite or Redis
    store keeps itself, created once; random per process for memory). Over a
    Responses upstream reached with ``api_key``, stored ids are reachable only by
    the client that created them (``stored_claims.py``).

    The account of every exchange (``docs/observability.md``): ``metrics=True`` serves
    ``GET {prefix}/metrics`` (``metrics/``); ``ledger`` keeps one record per exchange,
    priced by ``prices``; ``budgets`` refuse spent owners or routes with a 429 (``usage/``).

    ``search`` (``async def search(query, *, max_results=5) -> list[SearchResult]``, or
    a ``Searcher``) runs the web searches of clients whose upstream has no search of
    its own (``serving/searching.py``); without it they are answered as unavailable.
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
        lean_http: bool = True,
        responses_websocket: bool = True,
        store: str | ResponseStore | None = None,
        store_owner: stored_responses.OwnerFunction | None = None,
        store_secret: str | bytes | None = None,
        body_timeout: float | None = DEFAULT_BODY_TIMEOUT,
        allowed_origins: Sequence[str] = (),
        websocket_idle_timeout: float | None = websocket_responses.DEFAULT_IDLE_TIMEOUT,
        websocket_max_connections: int | None = websocket_responses.DEFAULT_MAX_CONNECTIONS,
        websocket_max_history: int | None = None,
        metrics: bool | Metrics = False,
        ledger: str | Ledger | None = None,
        prices: str | PriceTable | None = None,
        budgets: Sequence[Budget] | Budgets = (),
        cost_header: bool = False,
        search: SearchBackend | Searcher | None = None,
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
            from .transport.http1 import Http1Pool

            self.lean = Http1Pool(max_connections)
        self.transports = Transports(app, self.http, self.lean)
        # Past max_concurrency exchanges, requests wait up to queue_timeout for a
        # slot, then get a 429 in their own protocol's shape.
        self.limiter = anyio.Semaphore(max_concurrency) if max_concurrency else None
        self.queue_timeout = queue_timeout
        self.serve_models = serve_models
        self.max_json_depth = max_json_depth
        self.responses_websocket = responses_websocket
        self.body_timeout = body_timeout
        self.origins = OriginPolicy(allowed_origins)
        self.sockets = websocket_responses.SocketLimits(
            idle_timeout=websocket_idle_timeout,
            max_connections=websocket_max_connections,
            max_history=max_body_size if websocket_max_history is None else websocket_max_history,
        )
        self.codecs: tuple[Codec, ...] = tuple(all_codecs())
        self.metrics = open_metrics(metrics)
        self.listing_paths = frozenset(p for codec in self.codecs for p in codec.listing_paths)
        usage_ledger = open_ledger(ledger)
        self.stored = stored_responses.StoredResponses(
            store, secret=store_secret, owner=store_owner, keeper=usage_ledger
        )
        # What the responders read (``serving.context``), never the middleware itself.
        self.context = Context(
            app,
            self.router,
            self.stored,
            self.http,
            self.transports,
            self.limiter,
            max_body_size,
            body_timeout,
            max_json_depth,
            queue_timeout,
            open_routing_state(self.stored.store),
            Accounting(
                ledger=usage_ledger,
                metrics=self.metrics,
                prices=load_prices(prices),
                budgets=open_budgets(budgets, self.stored.store),
                cost_header=cost_header,
            ),
            search if isinstance(search, Searcher) else Searcher(search),
        )

    def _local(self, scope: Scope) -> str:
        """The request path below the mount point ("" when outside it)."""
        path: str = scope["path"]
        if self.prefix:
            return path[len(self.prefix) :] if path.startswith(self.prefix + "/") else ""
        return path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http" and scope["method"] == "POST":
            path = self._local(scope)
            for codec in self.codecs:
                found = codec.serves(path)
                if found is not None:
                    admitted = await self._admit(scope, send, codec)
                    if admitted is None:
                        return
                    ex = Exchange(self.context, codec, scope, receive, admitted, found.call)
                    await ex.run(_HANDLERS[found.action])
                    return
        elif kind == "http" and scope["method"] in ("GET", "DELETE"):
            path = self._local(scope)
            if path == "/metrics" and self.metrics is not None and scope["method"] == "GET":
                return await _scrape(self.metrics, scope, send)
            stored = stored_endpoints.parse_path(path)
            if stored is not None:
                admitted = await self._admit(scope, send, stored_endpoints.stateful_codec())
                if admitted is not None:
                    await stored_endpoints.endpoint(self.context, scope, receive, admitted, *stored)
                return
            if scope["method"] == "GET" and self._lists_models(path):
                admitted = await self._admit(scope, send, self._listing(scope, path))
                if admitted is not None:
                    await self._models(scope, admitted, path)
                return
        elif kind == "http" and scope["method"] == "OPTIONS" and _has_origin(scope):
            # A CORS preflight for an LLM path: answered here, never by ``app``.
            shape = self._shape(scope, self._local(scope))
            if shape is not None:
                await _preflight(self.origins, scope, send, shape)
                return
        elif kind == "lifespan":
            await self.app(scope, receive, self._lifespan_send(send))
            return
        elif kind == "websocket":
            path = self._local(scope)
            for codec in self.codecs:
                found = codec.serves(path)
                if found is not None and found.action == "generate" and codec.serves_websocket:
                    # Codex's Responses WebSocket: each frame is served by the HTTP path.
                    if not self.responses_websocket:
                        await websocket_responses.deny(scope, send)
                        return
                    if not self.origins.admit(scope)[0]:
                        await websocket_responses.refuse(
                            scope, send, 403, "origin_not_allowed", _ORIGIN_REFUSED
                        )
                        return
                    await self.sockets.serve(self, scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _admit(self, scope: Scope, send: Send, shape: Codec) -> Send | None:
        """``send`` for a request the origin check admits (with the CORS headers a
        listed origin needs); None once a refused one has had its 403."""
        allowed, cors = self.origins.admit(scope)
        if not allowed:
            err = ProxyError(403, _ORIGIN_REFUSED, kind="permission", code="origin_not_allowed")
            await _json(send, 403, shape.encode_error(err))
            return None
        return send if cors is None else with_cors(send, cors)

    def _lists_models(self, path: str) -> bool:
        return self.serve_models and path in self.listing_paths

    def _listing(self, scope: Scope, path: str) -> Codec:
        return model_listing(path, scope.get("headers", []), scope.get("query_string", b""))

    def _shape(self, scope: Scope, path: str) -> Codec | None:
        """The codec whose error shape an LLM path speaks; None for ``app``'s paths."""
        for codec in self.codecs:
            if codec.serves(path) is not None:
                return codec
        if stored_endpoints.parse_path(path) is not None:
            return stored_endpoints.stateful_codec()
        return self._listing(scope, path) if self._lists_models(path) else None

    async def _models(self, scope: Scope, send: Send, path: str) -> None:
        body = await endpoints.list_models(
            self.context, scope.get("headers", []), scope.get("query_string", b""), path
        )
        await _json(send, 200, body)

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
        await self.context.routing.aclose()
        await self.context.accounting.aclose()
        await self.context.search.aclose()


async def _preflight(origins: OriginPolicy, scope: Scope, send: Send, shape: Codec) -> None:
    allowed, cors = origins.admit(scope)
    if not allowed:
        err = ProxyError(403, _ORIGIN_REFUSED, kind="permission", code="origin_not_allowed")
        await _json(send, 403, shape.encode_error(err))
        return
    headers = [] if cors is None else preflight_headers(scope, cors)
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _scrape(metrics: Metrics, scope: Scope, send: Send) -> None:
    accept = next((v for k, v in scope.get("headers", ()) if k == b"accept"), b"")
    body, content_type = metrics.scrape(accept.decode("latin-1"))
    headers = [(b"content-type", content_type.encode()), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _has_origin(scope: Scope) -> bool:
    return any(k == b"origin" for k, _ in scope.get("headers", ()))


async def _json(send: Send, status: int, body: bytes) -> None:
    headers = [JSON_HEADER, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
