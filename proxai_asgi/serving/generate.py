"""The generation responder: a request routed, then relayed (one protocol on both
sides) or translated (two), with what the Responses protocol promises on the way
(the stored conversation, compaction)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocols import holds_search_placeholder
from ..responses_state import compaction, stored_claims, stored_responses
from ..transport.pumping import until_disconnect
from . import attempts, failover
from .exchange import admit
from .model_rewrite import rewrite_model
from .relaying import relay_inner

if TYPE_CHECKING:
    from .exchange import Exchange


async def generate(ex: Exchange, body: bytes) -> None:
    """A generation request: routed, then relayed or translated on the route's targets
    until one answers (``failover``)."""
    head = ex.head(body)
    route = ex.route(head)
    await admit(ex, route, body)
    up = route.upstream
    if ex.client.stateful:
        await ex.mw.stored.ready()
    if ex.client.stateful and up.protocol != ex.client.name:
        # previous_response_id expanded from the store; the answer recorded.
        body, ex.turn = await stored_responses.prepare(ex.mw.stored, ex.scope, body, ex.client)
    elif ex.client.stateful and stored_claims.server_keyed(up):
        # The upstream keeps state but sees only our key: the proxy checks who owns
        # the response continued, and records who owns the answer.
        ex.turn = await stored_claims.guard(ex.mw.stored, ex.scope, body, up)
    if ex.client.stateful and compaction.mentions(body):
        # Codex compaction: our compaction items expanded, a trigger answered here.
        rewritten = await compaction.serve(ex, up, body, generate)
        if rewritten is None:
            return
        body = rewritten
    ex.request_body = body
    if (
        up.inner
        and up.protocol == ex.client.name
        and failover.plan_of(route).single
        and not holds_search_placeholder(body)  # (translated: see ``attempts.attempt``)
    ):
        # The wrapped app in the client's protocol, and nothing else to try: the
        # request goes down the ASGI chain as it came (its scope, its headers; a
        # routed model aside). With fallbacks it is a target like any other.
        if ex.model != head.model and not ex.client.model_in_path:
            body = rewrite_model(body, ex.model or "")
        await relay_inner(ex, body)
        return
    await until_disconnect(ex.receive, failover.serve(ex, route, body, attempts.attempt))


async def compact(ex: Exchange, body: bytes) -> None:
    """``POST /v1/responses/compact``: the summary is generated like any request."""
    await compaction.compact(ex, body, generate)
