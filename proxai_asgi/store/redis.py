"""Redis, for several instances behind a load balancer (``pip install
'proxai-asgi[redis]'``).

Each record is one hash under ``prefix + id`` (fields ``owner``, ``prev``, ``data``)
with a time to live, refreshed when read: nothing outlives its TTL, so the keyspace
cannot grow without bound (``maxmemory-policy volatile-lru`` on the server adds a
byte bound). Each owner's ids are also a sorted set (by last use), under a key no
record id can name, which bounds each owner to ``max_owner_entries`` records (its
least recently used go first), so one tenant cannot evict the others. Writes and
reads are Lua scripts: a put only ever inserts (a held id is refused, never
replaced), and walking a conversation's chain is one round trip however long it is
and never visits a record twice. The scripts compute keys from the prefix, so the
store needs a single Redis (a primary with replicas), not a Redis Cluster.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .base import DEFAULT_TTL, MAX_CHAIN, StoredResponse, StoreUnavailable, decode, encode

if TYPE_CHECKING:
    from redis.asyncio import Redis

DEFAULT_PREFIX = "proxai:resp:"
DEFAULT_TIMEOUT = 2.0  # seconds: a store that does not answer is down, not slow
DEFAULT_MAX_OWNER_ENTRIES = 25_000

# KEYS: the record, its owner's set. ARGV: owner, prev, data, ttl in ms, now in ms,
# the owner's bound, the record prefix, the id. Inserts only (0: the id is held);
# then drops the owner's expired ids from its set and its least recently used
# records past its bound. (Scores are last use in ms, kept distinct in the order of
# the puts, so ties cannot order by id.)
_PUT = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'prev', ARGV[2], 'data', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
local now = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[4]))
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if last[2] and tonumber(last[2]) >= now then now = tonumber(last[2]) + 1 end
redis.call('ZADD', KEYS[2], now, ARGV[8])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[6])
if over > 0 then
  for _, old in ipairs(redis.call('ZRANGE', KEYS[2], 0, over - 1)) do
    local key = ARGV[7] .. old
    if redis.call('HGET', key, 'owner') == ARGV[1] then redis.call('DEL', key) end
  end
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
end
return 1
"""
# ARGV: prefix, id, owner, ttl in ms, how many records at most, the owner's set, now
# in ms. Returns the data of the record and its ancestors, newest first, refreshing
# each one's TTL and place in its owner's set; an id seen once ends the walk.
_CHAIN = """
local out = {}
local seen = {}
local id = ARGV[2]
for _ = 1, tonumber(ARGV[5]) do
  if seen[id] then break end
  seen[id] = true
  local key = ARGV[1] .. id
  local v = redis.call('HMGET', key, 'owner', 'prev', 'data')
  if not v[3] or v[1] ~= ARGV[3] then break end
  redis.call('PEXPIRE', key, ARGV[4])
  redis.call('ZADD', ARGV[6], 'XX', ARGV[7], id)
  out[#out + 1] = v[3]
  if not v[2] or v[2] == '' then break end
  id = v[2]
end
if #out > 0 then redis.call('PEXPIRE', ARGV[6], ARGV[4]) end
return out
"""
# KEYS[1]: the record, KEYS[2]: its owner's set; ARGV[1]: owner, ARGV[2]: the id.
# Deletes only the owner's own record.
_DELETE = """
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  redis.call('ZREM', KEYS[2], ARGV[2])
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def owners_prefix(prefix: str) -> str:
    """Where the owners' sets live: beside ``prefix`` (differing in its last
    character), so no record key, whatever id a client names, is one of them."""
    if not prefix:
        raise ValueError("the redis store needs a non-empty key prefix")
    return prefix[:-1] + ("#" if prefix[-1] != "#" else "+") + "owner:"


class RedisStore:
    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl: float = DEFAULT_TTL,
        timeout: float = DEFAULT_TIMEOUT,
        client: Redis | None = None,
        max_owner_entries: int = DEFAULT_MAX_OWNER_ENTRIES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_owner_entries < 1:
            raise ValueError("max_owner_entries must be positive")
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
        self.owners_prefix = owners_prefix(prefix)
        self.ttl_ms = int(ttl * 1000)
        self.max_owner_entries = max_owner_entries
        self.clock = clock
        self._put = self.redis.register_script(_PUT)
        self._chain = self.redis.register_script(_CHAIN)
        self._delete = self.redis.register_script(_DELETE)

    async def _call(self, work: Any) -> Any:
        from redis.exceptions import RedisError

        try:
            return await work
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"redis store {self.url}: {type(exc).__name__}") from None

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    async def put(self, record: StoredResponse) -> bool:
        keys = [self.prefix + record.id, self.owners_prefix + record.owner]
        args: list[str | int | bytes] = [
            record.owner,
            record.previous_id or "",
            encode(record),
            self.ttl_ms,
            self._now_ms(),
            self.max_owner_entries,
            self.prefix,
            record.id,
        ]
        return bool(await self._call(self._put(keys=keys, args=args)))

    async def _walk(self, response_id: str, owner: str, limit: int) -> list[StoredResponse]:
        args: list[str | int] = [
            self.prefix,
            response_id,
            owner,
            self.ttl_ms,
            limit,
            self.owners_prefix + owner,
            self._now_ms(),
        ]
        found = await self._call(self._chain(keys=[], args=args))
        return [decode(data) for data in reversed(found)]

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        found = await self._walk(response_id, owner, 1)
        return found[0] if found else None

    async def chain(self, response_id: str, owner: str) -> list[StoredResponse]:
        return await self._walk(response_id, owner, MAX_CHAIN)

    async def delete(self, response_id: str, owner: str) -> bool:
        keys = [self.prefix + response_id, self.owners_prefix + owner]
        deleted = await self._call(self._delete(keys=keys, args=[owner, response_id]))
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
