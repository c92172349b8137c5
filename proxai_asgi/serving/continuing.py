"""Finishing an answer whose stream broke after its content reached the client.

The client already has part of the answer: it cannot be asked again from the start.
Instead a target is asked to continue it (``routing.continuation``): the one that
broke first (a cut connection is usually the connection's fault, not the model's),
then the route's other targets in order. Each is asked as it can be asked — with the
text sent as an assistant prefill, or the request again with only what extends the
text sent released — and its stream goes on through the client's own encoder, so the
client sees one answer. Where nothing can continue (a tool call half sent, every
target failing, a restart that diverges) the stream ends with the client protocol's
terminal error carrying the original failure, never the continuation's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec

from .. import canonical as c
from ..codec import PathCall, StreamEncoder
from ..errors import ProxyError
from ..pipeline import Translation, answering
from ..protocols import get_codec
from ..routing.continuation import (
    Sent,
    Splice,
    continuable,
    continuation_body,
    continuation_mode,
    resume_encoder,
)
from ..transport.pumping import pump

if TYPE_CHECKING:
    from ..routing.plan import Target
    from .failover import Race

logger = logging.getLogger("proxai_asgi")

Respond = Callable[[], Awaitable[None]]
MAX_ERROR_BODY = 64 * 1024


class Kept:
    """A relayed stream's bytes, kept up to ``limit`` to continue it if it is cut."""

    __slots__ = ("_limit", "_size", "chunks", "whole")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._size = 0
        self.chunks: list[bytes] = []
        self.whole = True  # False once past the limit: it cannot be continued

    def add(self, chunk: bytes) -> None:
        if not self.whole:
            return
        self._size += len(chunk)
        if self._size > self._limit:
            self.whole = False
            self.chunks.clear()
            return
        self.chunks.append(chunk)


async def relayed(
    race: Race, target: Target, kept: Kept, error: ProxyError, stalled: bool = False
) -> bool:
    """A pass-through stream cut: True when the client's stream was ended here
    (finished by a continuation, or with its terminal error after one had started)."""
    ex = race.ex
    if not kept.whole or not kept.chunks:
        return False
    data = b"".join(kept.chunks)
    try:
        request = _request(race)
        sent = Sent.from_relayed(ex.client, request, data)
        if not continuable(sent):
            return False
        encoder = resume_encoder(ex.client, request, data)
    except ProxyError:
        return False  # bytes the protocol's own decoder cannot read: nothing to resume
    translation = answering(ex.client, ex.client, request)
    return await _continue(race, target, encoder, sent, translation, error, stalled)


async def translated(
    race: Race,
    target: Target,
    encoder: StreamEncoder,
    sent: Sent,
    translation: Translation,
    error: ProxyError,
    stalled: bool = False,
) -> bool:
    """A translated stream cut (``sent``: what its encoder was given): as ``relayed``."""
    if not continuable(sent):
        return False
    return await _continue(race, target, encoder, sent, translation, error, stalled)


def _request(race: Race) -> c.Request:
    """The client's request, canonical: what a continuation asks again."""
    from ..errors import TranslationReport

    ex = race.ex
    request = ex.client.decode_request(ex.request_body, TranslationReport(lossy=True))
    if ex.call is not None:
        request.stream = True
    return request


async def _continue(
    race: Race,
    target: Target,
    encoder: StreamEncoder,
    sent: Sent,
    translation: Translation,
    error: ProxyError,
    stalled: bool,
) -> bool:
    ex = race.ex
    released = False
    last: Splice | None = None
    for candidate in race.continuers(target, stalled):
        codec = get_codec(candidate.upstream.protocol)
        mode = continuation_mode(codec, candidate.upstream)
        if mode == "off":
            continue
        before = len(sent.log)
        splice = await _ask(race, candidate, encoder, sent, translation, mode, error)
        if splice is None and mode == "prefill":
            # Refused: some models reject a prefill (newest Claude models, OpenAI):
            # asked again without it, only what extends the text sent is released.
            mode = "restart"
            splice = await _ask(race, candidate, encoder, sent, translation, mode, error)
        if splice is None:
            continue
        last = splice
        released = released or len(sent.log) > before
        if splice.done and splice.failure is None:
            race.record.continued = candidate
            logger.info(
                "proxai_asgi continued a cut answer on fallback %d (%s)",
                candidate.fallback_index,
                mode,
            )
            # Both answers were billed: the cut one's usage (as far as it told it)
            # and the continuation's.
            if ex.usage is not None and splice.usage is not None:
                ex.usage = ex.usage + splice.usage
            else:
                ex.usage = splice.usage or ex.usage
            return True  # finished, or (diverged) ended with the original failure
    if released and last is not None:
        await ex.body(last.fail())  # the original failure, after the continued text
        return True
    return False


async def _ask(
    race: Race,
    candidate: Target,
    encoder: StreamEncoder,
    sent: Sent,
    translation: Translation,
    mode: str,
    error: ProxyError,
) -> Splice | None:
    """One continuation attempt: the splice it ran through, or None when the target
    refused before answering."""
    ex = race.ex
    up = candidate.upstream
    codec = get_codec(up.protocol)
    race.record.count += 1
    # The client's request asked of this target (its model); the client's encoder
    # keeps the original.
    asked = msgspec.structs.replace(translation.request, model=candidate.model)
    translation = Translation(
        translation.client, codec, asked, b"", translation.dropped, translation.wrapped
    )
    body, cont = continuation_body(translation, sent, codec, up, mode)  # type: ignore[arg-type]
    splice = Splice(encoder, sent, cont, mode, error)  # type: ignore[arg-type]
    try:
        async with ex.open(
            up, body, passthrough=False, call=PathCall(model=candidate.model, stream=True)
        ) as resp:
            if not 200 <= resp.status < 300 or not resp.is_event_stream:
                await resp.read(MAX_ERROR_BODY)
                logger.info(
                    "proxai_asgi continuation (%s) refused by fallback %d: %s",
                    mode,
                    candidate.fallback_index,
                    resp.status,
                )
                return None

            async def forward(chunk: bytes) -> bool:
                out = splice.feed(chunk)
                if out:
                    await ex.body(out)
                return splice.done

            await pump(resp, up, forward)
            if not splice.done:
                out = splice.close()
                if out:
                    await ex.body(out)
    except ProxyError as err:
        if not splice.done:
            splice.failure = err
            splice.done = True
    return splice
