"""``GET /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items`` and
``DELETE /v1/responses/{id}``, answered from the response store
(``stored_responses.py``), paged as the OpenAI API pages lists. An id the store does
not hold for the caller goes to the routes' Responses upstream when there is one (its
own stored responses) and the caller may reach it there (``stored_claims.py``), else
is a 404 in the Responses error shape. The id is checked to be one path segment of
id characters before anything else: the upstream URL is built from it and from
configuration only."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qs, parse_qsl, urlencode

import msgspec

from .. import ids
from ..codec import Codec
from ..errors import ProxyError
from ..protocols import all_codecs
from ..serving.key_mask import mask, maskable_key
from ..store import StoreUnavailable
from ..transport.upstream import (
    Receive,
    Scope,
    Send,
    client_headers_from_upstream,
    upstream_headers,
)
from .stored_claims import claimed, release, server_keyed, shown, where
from .stored_responses import StoredResponses, input_items, unavailable

if TYPE_CHECKING:
    from ..routing import Upstream
    from ..serving.context import Context

_enc = msgspec.json.Encoder()
_JSON = (b"content-type", b"application/json")


class _ItemId(msgspec.Struct):
    id: str | None = None


_item_id = msgspec.json.Decoder(_ItemId)


def _not_found(response_id: str) -> ProxyError:
    return ProxyError(404, f"Response with id '{response_id}' not found.", kind="invalid_request")


def stateful_codec() -> Codec:
    """The protocol whose answers the store keeps (the one that promises state)."""
    return next(codec for codec in all_codecs() if codec.stateful)


def parse_path(path: str) -> tuple[str, bool] | None:
    """``/v1/responses/{id}`` or ``/v1/responses/{id}/input_items`` (``/v1`` optional):
    the id and whether the input items are asked for."""
    for root in ("/v1/responses/", "/responses/"):
        if path.startswith(root):
            rest = path[len(root) :]
            rid, _, sub = rest.partition("/")
            if rid and rid != "compact" and sub in ("", "input_items"):
                return rid, sub == "input_items"
    return None


def deleted(response_id: str) -> bytes:
    return _enc.encode({"id": response_id, "object": "response.deleted", "deleted": True})


class Page(msgspec.Struct):
    after: str | None = None
    before: str | None = None
    limit: int = 20
    order: str = "desc"


def page_params(query: bytes) -> Page:
    params = {k: v[-1] for k, v in parse_qs(query.decode("latin-1")).items()}
    limit = params.get("limit", "20")
    if not limit.isdigit() or not 1 <= int(limit) <= 100:
        raise ProxyError.invalid(
            f"Invalid 'limit': integer between 1 and 100 expected, got '{limit}'.", "limit"
        )
    order = params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ProxyError.invalid(
            f"Invalid value: '{order}'. Supported values are: 'asc' and 'desc'.", "order"
        )
    return Page(params.get("after"), params.get("before"), int(limit), order)


def paginate(items: list[msgspec.Raw], page: Page) -> bytes:
    """A list page as the OpenAI API pages by id: ``after`` (or ``before``) an item
    in the requested order, at most ``limit`` items, ``has_more`` when the list goes
    on past the page in the direction of travel."""
    ordered = items[::-1] if page.order == "desc" else list(items)
    ids = [_item_id.decode(item).id for item in ordered]
    start, stop = 0, len(ordered)
    if page.after is not None:
        start = ids.index(page.after) + 1 if page.after in ids else len(ordered)
    if page.before is not None:
        stop = ids.index(page.before) if page.before in ids else 0
    if page.before is not None and page.after is None:
        # The page that ends just before ``before``; more lies further back.
        chosen = ordered[max(start, stop - page.limit) : stop]
        has_more = stop - page.limit > start
    else:
        chosen = ordered[start : min(stop, start + page.limit)]
        has_more = start + page.limit < stop
    chosen_ids = [_item_id.decode(item).id for item in chosen]
    return _enc.encode(
        {
            "object": "list",
            "data": chosen,
            "first_id": chosen_ids[0] if chosen_ids else None,
            "last_id": chosen_ids[-1] if chosen_ids else None,
            "has_more": has_more,
        }
    )


async def lookup(
    service: StoredResponses, scope: Scope, response_id: str, items: bool
) -> bytes | None:
    """GET: the stored response (or its input items page); None when this proxy
    holds no such response for the caller."""
    store = service.store
    if store is None:
        return None
    owner = service.owners(scope)
    try:
        if not items:
            record = await store.get(response_id, owner)
            return bytes(record.response) if record is not None else None
        page = page_params(scope.get("query_string", b""))
        chain = await store.chain(response_id, owner)
    except StoreUnavailable as exc:
        raise unavailable(exc) from None
    if not chain or chain[-1].id != response_id:
        return None
    return paginate(input_items(chain), page)


async def remove(service: StoredResponses, scope: Scope, response_id: str) -> bytes | None:
    """DELETE: the deletion object; None when there was nothing of the caller's."""
    store = service.store
    if store is None:
        return None
    try:
        found = await store.delete(response_id, service.owners(scope))
    except StoreUnavailable as exc:
        raise unavailable(exc) from None
    return deleted(response_id) if found else None


