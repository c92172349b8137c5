"""Same protocol on both sides: the request and answer bytes pass unchanged (a routed
model aside), streamed as they arrive, over either transport. The exchange around the
bytes is ours (``passthrough.PassthroughRelay``): an error page becomes the client's
error shape, a stream missing its terminal event gets the protocol's terminal error,
a cut plain body aborts the connection."""

from __future__ import annotations

import logging

from ..errors import ProxyError, ResponseAborted
from ..routing import Upstream
from ..transport.pumping import pump
from ..transport.upstream import Message, client_headers_from_upstream, without_contradicted_length
from .exchange import Exchange
from .passthrough import PassthroughRelay

logger = logging.getLogger("proxai_asgi")


def _relay(ex: Exchange) -> PassthroughRelay:
    return PassthroughRelay(ex.client, ex.start, ex.body)


async def relay(ex: Exchange, up: Upstream, body: bytes) -> None:
    """An HTTP upstream: bytes in, bytes out."""
    async with ex.open(up, body, passthrough=True) as resp:
        relay = _relay(ex)
        await relay.start(resp.status, client_headers_from_upstream(resp.headers, passthrough=True))

        async def forward(chunk: bytes) -> bool:
            await relay.chunk(chunk)
            return False

        try:
            await pump(resp, up, forward)
        except ProxyError as err:
            await relay.fail(err)
            return
        await relay.end()


async def relay_inner(ex: Exchange, body: bytes) -> None:
    """The wrapped app as upstream: the request goes down unchanged, and what the app
    sends goes through the same pass-through ending as HTTP."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await ex.receive()

    scope = dict(ex.scope)
    scope["headers"] = [
        (k, v) for k, v in ex.scope.get("headers", []) if k != b"content-length"
    ] + [(b"content-length", str(len(body)).encode())]
    relay = _relay(ex)
    ended = False

    async def send(message: Message) -> None:
        nonlocal ended
        kind = message["type"]
        if kind == "http.response.start":
            headers = [(bytes(k).lower(), bytes(v)) for k, v in message.get("headers", [])]
            await relay.start(int(message["status"]), without_contradicted_length(headers))
        elif kind == "http.response.body" and not ended:
            data = message.get("body", b"")
            if data:
                await relay.chunk(data)
            if not message.get("more_body", False):
                ended = True
                await relay.end()
        else:
            await ex.passthrough_send(message)

    try:
        await ex.mw.app(scope, replay, send)
    except (ProxyError, ResponseAborted):
        raise
    except Exception:
        logger.exception("inner app raised while serving %s", ex.client.name)
        await relay.fail(ProxyError(502, "inner app failed", kind="bad_gateway"))
        return
    if not ended:
        await relay.fail(ProxyError(502, "inner app sent no complete response", kind="bad_gateway"))
