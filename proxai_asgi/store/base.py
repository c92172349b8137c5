"""The store interface: what a stored Responses answer is, and what a backend does.

A record holds one turn: the items the client sent in that request (``input``), the
response object exactly as the client received it (``response``, whose ``output`` is
the turn's answer), and the id of the response it continued (``previous_id``). A
conversation is the chain of its turns, so each item is kept once however long the
conversation grows; ``chain`` walks it in one call (one SQL query, one Redis script).

Records are encoded with msgspec as JSON; the items and the response stay raw JSON
slices (``msgspec.Raw``), so reading a record never parses a conversation.
Every read names the owner: a record of another owner is as absent as an unknown
one, so ids can never be probed across owners.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

# A chain longer than this is cut. (Ids are minted at random and records only ever
# inserted; every engine also steps only to strictly older records, so a chain
# cannot loop even in a store written by something else.)
MAX_CHAIN = 100_000
DEFAULT_TTL = 30 * 24 * 3600.0  # OpenAI keeps stored responses 30 days


class StoredResponse(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    owner: str
    created_at: float  # unix seconds
    previous_id: str | None = None
    input: list[msgspec.Raw]  # this turn's input items, each with an ``id``
    response: msgspec.Raw  # the response object as returned to the client

    def size(self) -> int:
        """Bytes the record occupies once encoded (near enough for bounds)."""
        return (
            96
            + len(self.id)
            + len(self.owner)
            + len(self.response)
            + sum(len(item) + 1 for item in self.input)
        )


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(StoredResponse)


def encode(record: StoredResponse) -> bytes:
    return _encoder.encode(record)


def decode(data: bytes) -> StoredResponse:
    return _decoder.decode(data)


class StoreUnavailable(Exception):
    """The backend cannot be reached or failed; the message says why (no secrets)."""


class ResponseStore(Protocol):
    """An async store of Responses answers, partitioned by owner.

    Reads refresh a record's time to live (a conversation in use does not expire
    under its client). Any backend failure raises ``StoreUnavailable``.
    """

    async def put(self, record: StoredResponse) -> bool:
        """Insert the record; False, writing nothing, when its id is already held: a
        record is never replaced (ids are the store layer's, minted at random)."""
        ...

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        """The record, or None when unknown, expired, deleted or another owner's."""
        ...

    async def chain(self, response_id: str, owner: str) -> list[StoredResponse]:
        """The conversation ending at ``response_id``, oldest turn first: the record
        and its ancestors through ``previous_id``. Empty when the record is absent;
        it stops early (the first record then has a ``previous_id``) where an
        ancestor is gone."""
        ...

    async def delete(self, response_id: str, owner: str) -> bool:
        """Delete the record; False when there was none for this owner."""
        ...

    async def aclose(self) -> None: ...
