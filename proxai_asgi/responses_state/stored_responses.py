"""Stored Responses over upstreams that keep no state: ``previous_response_id``,
``store``, and the retrieve / input items / delete endpoints.

The conversation a Responses client continues with ``previous_response_id`` is
rebuilt here before translation: the stored chain's input items and output items,
then the request's own ``input`` (the previous ``instructions`` are not carried), so
a Chat, Anthropic or Gemini upstream receives the whole history and the field is
gone. The answer is recorded as the client received it (for a stream, the terminal
event's response, which is the folded stream) once it has ended, before its last
bytes leave, so a client (or another instance) chaining from it at once finds it.

A stored answer's id is minted here (``resp_`` and 24 random bytes), never the
upstream's (upstreams repeat ids): the client's encoder writes it into the answer
(its item ids derive from it) and the record is saved under it, insert-only. A
continued request is validated by the client's codec before anything is expanded,
and the expansion is a splice of bytes; turning a request's input into the items
kept with its answer happens once the answer has ended (a large input in a worker
thread), and only for what is stored.

The pure parts (expansion, item ids, the recorder) are sans-IO; ``prepare`` and the
``Turn`` are the thin async layer the middleware calls. The GET and DELETE endpoints
are in ``stored_endpoints.py``.
When the routed upstream speaks Responses itself, none of this runs: the request
passes through and the upstream keeps its own state.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio
import msgspec

from .. import ids
from ..codec import Codec
from ..errors import ProxyError, TranslationReport
from ..sse import SSEDecoder
from ..store import ResponseStore, StoredResponse, StoreUnavailable, open_store
from ..transport.upstream import Scope, client_credential

logger = logging.getLogger("proxai_asgi")

OwnerFunction = Callable[[Scope], str]

_raw_body = msgspec.json.Decoder(dict[str, msgspec.Raw])
_any = msgspec.json.Decoder()
_enc = msgspec.json.Encoder()


class _Output(msgspec.Struct):
    output: list[msgspec.Raw] = msgspec.field(default_factory=list)


_output = msgspec.json.Decoder(_Output)


class _Id(msgspec.Struct):
    id: Any = None


_id = msgspec.json.Decoder(_Id)

# A request's input larger than this (bytes) becomes its stored items in a worker
# thread: that work is per item, in Python, and must not hold the event loop.
OFFLOAD_BYTES = 64 * 1024

# Item id prefixes, as the Responses API mints them.
_ID_PREFIX = {
    "message": "msg_",
    "function_call": "fc_",
    "function_call_output": "fco_",
    "custom_tool_call": "ctc_",
    "custom_tool_call_output": "ctco_",
    "reasoning": "rs_",
}


# --------------------------------------------------------------------- owners


@runtime_checkable
class KeepsOwnerSecret(Protocol):
    """A store that keeps the owner-hash key with its records (SQLite, Redis), or a
    SQL usage ledger; ``StoreUnavailable`` while it cannot be read."""

    async def owner_secret(self) -> bytes: ...


class Owners:
    """Who a request belongs to: ``owner(scope)`` if the application gave one (a
    tenant id from its auth layer), else a keyed hash of the client's credential;
    the credential itself is never kept.

    The key is ``secret`` when given (instances that share a store by other means
    must agree on it). Otherwise a store that keeps one (``owner_secret``: SQLite's
    meta table, a Redis key) provides it, created once and read by every instance
    and restart, so conversations outlive the process; ``load`` reads it before the
    first owner is computed. With other stores (memory, none), a SQL usage ledger
    keeps it (``keeper``: the ledger's owners then outlive the process); else the
    key is random per process, as does a request served while the store cannot be read (what it
    stores then cannot be found again, which fails closed)."""

    def __init__(
        self,
        secret: str | bytes | None = None,
        owner: OwnerFunction | None = None,
        store: object = None,
    ):
        if isinstance(secret, str):
            secret = secret.encode()
        self.owner = owner
        self.key: bytes | None = secret or None
        self._fallback = os.urandom(32)  # what secrets.token_bytes is
        self._keeper = store if isinstance(store, KeepsOwnerSecret) else None
        if self.key is None and self._keeper is None:
            self.key = self._fallback
        self._loading: anyio.Lock | None = None

    async def load(self) -> None:
        """The store's key, read once (StoreUnavailable while it cannot be read)."""
        if self.key is not None:
            return
        if self._loading is None:
            self._loading = anyio.Lock()
        async with self._loading:  # one read for the callers that arrive together
            if self.key is None:
                assert self._keeper is not None  # else a key was made at once
                self.key = await self._keeper.owner_secret()

    def __call__(self, scope: Scope) -> str:
        if self.owner is not None:
            return "app:" + self.owner(scope)
        import hashlib  # here, not at start-up (OpenSSL's ~1-3 ms): stores only
        import hmac

        credential = client_credential(scope.get("headers", [])) or b""
        key = self.key or self._fallback
        return "key:" + hmac.new(key, credential, hashlib.sha256).hexdigest()[:40]


# ------------------------------------------------------------------ the service


class StoredResponses:
    """The middleware's stored-Responses state: the store and the owner rule."""

    def __init__(
        self,
        store: str | ResponseStore | None = None,
        *,
        secret: str | bytes | None = None,
        owner: OwnerFunction | None = None,
        keeper: object = None,
    ) -> None:
        self.store = open_store(store)
        # The owner-hash key: the store's when it keeps one, else ``keeper``'s (the
        # usage ledger's), so the ledger's owners outlive the process too.
        kept = self.store if isinstance(self.store, KeepsOwnerSecret) else keeper
        self.owners = Owners(secret, owner, kept)

    async def ready(self) -> None:
        """Before the first owner is computed: the owner key kept by the store.
        While the store cannot be read, requests go on (those that need the store
        fail on it with a 503); the next request tries again."""
        try:
            await self.owners.load()
        except StoreUnavailable as exc:
            logger.warning("owner key not read from the response store: %s", exc)

    async def aclose(self) -> None:
        if self.store is not None:
            await self.store.aclose()


def unavailable(exc: StoreUnavailable) -> ProxyError:
    logger.warning("response store unavailable: %s", exc)
    return ProxyError(
        503,
        "The response store is unavailable; retry shortly.",
        kind="api_error",
        code="store_unavailable",
    )


def not_found_previous(response_id: str) -> ProxyError:
    """OpenAI's answer to a ``previous_response_id`` it does not hold."""
    return ProxyError(
        400,
        f"Previous response with id '{response_id}' not found.",
        kind="invalid_request",
        param="previous_response_id",
        code="previous_response_not_found",
    )


def _not_found(response_id: str) -> ProxyError:
    return ProxyError(404, f"Response with id '{response_id}' not found.", kind="invalid_request")


# ------------------------------------------------------------- request side


def with_ids(items: list[Any]) -> list[msgspec.Raw]:
    """A request's input items as they are stored: each with an ``id`` (minted where
    the client sent none, so listings can page by id), a bare-string message content
    as the part list the API lists it as, and a role-only message typed. Items may
    be raw JSON, decoded one at a time (never the whole input at once)."""
    return [_with_id(_any.decode(item) if type(item) is msgspec.Raw else item) for item in items]


def _with_id(item: Any) -> msgspec.Raw:
    if not isinstance(item, dict):
        return msgspec.Raw(_enc.encode(item))
    kind = item.get("type")
    if kind is None and "role" in item:
        item = {"type": "message", **item}
        kind = "message"
    if kind == "message" and isinstance(item.get("content"), str):
        part = "output_text" if item.get("role") == "assistant" else "input_text"
        text: dict[str, Any] = {"type": part, "text": item["content"]}
        if part == "output_text":
            text["annotations"] = []
        item = {**item, "content": [text]}
    if not item.get("id"):
        item = {**item, "id": _ID_PREFIX.get(str(kind), "item_") + ids.random_hex(16)}
    return msgspec.Raw(_enc.encode(item))


def _field(fields: dict[str, msgspec.Raw], name: str, default: Any) -> Any:
    return _any.decode(fields[name]) if name in fields else default


_input_value = msgspec.json.Decoder(str | list[msgspec.Raw] | None)


def _input_list(raw: msgspec.Raw | None) -> list[Any]:
    """A request's ``input`` as a list of items, each left raw."""
    try:
        value = _input_value.decode(raw) if raw is not None else None
    except msgspec.ValidationError:
        raise ProxyError.invalid("input must be a string or a list of items", "input") from None
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return value or []


def history(chain: list[StoredResponse]) -> list[msgspec.Raw]:
    """The items a chain's last response was answered from, and its answer: every
    turn's input items followed by its output items, oldest first."""
    items: list[msgspec.Raw] = []
    for record in chain:
        items += record.input
        items += _output.decode(record.response).output
    return items


def input_items(chain: list[StoredResponse]) -> list[msgspec.Raw]:
    """What ``GET /v1/responses/{id}/input_items`` lists: the items the last
    response of ``chain`` was generated from (its history, then its own input)."""
    return [*history(chain[:-1]), *chain[-1].input]


def continued(history: list[msgspec.Raw], raw: msgspec.Raw | None) -> bytes:
    """The ``input`` sent on for a continued request: the stored ``history``, then the
    request's own ``input`` (a validated string or list), joined as bytes (the items
    are not parsed: the codec reads them next)."""
    joined = b",".join(history)
    value = bytes(raw).strip() if raw is not None else b"null"
    if value.startswith(b"["):
        rest = value[1:].lstrip()
        if rest.startswith(b"]"):
            return b"[" + joined + b"]"
        return b"[" + joined + (b"," if joined else b"") + rest
    if value.startswith(b'"'):
        user = b'{"type":"message","role":"user","content":' + value + b"}"
        return b"[" + joined + (b"," if joined else b"") + user + b"]"
    if value == b"null":
        return b"[" + joined + b"]"
    raise ProxyError.invalid("input must be a string or a list of items", param="input")


def stored_items(raw: msgspec.Raw | None) -> list[msgspec.Raw]:
    """A request's ``input`` as it is kept with its answer (``with_ids``)."""
    return with_ids(_input_list(raw))


async def stored_items_off_loop(raw: msgspec.Raw | None) -> list[msgspec.Raw]:
    if raw is not None and len(raw) > OFFLOAD_BYTES:
        return await anyio.to_thread.run_sync(stored_items, raw)
    return stored_items(raw)


def validate(client: Codec, body: bytes) -> None:
    """The request as the client's codec reads it (a 400 for what OpenAI rejects),
    before anything of it is expanded. Leniently (lossy): only its shape is checked
    here; the translation checks the expanded request in full."""
    client.decode_request(body, TranslationReport(lossy=True))


class Turn:
    """One Responses request over a stateless upstream: where it continues from, the
    id its answer gets (minted here), and (unless ``store: false``) the recorder
    that keeps its answer with the request's ``input``."""

    def __init__(
        self,
        service: StoredResponses,
        owner: str,
        previous_id: str | None,
        input: msgspec.Raw | None,
        stream: bool,
        keep: bool = True,
    ) -> None:
        self.service = service
        self.owner = owner
        self.previous_id = previous_id
        self.response_id = "resp_" + ids.random_hex(24)
        self.recorder = Recorder(stream) if keep else None
        self.input = input
        self.saved = False

    async def observe(self, status: int, data: bytes, more: bool) -> None:
        """Called with each body chunk on its way to the client, before it is sent."""
        recorder = self.recorder
        if recorder is None or self.saved or status != 200:
            return
        response = recorder.feed(data, more)
        if response is not None:
            await self._save(response)

    async def close(self) -> None:
        """The exchange is over: an answer that never ended (the client left) is kept
        with the items it finished, as ``cancelled``."""
        if self.recorder is not None and not self.saved:
            response = self.recorder.abandoned()
            if response is not None:
                await self._save(response)

    async def _save(self, response: bytes) -> None:
        self.saved = True
        store = self.service.store
        if store is None:
            return
        try:
            named = _id.decode(response).id
            items = await stored_items_off_loop(self.input)
        except (msgspec.DecodeError, UnicodeDecodeError, ProxyError):
            return  # not an answer of ours (the request was validated on its way)
        if named != self.response_id:
            return  # only the id minted for this turn is ever stored
        record = StoredResponse(
            id=self.response_id,
            owner=self.owner,
            created_at=time.time(),
            previous_id=self.previous_id,
            input=items,
            response=msgspec.Raw(response),
        )
        try:
            stored = await store.put(record)
        except StoreUnavailable as exc:
            logger.warning("response %s answered but not stored: %s", self.response_id, exc)
            return
        if stored is False:  # (a store object of the application's may return None)
            logger.warning("response %s not stored: its id is already held", self.response_id)


async def prepare(
    service: StoredResponses, scope: Scope, body: bytes, client: Codec
) -> tuple[bytes, Turn | None]:
    """A Responses request bound for a stateless upstream: its body with the stored
    conversation expanded in place of ``previous_response_id``, and its ``Turn``.
    ``client`` (the client's codec) validates a continued request first."""
    store = service.store
    if store is None:
        return body, None
    try:
        fields = _raw_body.decode(body)
        previous = _field(fields, "previous_response_id", None)
        keep = _field(fields, "store", True)
        stream = _field(fields, "stream", False)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return body, None  # not JSON (or not UTF-8): the codec answers with its 400
    if previous is not None and not isinstance(previous, str):
        raise ProxyError.invalid("previous_response_id must be a string", "previous_response_id")
    if previous is None and keep is False:
        return body, None
    raw_input = fields.get("input")
    if previous is not None:
        validate(client, body)  # before the store is read or anything expanded
        if not ids.valid_response_id(previous):  # no id of ours: the store is not asked
            raise not_found_previous(previous[:64] + ("..." if len(previous) > 64 else ""))
    owner = service.owners(scope)
    if previous is not None:
        try:
            chain = await store.chain(previous, owner)
        except StoreUnavailable as exc:
            raise unavailable(exc) from None
        if not chain:
            raise not_found_previous(previous)
        if chain[0].previous_id is not None:
            raise not_found_previous(chain[0].previous_id)
        del fields["previous_response_id"]
        fields["input"] = msgspec.Raw(continued(history(chain), raw_input))
    rewrite = previous is not None
    if keep is True and "store" in fields:
        del fields["store"]  # honoured here: not a field the translation drops
        rewrite = True
    if rewrite:
        body = _enc.encode(fields)
    return body, Turn(service, owner, previous, raw_input, stream is True, keep is not False)


# ------------------------------------------------------------ response side

_TERMINAL = (
    b"event: response.completed\n",
    b"event: response.failed\n",
    b"event: response.incomplete\n",
)
_CREATED = b"event: response.created\n"
_ITEM_DONE = b"event: response.output_item.done\n"


class Recorder:
    """Sans-IO: fed the client-bound body, returns the response object to store once
    the answer has ended. Stream encoders write whole events per chunk, so each
    event of interest is found by its ``event:`` line and parsed alone; the other
    events (every delta) cost a few byte searches."""

    def __init__(self, stream: bool) -> None:
        self.stream = stream
        self.body = bytearray()
        self.started: dict[str, Any] | None = None
        self.done_items: list[Any] = []

    def feed(self, data: bytes, more: bool) -> bytes | None:
        if not self.stream:
            self.body += data
            return None if more else bytes(self.body)
        if b"event: response." not in data:
            return None
        for marker in _TERMINAL:
            at = data.find(marker)
            if at >= 0:  # the snapshot's own bytes, exactly as the client gets them
                raw = _decode(_lifecycle, _event_data(data, at))
                return bytes(raw.response) if raw is not None and raw.response else None
        at = data.find(_CREATED)
        if at >= 0:
            event = _decode(_any, _event_data(data, at))
            if isinstance(event, dict) and isinstance(event.get("response"), dict):
                self.started = event["response"]
        at = data.find(_ITEM_DONE)
        while at >= 0:
            event = _decode(_any, _event_data(data, at))
            if isinstance(event, dict) and "item" in event:
                self.done_items.append(event["item"])
            at = data.find(_ITEM_DONE, at + 1)
        return None

    def abandoned(self) -> bytes | None:
        if not self.stream or self.started is None:
            return None  # a JSON answer is stored whole or not at all
        response = {**self.started, "status": "cancelled", "output": self.done_items}
        return _enc.encode(response)


class _Lifecycle(msgspec.Struct):
    response: msgspec.Raw = msgspec.Raw(b"")  # (Raw cannot join a union with None)


_lifecycle = msgspec.json.Decoder(_Lifecycle)
_T = TypeVar("_T")


def _event_data(data: bytes, at: int) -> bytes | None:
    """The data of the SSE event whose ``event:`` line starts at ``at``."""
    end = data.find(b"\n\n", at)
    decoder = SSEDecoder()
    events = decoder.decode(data[at : end + 2] if end >= 0 else data[at:]) or decoder.flush()
    return events[0].data if events else None


def _decode(decoder: msgspec.json.Decoder[_T], data: bytes | None) -> _T | None:
    if data is None:
        return None
    try:
        return decoder.decode(data)
    except msgspec.DecodeError:
        return None
