"""Redis, for several instances behind a load balancer (``pip install
'proxai-asgi[redis]'``).

Each record is one hash under ``prefix + id`` (fields ``owner``, ``prev``, ``data``)
with a time to live, refreshed when read: nothing outlives its TTL, so the keyspace
cannot grow without bound (``maxmemory-policy volatile-lru`` on the server adds a
byte bound). Reads are Lua scripts, so walking a conversation's chain is one round
trip however long it is; they compute keys from the prefix, so the store needs a
single Redis (a primary with replicas), not a Redis Cluster.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .base import DEFAULT_TTL, MAX_CHAIN, StoredResponse, StoreUnavailable, decode, encode

if TYPE_CHECKING:
    from redis.asyncio import Redis

DEFAULT_PREFIX = "proxai:resp:"
DEFAULT_TIMEOUT = 2.0  # seconds: a store that does not answer is down, not slow

# ARGV: prefix, id, owner, ttl in ms, how many records at most. Returns the data of
# the record and its ancestors, newest first, refreshing each one's TTL.
_CHAIN = """
local out = {}
local id = ARGV[2]
for _ = 1, tonumber(ARGV[5]) do
  local key = ARGV[1] .. id
  local v = redis.call('HMGET', key, 'owner', 'prev', 'data')
  if not v[3] or v[1] ~= ARGV[3] then break end
  redis.call('PEXPIRE', key, ARGV[4])
  out[#out + 1] = v[3]
  if not v[2] or v[2] == '' then break end
  id = v[2]
end
return out
"""
# KEYS[1]: the record; ARGV[1]: owner. Deletes only the owner's own record.
_DELETE = """
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisStore:
    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl: float = DEFAULT_TTL,
        timeout: float = DEFAULT_TIMEOUT,
        client: Redis | None = None,
    ) -> None:
        if client is None:
            try:
                from redis.asyncio import Redis
            except ImportError:  # pragma: no cover - depends on the installed extras
                raise ImportError(
                    "a redis:// store needs the redis package: pip install 'proxai-asgi[redis]'"
                ) from None
            client = Redis.from_url(
                url, socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False
            )
        self.redis: Any = client
        self.url = _without_password(url)
        self.prefix = prefix
        self.ttl_ms = int(ttl * 1000)
        self._chain = self.redis.register_script(_CHAIN)
        self._delete = self.redis.register_script(_DELETE)

    async def _call(self, work: Any) -> Any:
        from redis.exceptions import RedisError

        try:
            return await work
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"redis store {self.url}: {type(exc).__name__}") from None

    async def put(self, record: StoredResponse) -> None:
        key = self.prefix + record.id
        fields = {"owner": record.owner, "prev": record.previous_id or "", "data": encode(record)}
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=fields)
            pipe.pexpire(key, self.ttl_ms)
            await self._call(pipe.execute())

    async def _walk(self, response_id: str, owner: str, limit: int) -> list[StoredResponse]:
        args: list[str | int] = [self.prefix, response_id, owner, self.ttl_ms, limit]
        found = await self._call(self._chain(keys=[], args=args))
        return [decode(data) for data in reversed(found)]

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        found = await self._walk(response_id, owner, 1)
        return found[0] if found else None

    async def chain(self, response_id: str, owner: str) -> list[StoredResponse]:
        return await self._walk(response_id, owner, MAX_CHAIN)

    async def delete(self, response_id: str, owner: str) -> bool:
        deleted = await self._call(self._delete(keys=[self.prefix + response_id], args=[owner]))
        return bool(deleted)

    async def owner_secret(self) -> bytes:
        """The owner-hash key kept in Redis beside the records (no TTL): set at random
        by the first instance (``SET NX``), read by every other one, so a fleet and
        its restarts agree on owners without a configured secret. (Its name holds a
        ``:``, which no response id does.)"""
        key = self.prefix + "_meta:owner_secret"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(key, os.urandom(32).hex(), nx=True)  # text: any client decoding reads it
            pipe.get(key)
            _, value = await self._call(pipe.execute())
        return value.encode() if isinstance(value, str) else bytes(value)

    async def aclose(self) -> None:
        await self.redis.aclose()


def _without_password(url: str) -> str:
    """The URL for messages: a password in it never reaches a log."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = rest.rsplit("@", 1)[1]
    return scheme + sep + rest
