"""The side endpoints real clients call besides the generation paths.

- ``POST /v1/messages/count_tokens`` (Claude Code calls it at start-up and for
  ``/context``): forwarded to an Anthropic upstream; toward any other upstream a local
  estimate (about four characters per token, see ``tokens.py``), marked with the
  response header ``x-proxai-token-count: estimate``.
- ``GET /v1/models``: the models a client may ask for, in the client's list shape
  (Anthropic when the request carries ``anthropic-version``, OpenAI otherwise, plus
  Codex's ``{"models": [...]}`` key when it asks with ``?client_version=``). Exact
  route patterns are listed as they are; a glob route lists what its upstream reports
  (fetched from the upstream's own models endpoint) that the glob matches. Google's
  shape (``{"models": [{"name": "models/<id>", ...}]}``) for ``GET /v1beta/models``, and
  for ``/v1/models`` asked with a Google key (``x-goog-api-key`` or ``?key=``).
- ``POST /v1beta/models/{model}:countTokens`` (Gemini clients): forwarded to a Gemini
  upstream; toward any other, the local estimate as ``{"totalTokens": n}``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import msgspec

from .errors import ProxyError, TranslationReport
from .protocols import get_codec
from .upstream import RawHeaders, upstream_headers

if TYPE_CHECKING:
    from .middleware import Exchange, ProxaiMiddleware
    from .routing import Route

logger = logging.getLogger("proxai_asgi")
_enc = msgspec.json.Encoder()
_GLOB = frozenset("*?[")


async def count_tokens(ex: Exchange, body: bytes) -> None:
    """Serve ``/v1/messages/count_tokens`` for an Anthropic client."""
    head = ex._head(body)
    route = ex.mw.router.select(head.model or "")
    if route is None:
        raise ProxyError(404, f"no upstream is configured for model {head.model!r}")
    up = route.upstream
    ex.upstream = up
    ex.model = route.model_rewrite or head.model
    if up.protocol == "anthropic_messages" and not up.inner:
        headers = upstream_headers(
            ex.scope.get("headers", []), up, "anthropic_messages", passthrough=True, stream=False
        )
        if route.model_rewrite:
            from .model_rewrite import rewrite_model

            body = rewrite_model(body, route.model_rewrite)
        import httpx  # loaded by ``client`` already

        client = ex.mw.http.client_for(up)
        url = up.url + "/count_tokens"
        try:
            r = await client.post(url, content=body, headers=headers, timeout=up.read_timeout)
        except httpx.HTTPError as exc:
            raise ProxyError(502, f"upstream unreachable ({type(exc).__name__})") from None
        out = [(k, v) for k, v in r.headers.raw if k.lower() in (b"content-type", b"request-id")]
        await ex._start(r.status_code, [*out, (b"content-length", str(len(r.content)).encode())])
        await ex._body(r.content, more=False)
        return
    # No Anthropic upstream to ask: estimate. The body is a Messages request minus
    # max_tokens, which the decoder requires.
    data = msgspec.json.decode(body)
    if isinstance(data, dict):
        data.setdefault("max_tokens", 1)
    creq = get_codec("anthropic_messages").decode_request(
        _enc.encode(data), TranslationReport(lossy=True)
    )
    from .tokens import estimate_input_tokens

    answer = _enc.encode({"input_tokens": estimate_input_tokens(creq)})
    await ex._json(200, answer, [(b"x-proxai-token-count", b"estimate")])


async def count_tokens_in_path(ex: Exchange, body: bytes) -> None:
    """Serve ``{model}:countTokens`` for a path-addressed (Gemini) client."""
    from .codec import PathCall
    from .protocols.gemini_generate_content.request import count_tokens_request
    from .tokens import estimate_input_tokens

    head = ex._head(body)
    route = ex.mw.router.select(head.model or "")
    if route is None:
        raise ProxyError(404, f"no upstream is configured for model {head.model!r}")
    up = route.upstream
    ex.upstream = up
    ex.model = model = route.model_rewrite or head.model or ""
    if up.protocol == ex.client.name and not up.inner:
        headers = upstream_headers(
            ex.client_headers(), up, ex.client.name, passthrough=True, stream=False
        )
        url = up.url_for(PathCall(model=model, stream=False, action="count_tokens"))
        import httpx  # loaded by ``client`` already

        try:
            r = await ex.mw.http.client_for(up).post(
                url, content=body, headers=headers, timeout=up.read_timeout
            )
        except httpx.HTTPError as exc:
            raise ProxyError(502, f"upstream unreachable ({type(exc).__name__})") from None
        out = [(k, v) for k, v in r.headers.raw if k.lower() == b"content-type"]
        await ex._start(r.status_code, [*out, (b"content-length", str(len(r.content)).encode())])
        await ex._body(r.content, more=False)
        return
    creq = count_tokens_request(body)
    answer = _enc.encode({"totalTokens": estimate_input_tokens(creq)})
    await ex._json(200, answer, [(b"x-proxai-token-count", b"estimate")])


def _google_shape(headers: RawHeaders, query: bytes, path: str) -> bool:
    if path == "/v1beta/models":
        return True
    return any(k == b"x-goog-api-key" for k, _ in headers) or b"key=" in query


async def list_models(
    mw: ProxaiMiddleware, headers: RawHeaders, query: bytes = b"", path: str = "/v1/models"
) -> bytes:
    anthropic_shape = any(k == b"anthropic-version" for k, _ in headers)
    # Codex's model manager asks with ?client_version=... and reads {"models": [...]}.
    codex_shape = b"client_version=" in query
    names: list[str] = []
    for route in mw.router.routes:
        if not _GLOB & set(route.model):
            names.append(route.model)
        else:
            names.extend(await _upstream_models(mw, route, headers))
    names = list(dict.fromkeys(names))
    if _google_shape(headers, query, path):
        methods = ["generateContent", "streamGenerateContent", "countTokens"]
        models = [
            {"name": f"models/{n}", "displayName": n, "supportedGenerationMethods": methods}
            for n in names
        ]
        return _enc.encode({"models": models})
    if anthropic_shape:
        data: list[dict[str, Any]] = [
            {"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z"}
            for n in names
        ]
        return _enc.encode(
            {
                "data": data,
                "has_more": False,
                "first_id": names[0] if names else None,
                "last_id": names[-1] if names else None,
            }
        )
    listing: dict[str, Any] = {
        "object": "list",
        "data": [{"id": n, "object": "model", "created": 0, "owned_by": "proxai"} for n in names],
    }
    if codex_shape:
        listing["models"] = [{"slug": n, "display_name": n} for n in names]
    return _enc.encode(listing)


async def _upstream_models(mw: ProxaiMiddleware, route: Route, headers: RawHeaders) -> list[str]:
    """Model ids an HTTP upstream reports that ``route``'s glob matches; [] when the
    upstream has no list (a failure here must not break the listing)."""
    up = route.upstream
    if up.inner or not up.base_url:
        return []
    base = up.base_url
    google = up.protocol == "gemini_generate_content"
    if up.protocol == "anthropic_messages":
        url = (base[:-3] if base.endswith("/v1") else base) + "/v1/models"
    elif google:
        url = up.url_for(None)  # Google's listing: {version}/models
    else:
        url = base + "/models"
    out_headers = upstream_headers(headers, up, up.protocol, passthrough=False, stream=False)
    import httpx  # loaded by ``client`` already

    try:
        r = await mw.http.client_for(up).get(url, headers=out_headers, timeout=5.0)
        if google:
            ids = [
                m["name"].removeprefix("models/")
                for m in r.json().get("models", [])
                if isinstance(m.get("name"), str)
            ]
        else:
            ids = [m["id"] for m in r.json().get("data", []) if isinstance(m.get("id"), str)]
    except (httpx.HTTPError, ValueError, AttributeError, TypeError, KeyError):
        logger.debug("model list of %s unavailable", up.label)
        return []
    return [i for i in ids if route.matches(i)]
