"""The wrapped app as the route's only target, in the client's own protocol: the
request goes down the ASGI chain as it came (a routed model aside) and what the app
sends is relayed as it sends it. The exchange around the bytes is ours
(``passthrough.PassthroughRelay``): an error page becomes the client's error shape, a
stream missing its terminal event gets the protocol's terminal error, a cut plain body
aborts the connection. Every other target goes through ``attempts``."""

from __future__ import annotations

import logging

from ..errors import ProxyError, ResponseAborted
from ..transport.upstream import Message, without_contradicted_length
from .exchange import Exchange, ask_usage, usage_sink
from .passthrough import PassthroughRelay

logger = logging.getLogger("proxai_asgi")


async def relay_inner(ex: Exchange, body: bytes) -> None:
    """The wrapped app as upstream: the request goes down unchanged (asked for its
    usage when accounting needs it: ``exchange.ask_usage``), and what the app sends
    goes through the same pass-through ending as HTTP."""
    body, strip = ask_usage(ex, body)
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
    relay = PassthroughRelay(ex.client, ex.start, ex.body, usage_sink(ex), strip)
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
