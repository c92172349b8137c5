"""Who owns a response that a Responses upstream keeps, when the proxy reaches that
upstream with a key of its own.

With the client's own credential forwarded (``api_key=None``, or the wrapped app,
which receives the client's headers) the upstream decides who may read, continue or
delete a response. With a server-side key every client looks the same to the
upstream, so the proxy decides: each response id a pass-through answer carries (the
JSON body's ``id``, a stream's ``response.created``) is claimed for the client's owner
in the response store, with the store's bounds and TTL, and only that owner's
requests naming the id go upstream: retrieve, input items and delete
(``stored_endpoints``) and ``previous_response_id``. Any other id is as absent as
one the upstream never minted (OpenAI's 404, or its 400
``previous_response_not_found``), and with no store (``store="off"``) no id can be
claimed, so none is reachable through the proxy.

A claim is a store record under ``claim:`` + the id: no client id can name it, since
every id a client sends is checked with ``ids.valid_response_id`` first.
"""

from __future__ import annotations

import logging
import re
import time

import msgspec

from ..ids import valid_response_id
from ..routing import Upstream
from ..sse import SSEDecoder
from ..store import StoredResponse, StoreUnavailable
from ..transport.upstream import Scope, credential_headers
from .stored_responses import StoredResponses, not_found_previous, unavailable

logger = logging.getLogger("proxai_asgi")

_PREFIX = "claim:"
MAX_SCAN = 4 * 1024 * 1024  # bytes of an answer searched for its id, at most
_JSON_ID = re.compile(rb'\A\s*\{\s*"id"\s*:\s*"([A-Za-z0-9_-]{1,200})"')  # OpenAI's order


def shown(response_id: str) -> str:
    """An id as an error message may quote it: bounded."""
    return response_id if len(response_id) <= 64 else response_id[:64] + "..."


def server_keyed(up: Upstream) -> bool:
    """Does the proxy reach ``up`` with a credential of its own (not the client's)?"""
    if up.inner:
        return False  # the wrapped app gets the client's own headers
    return bool(up.api_key) or any(n.lower().encode() in credential_headers() for n in up.headers)


def where(up: Upstream) -> str:
    """What a claim names its upstream by: the configured name, else the base URL
    without userinfo (a claim is no place for a password)."""
    return up.name or (up.base_url or "").rsplit("@", 1)[-1]


async def claimed(service: StoredResponses, scope: Scope, response_id: str) -> str | None:
    """``where`` the upstream that answered ``response_id`` for this caller is, or
    None when the caller does not own it."""
    store = service.store
    if store is None or not valid_response_id(response_id):
        return None
    try:
        record = await store.get(_PREFIX + response_id, service.owners(scope))
    except StoreUnavailable as exc:
        raise unavailable(exc) from None
    if record is None:
        return None
    return _Claim.decode(record.response).upstream


async def release(service: StoredResponses, scope: Scope, response_id: str) -> None:
    """The upstream deleted the response: its claim goes too."""
    if service.store is not None:
        try:
            await service.store.delete(_PREFIX + response_id, service.owners(scope))
        except StoreUnavailable as exc:
            logger.warning("claim on %s not released: %s", response_id, exc)


class _Fields(msgspec.Struct):
    previous_response_id: object = None
    store: object = True


_fields = msgspec.json.Decoder(_Fields)


async def guard(
    service: StoredResponses, scope: Scope, body: bytes, up: Upstream
) -> Claimer | None:
    """A Responses request passing through to ``up`` with our key: refused (400)
    when it continues a response the caller does not own; else the ``Claimer`` that
    records the caller as the owner of the answer (None for ``store: false``)."""
    try:
        fields = _fields.decode(body)
    except msgspec.DecodeError:
        return None  # not JSON: the upstream refuses it
    previous = fields.previous_response_id
    if isinstance(previous, str) and await claimed(service, scope, previous) is None:
        raise not_found_previous(shown(previous))
    if fields.store is False or service.store is None:
        return None
    return Claimer(service, service.owners(scope), where(up))


class _Claim(msgspec.Struct):
    upstream: str | None = None  # ``where`` the upstream that answered is

    @staticmethod
    def decode(raw: msgspec.Raw) -> _Claim:
        try:
            return _claim.decode(raw)
        except msgspec.DecodeError:
            return _Claim()


_claim = msgspec.json.Decoder(_Claim)
_enc = msgspec.json.Encoder()


class _Lifecycle(msgspec.Struct):
    response: _Id | None = None


class _Id(msgspec.Struct):
    id: object = None


_lifecycle = msgspec.json.Decoder(_Lifecycle)
_json_id = msgspec.json.Decoder(_Id)


class Claimer:
    """Fed the client-bound answer of a pass-through (the ``Exchange.turn`` slot);
    claims its response id for ``owner`` as soon as the id has been seen, before
    the bytes that carry it reach the client (who may ask for it at once)."""

    previous_id: str | None = None  # (a pass-through: nothing for a translation to name)

    def __init__(self, service: StoredResponses, owner: str, upstream: str) -> None:
        self.service = service
        self.owner = owner
        self.upstream = upstream
        self.done = False
        self.seen = 0
        self.body = bytearray()  # a JSON answer, until its id is found
        self.events: SSEDecoder | None = None  # a stream's events, until one has the id

    async def observe(self, status: int, data: bytes, more: bool) -> None:
        if self.done:
            return
        if status != 200:
            self.done = True
            return
        self.seen += len(data)
        response_id = self._find(data, more)
        if response_id is None and more and self.seen <= MAX_SCAN:
            return
        self.done = True
        self.body, self.events = bytearray(), None
        if response_id is None:
            logger.warning("a pass-through answer's response id was not found; not claimed")
            return
        await self._claim(response_id)

    async def close(self) -> None:
        """Nothing is kept of an answer that ended before its id was seen."""

    def _find(self, data: bytes, more: bool) -> str | None:
        if self.events is None and not self.body and data.lstrip()[:1] not in (b"{", b""):
            self.events = SSEDecoder()  # not a JSON object: a stream
        if self.events is not None:
            for event in self.events.decode(data):
                try:
                    found = _lifecycle.decode(event.data).response
                except msgspec.DecodeError:
                    continue
                if found is not None and isinstance(found.id, str):
                    return found.id
            return None
        self.body += data
        match = _JSON_ID.match(self.body)
        if match is not None:
            return match.group(1).decode()
        if more:
            return None
        try:
            found_id = _json_id.decode(self.body).id
        except msgspec.DecodeError:
            return None
        return found_id if isinstance(found_id, str) else None

    async def _claim(self, response_id: str) -> None:
        store = self.service.store
        if store is None or not valid_response_id(response_id):
            return  # an id no client could ask for
        record = StoredResponse(
            id=_PREFIX + response_id,
            owner=self.owner,
            created_at=time.time(),
            input=[],
            response=msgspec.Raw(_enc.encode(_Claim(self.upstream))),
        )
        try:
            await store.put(record)
        except StoreUnavailable as exc:
            logger.warning("response %s answered but its owner not recorded: %s", response_id, exc)
