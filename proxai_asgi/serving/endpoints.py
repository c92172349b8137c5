"""The side endpoints real clients call besides the generation paths.

- Token counts (Anthropic's ``POST /v1/messages/count_tokens``, which Claude Code calls
  at start-up and for ``/context``; Gemini's ``{model}:countTokens``): forwarded to an
  HTTP upstream of the client's own protocol; otherwise a local estimate (about four
  characters per token, ``tokens.py``) in the client's shape, marked with the response
  header ``x-proxai-token-count: estimate``.
- ``GET /v1/models`` (and Google's ``/v1beta/models``): the models a client may ask
  for, in the shape the request asks for (the registry decides whose: a Google path or
  key, an ``anthropic-version`` header, else OpenAI's). Exact route patterns are listed
  as they are; a glob route lists what its upstream reports that the glob matches.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import anyio

from ..codec import PathCall
from ..errors import ProxyError
from ..protocols import get_codec, holds_search_placeholder, model_listing
from ..protocols._kit.tokens import estimate_input_tokens
from ..transport.upstream import RawHeaders, upstream_headers
from .model_rewrite import rewrite_model

if TYPE_CHECKING:
    from ..routing import Route
    from .context import Context
    from .exchange import Exchange

logger = logging.getLogger("proxai_asgi")
_GLOB = frozenset("*?[")
_KEPT = (b"content-type", b"request-id")
MAX_COUNT_BODY = 1024 * 1024
# A listing is a courtesy: a slow or huge one is skipped, never waited on.
_LISTING_TIMEOUT = 5.0
_MAX_LISTING = 4 * 1024 * 1024


async def count_tokens(ex: Exchange, body: bytes) -> None:
    """A token count for the client's protocol."""
    route = ex.route(ex.head(body))
    up = route.upstream
    # (a body with the proxy's search placeholder would be refused: estimated)
    if up.protocol == ex.client.name and not up.inner and not holds_search_placeholder(body):
        if route.model_rewrite and not ex.client.model_in_path:
            body = rewrite_model(body, route.model_rewrite)
        call = PathCall(model=ex.model or "", stream=False, action="count_tokens")
        headers = upstream_headers(ex.client_headers(), up, passthrough=True, stream=False)
        async with ex.mw.open_upstream(ex.scope, up, headers, body, call, raw=False) as resp:
            data = await resp.read(MAX_COUNT_BODY)
            kept = [(k, v) for k, v in resp.headers if k in _KEPT]
        await ex.start(resp.status, [*kept, (b"content-length", str(len(data)).encode())])
        await ex.body(data, more=False)
        return
    # No upstream of the client's protocol to ask (or the wrapped app, which need not
    # serve counts): estimate.
    request = ex.client.count_tokens_request(body)
    answer = ex.client.encode_token_count(estimate_input_tokens(request))
    await ex.json(200, answer, [(b"x-proxai-token-count", b"estimate")])


async def list_models(
    mw: Context, headers: RawHeaders, query: bytes = b"", path: str = "/v1/models"
) -> bytes:
    names: list[str] = []
    for route in mw.router.routes:
        if not _GLOB & set(route.model):
            names.append(route.model)
        else:
            names.extend(await _upstream_models(mw, route, headers))
    names = list(dict.fromkeys(names))
    return model_listing(path, headers, query).encode_model_list(names, query)


async def _upstream_models(mw: Context, route: Route, headers: RawHeaders) -> list[str]:
    """Model ids an HTTP upstream reports that ``route``'s glob matches; [] when the
    upstream has no list (a failure here must not break the listing)."""
    up = route.upstream
    if up.inner or not up.base_url:
        return []
    codec = get_codec(up.protocol)
    body = b""  # stays empty when the upstream fails, errs or takes too long
    with anyio.move_on_after(_LISTING_TIMEOUT), contextlib.suppress(ProxyError):
        # (a client header that cannot be sent is a ProxyError too: no listing from it)
        out_headers = upstream_headers(headers, up, passthrough=False, stream=False)
        async with mw.open_upstream(
            {}, up, out_headers, b"", None, raw=False, get=codec.models_url(up.base_url)
        ) as resp:
            if resp.status == 200:
                body = await resp.read(_MAX_LISTING)
    try:
        ids = codec.model_ids(body) if body else []
    except (ValueError, AttributeError, TypeError, KeyError):
        ids = []
    if not ids:
        logger.debug("model list of %s unavailable", up.label)
    return [i for i in ids if route.matches(i)]