def responses_upstreams(mw: Context) -> list[Upstream]:
    """The routed upstreams that speak Responses: ids this proxy does not hold may be
    their own."""
    return [r.upstream for r in mw.router.routes if r.upstream.protocol == stateful_codec().name]


async def endpoint(
    mw: Context,
    scope: Scope,
    receive: Receive,
    send: Send,
    response_id: str,
    items: bool,
) -> None:
    """``GET /v1/responses/{id}[/input_items]`` and ``DELETE /v1/responses/{id}``:
    answered from the store; an id it does not hold for the caller goes to the
    Responses upstream when one is configured (with a key of ours: only an id the
    caller owns, ``stored_claims``), else is a 404. An id that is not one URL path
    segment of id characters is a 404 before anything is looked up."""
    service = mw.stored
    status, body = 200, b""
    try:
        if not ids.valid_response_id(response_id):
            raise _not_found(shown(response_id))
        await service.ready()
        if scope["method"] == "DELETE":
            found = None if items else await remove(service, scope, response_id)
        else:
            found = await lookup(service, scope, response_id, items)
        if found is None:
            up = await _upstream_for(mw, scope, response_id)
            if up is not None:
                await _forward(mw, up, scope, receive, send, response_id, items)
                return
            raise _not_found(response_id)
        body = found
    except ProxyError as err:
        status, body = err.status, stateful_codec().encode_error(err)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _upstream_for(mw: Context, scope: Scope, response_id: str) -> Upstream | None:
    """Where a request for an id this proxy does not store goes: the Responses
    upstream that answered it for this caller (claimed), else the first Responses
    upstream if it sees the client's own credential and decides itself."""
    ups = responses_upstreams(mw)
    if any(server_keyed(up) for up in ups):
        label = await claimed(mw.stored, scope, response_id)
        if label is not None:
            return next((up for up in ups if where(up) == label), ups[0])
    return ups[0] if ups and not server_keyed(ups[0]) else None


async def _forward(
    mw: Context,
    up: Upstream,
    scope: Scope,
    receive: Receive,
    send: Send,
    response_id: str,
    items: bool,
) -> None:
    """The request, to the Responses upstream (the wrapped app as it came, or over
    HTTP with the upstream's credentials, for the validated id only), and its answer
    back, our key masked in it."""
    if up.inner:
        await mw.app(scope, receive, send)
        return
    import httpx

    url = f"{up.url}/{response_id}" + ("/input_items" if items else "")
    query = scope.get("query_string", b"")
    if query and scope["method"] == "GET":  # re-encoded: parameters, nothing else
        url += "?" + urlencode(parse_qsl(query.decode("latin-1"), keep_blank_values=True))
    headers = upstream_headers(scope.get("headers", []), up, passthrough=True, stream=False)
    timeout = httpx.Timeout(up.read_timeout, connect=up.connect_timeout)
    try:
        client = mw.http.client_for(up)
        resp = await client.request(scope["method"], url, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        err = ProxyError(502, f"upstream unreachable ({type(exc).__name__})", kind="bad_gateway")
        body = stateful_codec().encode_error(err)
        start = {"type": "http.response.start", "status": 502, "headers": [_JSON]}
        await send(start)
        await send({"type": "http.response.body", "body": body})
        return
    raw = [(k.lower(), _masked(up, v)) for k, v in resp.headers.raw]
    body = _masked(up, resp.content)
    ctype = next((v for k, v in raw if k == b"content-type"), _JSON[1])
    out = [
        *client_headers_from_upstream(raw, passthrough=False),
        (b"content-type", ctype),
        (b"content-length", b"%d" % len(body)),
    ]
    if scope["method"] == "DELETE" and resp.status_code == 200:
        await release(mw.stored, scope, response_id)
    await send({"type": "http.response.start", "status": resp.status_code, "headers": out})
    await send({"type": "http.response.body", "body": body})


def _masked(up: Upstream, data: bytes) -> bytes:
    secret = maskable_key(up)
    return data if secret is None else mask(data, secret)
