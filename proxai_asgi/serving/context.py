"""What a responder is given to serve one request: a small context the middleware
builds once, so that no responder imports the middleware (the import graph stays a
tree of layers) and a responder reads only what it needs: the wrapped app, the
routes, the transports, the stored conversations, the routing state and the limits."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import anyio

    from ..codec import PathCall
    from ..responses_state.stored_responses import StoredResponses
    from ..routing import Router, Upstream
    from ..routing.health import RoutingState
    from ..search.backend import Searcher
    from ..transport.base import Transports
    from ..transport.upstream import (
        ASGIApp,
        HttpTransport,
        RawHeaders,
        Scope,
        UpstreamResponse,
    )
    from ..usage.accounting import Accounting


@dataclass(slots=True, eq=False)
class Context:
    app: ASGIApp  # the wrapped app: other paths, and the upstream of ``inner_app`` routes
    router: Router
    stored: StoredResponses
    http: HttpTransport  # the httpx side (side endpoints of the stored Responses)
    transports: Transports  # which transport reaches an upstream
    limiter: anyio.Semaphore | None
    max_body_size: int
    body_timeout: float | None
    max_json_depth: int
    queue_timeout: float
    routing: RoutingState  # cooldowns, key health and session bindings (``routing.health``)
    accounting: Accounting  # ledger, metrics, prices and budgets (``usage.accounting``)
    search: Searcher  # web searches the proxy runs itself (``serving.searching``)

    def open_upstream(
        self,
        scope: Scope,
        up: Upstream,
        headers: RawHeaders,
        body: bytes,
        call: PathCall | None,
        *,
        raw: bool,
        get: str | None = None,
    ) -> AbstractAsyncContextManager[UpstreamResponse]:
        """The request through the transport ``transports`` chooses for ``up``.
        ``get`` asks an HTTP upstream for that URL (a side endpoint) instead of posting."""
        if get is not None:
            url: str | None = get
            method = b"GET"
        else:
            url = None if up.inner else up.url_for(call)
            method = b"POST"
        transport = self.transports.choose(up, url, scope, call)
        return transport.open(up, headers, body, raw=raw, url=url, method=method)
