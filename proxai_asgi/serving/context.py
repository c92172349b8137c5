"""What a responder reads of the middleware serving it: a small context, so that no
responder imports the middleware (the import graph stays a tree of layers) and the
routing work can hand responders something else. ``ProxaiMiddleware`` is one."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import anyio

    from ..codec import PathCall
    from ..responses_state.stored_responses import StoredResponses
    from ..routing import Router, Upstream
    from ..transport.base import Transports
    from ..transport.upstream import (
        ASGIApp,
        HttpTransport,
        RawHeaders,
        Scope,
        UpstreamResponse,
    )


class Context(Protocol):
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
        """The upstream request through the transport ``transports`` chooses for ``up``."""
        ...
