"""A scripted upstream answer written by the upstream protocol's own codec: JSON when
the request asks for none, else the codec's stream encoder over ``unfold`` (so the wire
is the shape the translators know for that protocol)."""

from __future__ import annotations

from collections.abc import Callable

from proxai_asgi import canonical as c
from proxai_asgi.codec import ProtocolName, unfold
from proxai_asgi.errors import TranslationReport
from proxai_asgi.protocols import get_codec

from .servers import Reply, Seen

JSON = [("content-type", "application/json")]
SSE = [("content-type", "text/event-stream")]


def codec_answer(protocol: ProtocolName, response: c.Response) -> Callable[[Seen], Reply]:
    """``response`` as ``protocol`` answers it, streamed when the request streams."""

    def answer(seen: Seen) -> Reply:
        codec = get_codec(protocol)
        request = codec.decode_request(seen.body, TranslationReport(lossy=True))
        found = codec.serves(seen.path)
        call = None if found is None else found.call  # Gemini: streaming is in the URL
        if call is not None:
            request.stream = call.stream
        if not request.stream:
            return Reply(200, JSON, [codec.encode_response(response, request)])
        encoder = codec.stream_encoder(request)
        return Reply(200, SSE, [b for b in map(encoder.encode, unfold(response)) if b])

    return answer
