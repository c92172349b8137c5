from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from proxai_asgi import ProxaiMiddleware, Route, Upstream
from proxai_asgi.codec import ProtocolName
from tests.helpers.servers import FakeUpstream, serve

PATHS = {
    "openai_chat_completions": "/chat/completions",
    "openai_responses": "/responses",
    "anthropic_messages": "/v1/messages",
}


async def _app_404(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"inner"})


class Stack:
    """Builds proxies in front of a fake upstream, over HTTP or as the inner app."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack

    def upstream_http(self, fake: FakeUpstream) -> str:
        return self._stack.enter_context(serve(fake))

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
        mw_options = {k: options.pop(k) for k in ("max_body_size", "prefix") if k in options}
        if inner:
            up = Upstream.inner_app(protocol, **options)
            app = ProxaiMiddleware(
                fake, routes=[Route("*", up, model_rewrite)], **mw_options
            )
        else:
            base = self.upstream_http(fake)
            if protocol != "anthropic_messages":
                base += "/v1"
            up = Upstream(protocol, base, api_key, **options)
            app = ProxaiMiddleware(_app_404, routes=[Route("*", up, model_rewrite)], **mw_options)
        return self._stack.enter_context(serve(app))


@pytest.fixture
def stack() -> Iterator[Stack]:
    with ExitStack() as es:
        yield Stack(es)


@pytest.fixture
def fake() -> FakeUpstream:
    return FakeUpstream()


Factory = Callable[..., str]
