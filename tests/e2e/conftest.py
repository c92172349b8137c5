from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from proxai_asgi import ProxaiMiddleware, Route, Upstream
from proxai_asgi.codec import ProtocolName
from proxai_asgi.transport.upstream import Receive, Scope, Send
from tests.helpers.servers import FakeUpstream, serve, stop_all


async def _app_404(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"inner"})


class Switchboard:
    """One long-lived ASGI upstream that forwards to the current test's fake, so the
    uvicorn servers (the slow part) are started once per configuration, not per test."""

    def __init__(self) -> None:
        self.current = FakeUpstream()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.current(scope, receive, send)


class Stack:
    """Proxies in front of the switchboard, over HTTP or as the inner app; cached by
    configuration for the whole session."""

    def __init__(self, es: ExitStack) -> None:
        self._es = es
        self.board = Switchboard()
        self._upstream_url: str | None = None
        self._proxies: dict[tuple[Any, ...], str] = {}

    def upstream_http(self) -> str:
        if self._upstream_url is None:
            self._upstream_url = self._es.enter_context(serve(self.board))
        return self._upstream_url

    def proxy(
        self,
        fake: FakeUpstream,
        protocol: ProtocolName,
        *,
        inner: bool = False,
        api_key: str | None = None,
        model_rewrite: str | None = None,
        **options: Any,
    ) -> str:
        assert fake is self.board.current
        key = (protocol, inner, api_key, model_rewrite, tuple(sorted(options.items())))
        url = self._proxies.get(key)
        if url is None:
            mw_options = {
                k: options.pop(k) for k in ("max_body_size", "prefix", "lean_http") if k in options
            }
            server = options.pop("server", "asyncio")  # the proxy's: uvicorn on asyncio or uvloop
            if inner:
                up = Upstream.inner_app(protocol, **options)
                app = ProxaiMiddleware(
                    self.board, routes=[Route("*", up, model_rewrite)], **mw_options
                )
            else:
                base = self.upstream_http()
                if protocol in ("openai_chat_completions", "openai_responses"):
                    base += "/v1"  # as the OpenAI SDKs take it; Anthropic and Google: none
                up = Upstream(protocol, base, api_key, **options)
                # The default transport (the lean pool) unless a test asks for
                # httpx: the fault matrix and the direct-construction tests cover it.
                app = ProxaiMiddleware(
                    _app_404, routes=[Route("*", up, model_rewrite)], **mw_options
                )
            url = self._proxies[key] = self._es.enter_context(serve(app, server=server))
        return url


@pytest.fixture(scope="session")
def _stack() -> Iterator[Stack]:
    with ExitStack() as es:
        yield Stack(es)
        stop_all()  # the session's servers stop side by side; the stack joins them


@pytest.fixture
def stack(_stack: Stack, fake: FakeUpstream) -> Stack:
    return _stack


@pytest.fixture
def fake(_stack: Stack) -> FakeUpstream:
    _stack.board.current = FakeUpstream()
    return _stack.board.current
