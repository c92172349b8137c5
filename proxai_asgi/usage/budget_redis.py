"""Budget counters in Redis, shared by every instance and worker.

A counter is one hash under ``prefix + "<budget>:<window>:<scope>"`` (fields ``used``,
``held`` and ``h:<hold id>`` per hold) and a sorted set beside it (``#h`` appended) of
its holds by expiry. Admission is one Lua script over every counter a request draws
on: holds past their expiry are dropped, then either every counter has room and the
request holds its amount on each, or nothing changes — so no two instances can both
take a budget's last room. Settling is one script too (the hold replaced by what was
used). Keys expire (``PEXPIRE``) when their window is over and its last holds have
lapsed, so owners times windows never accumulate. Times are the instances' clocks
(``clock``, NTP-synchronised), so windows and hold expiries agree across instances;
the scripts compute nothing from keys, yet a request's counters may lie in several
slots: a single Redis (a primary with replicas), not a Redis Cluster.

Redis down fails no request (fail-open, bounded): each instance then enforces the
budgets on its own view (a ``MemoryBudgets`` that every admission through Redis raises
to the totals Redis reported), counting its own traffic from there; one warning is
logged per outage, and one when Redis answers again. Use settled during an outage
stays in that instance's view; holds taken then and settled after it are added to
Redis too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..routing.shared_redis import (
    DEFAULT_BACKOFF,
    DEFAULT_TIMEOUT,
    _Outage,
    shared_client,
    where,
)
from ..store.redis import RedisStore
from .budget_memory import MemoryBudgets
from .holds import BudgetEngine, Draw, Hold

if TYPE_CHECKING:
    from redis.asyncio import Redis

DEFAULT_PREFIX = "proxai:budget:"

# KEYS: per counter, its hash and its holds' set. ARGV: now ms, hold id, then per
# counter: limit, amount, hold expiry ms, key ttl ms. Returns the admitted flag, then
# per counter its used and held amounts before this request (as strings: Lua numbers
# come back truncated) and whether it is spent.
_TAKE = """
local now = tonumber(ARGV[1])
local out = {1}
for i = 1, #KEYS, 2 do
  local c, z = KEYS[i], KEYS[i + 1]
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', z, '-inf', now)) do
    local a = redis.call('HGET', c, 'h:' .. id)
    if a then
      redis.call('HINCRBYFLOAT', c, 'held', -tonumber(a))
      redis.call('HDEL', c, 'h:' .. id)
    end
  end
  redis.call('ZREMRANGEBYSCORE', z, '-inf', now)
  if redis.call('ZCARD', z) == 0 then redis.call('HDEL', c, 'held') end
  local v = redis.call('HMGET', c, 'used', 'held')
  local used, held = tonumber(v[1]) or 0, math.max(tonumber(v[2]) or 0, 0)
  local spent = 0
  if used + held >= tonumber(ARGV[3 + (i - 1) * 2]) then
    spent = 1
    out[1] = 0
  end
  out[#out + 1] = tostring(used)
  out[#out + 1] = tostring(held)
  out[#out + 1] = spent
end
if out[1] == 1 then
  for i = 1, #KEYS, 2 do
    local c, z, a = KEYS[i], KEYS[i + 1], 3 + (i - 1) * 2
    redis.call('HINCRBYFLOAT', c, 'held', ARGV[a + 1])
    redis.call('HSET', c, 'h:' .. ARGV[2], ARGV[a + 1])
    redis.call('ZADD', z, ARGV[a + 2], ARGV[2])
    redis.call('PEXPIRE', c, ARGV[a + 3])
    redis.call('PEXPIRE', z, ARGV[a + 3])
  end
end
return out
"""
# KEYS: per counter, its hash and its holds' set. ARGV: hold id, then per counter:
# the amount used, key ttl ms. The hold (when still there) released, the use added.
_SETTLE = """
for i = 1, #KEYS, 2 do
  local c, z, a = KEYS[i], KEYS[i + 1], 2 + (i - 1)
  local held = redis.call('HGET', c, 'h:' .. ARGV[1])
  if held then
    redis.call('HINCRBYFLOAT', c, 'held', -tonumber(held))
    redis.call('HDEL', c, 'h:' .. ARGV[1])
    redis.call('ZREM', z, ARGV[1])
  end
  if tonumber(ARGV[a]) > 0 then redis.call('HINCRBYFLOAT', c, 'used', ARGV[a]) end
  redis.call('PEXPIRE', c, ARGV[a + 1])
end
return 1
"""


def _ms(seconds: float) -> int:
    return max(int(seconds * 1000), 1)


class RedisBudgets:
    """``BudgetEngine`` in Redis (``url``, or an existing ``client``: the response
    store's, so both share one connection pool; a client given is not closed here)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Redis | None = None,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = DEFAULT_TIMEOUT,
        backoff: float = DEFAULT_BACKOFF,
        local: MemoryBudgets | None = None,
    ) -> None:
        self._owns_client = client is None
        self.redis: Any = shared_client(url, client, timeout, "RedisBudgets")
        self.prefix = prefix
        self.timeout = timeout
        self.local = local if local is not None else MemoryBudgets()
        self.outage = _Outage(self._ping, where(url, self.redis), backoff, what="budgets")
        self._take = self.redis.register_script(_TAKE)
        self._settle = self.redis.register_script(_SETTLE)

    async def _ping(self) -> None:
        async with asyncio.timeout(self.timeout):
            await self.redis.ping()

    def _keys(self, hold: Hold) -> list[str]:
        keys = []
        for d in hold.draws:
            counter = f"{self.prefix}{d.budget}:{d.window}:{d.scope}"
            keys += [counter, counter + "#h"]
        return keys

    async def take(self, hold: Hold, now: float) -> list[int]:
        args: list[Any] = [int(now * 1000), hold.id]
        for d in hold.draws:
            # The key outlives its window by the hold's time to live: a late settle
            # still finds its hold.
            args += [repr(d.limit), repr(d.amount), int(d.expires * 1000), _ms(_keep(d, now))]
        keys = self._keys(hold)
        ok, answer = await self.outage.run(lambda: self._take(keys=keys, args=args), self.timeout)
        if not ok or answer is None:
            return self.local.take_now(hold, now)
        hold.shared = True
        refused = []
        for i, d in enumerate(hold.draws):
            used, held, spent = answer[1 + 3 * i : 4 + 3 * i]
            # The view for an outage follows Redis's.
            self.local.floor(d, float(used) + float(held))
            if int(spent):
                refused.append(i)
        return refused

    async def settle(self, hold: Hold, used: Sequence[float], now: float) -> None:
        draws = [(d, u) for d, u in zip(hold.draws, used, strict=True) if now < d.ends]
        if not draws:
            return
        if not hold.shared:
            self.local.settle_now(hold, used, now)
        kept = Hold([d for d, _ in draws])
        kept.id = hold.id
        args: list[Any] = [hold.id]
        for d, u in draws:
            args += [repr(u), _ms(_keep(d, now))]
        keys = self._keys(kept)
        await self.outage.run(lambda: self._settle(keys=keys, args=args), self.timeout)
        if hold.shared:
            # The view for an outage counts this instance's use (whether Redis took it
            # or not: ``floor`` never adds what Redis reports on top).
            for d, u in draws:
                self.local.counter(d).used += u

    async def aclose(self) -> None:
        await self.outage.aclose()
        if self._owns_client:
            await self.redis.aclose()


def _keep(d: Draw, now: float) -> float:
    """How long a counter's keys live from ``now``: its window, then its holds' TTL."""
    return d.ends - now + max(d.expires - now, 0.0)


def shared_engine(store: object) -> BudgetEngine:
    """The engine ``store`` implies: Redis for a Redis URL (``redis://``, ``rediss://``,
    ``unix://``) or an opened ``RedisStore`` (on its client), else memory."""
    if isinstance(store, str) and store.startswith(("redis://", "rediss://", "unix://")):
        return RedisBudgets(store)
    if isinstance(store, RedisStore):
        return RedisBudgets(store.url, client=store.redis)
    return MemoryBudgets()
