"""Two protocols: the request goes through ``pipeline.prepare``, the answer through
the pipeline's translators, the bytes moved here between the upstream and the client.
"""

from __future__ import annotations

from .. import pipeline
from ..errors import ProxyError
from ..protocols import get_codec
from ..responses_state.stored_responses import Turn
from ..routing import Upstream
from ..transport.pumping import pump
from ..transport.upstream import RawHeaders, UpstreamResponse
from .exchange import Exchange

MAX_ERROR_BODY = 1024 * 1024
MAX_JSON_BODY = 64 * 1024 * 1024

SSE_HEADERS: RawHeaders = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


async def translate(ex: Exchange, up: Upstream, body: bytes) -> None:
    translation = pipeline.prepare(
        ex.client, get_codec(up.protocol), body, up, model=ex.model, stream=ex.stream
    )
    ex.dropped = translation.dropped
    if isinstance(ex.turn, Turn):  # a stored turn: the answer names what it continued,
        translation.request.previous_response_id = ex.turn.previous_id
        translation.request.response_id = ex.turn.response_id  # and the id it is kept under
    async with ex.open(up, translation.body, passthrough=False) as resp:
        if not 200 <= resp.status < 300:
            err = translation.target.decode_error(resp.status, await resp.read(MAX_ERROR_BODY))
            err.headers = ex.translation_headers(resp, err)
            raise err
        if translation.request.stream:
            await _stream(ex, translation, resp, up)
        else:
            await _whole(ex, translation, resp, up)


async def _whole(
    ex: Exchange, translation: pipeline.Translation, resp: UpstreamResponse, up: Upstream
) -> None:
    """A client that asked for one answer: the upstream's JSON, or its stream folded."""
    if resp.is_event_stream:
        collector = pipeline.StreamCollector(translation)

        async def collect(chunk: bytes) -> bool:
            collector.feed(chunk)
            return False

        await pump(resp, up, collect)
        response = collector.close()
        out = pipeline.answer(translation, response)
    else:
        out, response = pipeline.translate_response(translation, await resp.read(MAX_JSON_BODY))
    ex.usage, ex.response_model = response.usage, response.model
    await ex.json(200, out, ex.translation_headers(resp))


async def _stream(
    ex: Exchange, translation: pipeline.Translation, resp: UpstreamResponse, up: Upstream
) -> None:
    stream = pipeline.StreamTranslator(translation)
    whole = None
    if not resp.is_event_stream:
        # The upstream ignored stream=true and answered in one piece: decoded before
        # the client's stream starts, so a body that is no answer is a plain 502.
        whole = translation.target.decode_response(await resp.read(MAX_JSON_BODY))
    await ex.start(200, [*SSE_HEADERS, *ex.translation_headers(resp)])
    if whole is not None:
        await ex.body(stream.whole(whole))
    else:

        async def forward(chunk: bytes) -> bool:
            out = stream.feed(chunk)
            if out:
                await ex.body(out)
            return stream.done

        try:
            await pump(resp, up, forward, lambda: stream.tool_open)
            tail = stream.close()
        except ProxyError as err:  # a stall or a broken upstream connection
            tail = stream.fail(err)
        if tail:
            await ex.body(tail)
    ex.usage, ex.response_model = stream.usage, stream.model
    await ex.body(b"", more=False)
