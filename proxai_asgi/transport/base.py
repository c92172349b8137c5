"""The transport seam: one interface to open a request on a target and get an upstream
response, and the chooser that picks which transport reaches a target.

The lean HTTP/1.1 pool (``http1.Http1Pool``), the httpx client
(``upstream.HttpTransport``) and the wrapped app (``inner_transport.InnerTransport``)
implement ``Transport``; routing tries targets through it without knowing which one."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .inner_transport import InnerTransport

if TYPE_CHECKING:
    from ..codec import PathCall
    from ..routing import Upstream
    from .http1 import Http1Pool
    from .upstream import ASGIApp, HttpTransport, RawHeaders, Scope, UpstreamResponse


@runtime_checkable
class Transport(Protocol):
    def serves(self, upstream: Upstream, url: str | None = None) -> bool:
        """Whether this transport can reach ``upstream`` (at ``url``)."""
        ...

    def open(
        self,
        upstream: Upstream,
        headers: RawHeaders,
        body: bytes,
        *,
        raw: bool,
        url: str | None = None,
        method: bytes = b"POST",
    ) -> AbstractAsyncContextManager[UpstreamResponse]:
        """Send the request (to ``url``, default the upstream's); yields once the
        answer's headers arrived. ``raw`` keeps the body's content-encoding."""
        ...


class Transports:
    """The transports of one middleware. The wrapped app takes its ``inner`` upstreams;
    of the network transports the first that serves a target gets it (the lean pool
    when there is one, else httpx, which serves every HTTP upstream)."""

    __slots__ = ("_app", "_network")

    def __init__(self, app: ASGIApp, http: HttpTransport, lean: Http1Pool | None) -> None:
        self._app = app
        self._network: tuple[Transport, ...] = (http,) if lean is None else (lean, http)

    def choose(
        self, upstream: Upstream, url: str | None, scope: Scope, call: PathCall | None
    ) -> Transport:
        """The transport that reaches ``upstream`` for this request (``scope``, ``call``
        are what the wrapped app is called with)."""
        if upstream.inner:
            return InnerTransport(self._app, scope, call)
        for transport in self._network:
            if transport.serves(upstream, url):
                return transport
        raise LookupError(f"no transport reaches {upstream.label}")
