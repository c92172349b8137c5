"""The routing state shared by every worker and instance: Redis.

Each operation is one round trip, atomic (a Lua script or a single command), and
every key has a time to live kept by Redis itself (``PX``), so instances whose clocks
differ agree on when a cooldown ends, and nothing grows without bound. Keys, under
``prefix``: ``c:<name>`` a cooldown, ``f:<name>`` its remembered failure (the streak),
``p:<name>`` a probe's claim, ``b:<session>`` a binding (``"<ttl ms> <target>"``).

Redis down never fails a request: the operation answers from this process's own view
(a ``MemoryRoutingState`` that every write and every cooldown read here also goes to),
one warning is logged per outage, and Redis is left alone (retried by a background
ping, backing off) until it answers again, which is logged too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..store.redis import _without_password
from .health import MemoryRoutingState, probation

if TYPE_CHECKING:
    from redis.asyncio import Redis

logger = logging.getLogger("proxai_asgi")

DEFAULT_PREFIX = "proxai:route:"
# On the path of every request: a Redis slower than this is treated as down.
DEFAULT_TIMEOUT = 0.5
DEFAULT_BACKOFF = 1.0  # first wait before Redis is tried again; doubles up to:
MAX_BACKOFF = 30.0

_T = TypeVar("_T")

# KEYS: (cooldown, failure) per name. Per name: the cooldown's ms left, 0 when it
# lapsed but the failure is remembered, -1 when it is not failing.
_COOLED = """
local out = {}
for i = 1, #KEYS, 2 do
  local left = redis.call('PTTL', KEYS[i])
  if left > 0 then out[#out + 1] = left
  elseif redis.call('EXISTS', KEYS[i + 1]) == 1 then out[#out + 1] = 0
  else out[#out + 1] = -1 end
end
return out
"""
# KEYS: cooldown, failure, probe. ARGV: cooldown ms, remembered ms after it. Only
# lengthens; counts a cooldown in a row only when none is running.
_COOL = """
local ms = tonumber(ARGV[1])
local left = redis.call('PTTL', KEYS[1])
local streak = tonumber(redis.call('GET', KEYS[2]))
if not streak or left <= 0 then streak = redis.call('INCR', KEYS[2]) end
if left < ms then
  redis.call('SET', KEYS[1], '1', 'PX', ms)
  left = ms
end
local keep = left + tonumber(ARGV[2])
if redis.call('PTTL', KEYS[2]) < keep then redis.call('PEXPIRE', KEYS[2], keep) end
redis.call('DEL', KEYS[3])
return streak
"""
# KEYS: cooldown, failure, probe. ARGV: the claim's ms.
_CLAIM = """
if redis.call('PTTL', KEYS[1]) > 0 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then return 1 end
if redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[1]) then return 1 end
return 0
"""
# KEYS: the binding. Its value, its TTL renewed from the ms it starts with.
_BOUND = """
local v = redis.call('GET', KEYS[1])
if not v then return false end
local i = string.find(v, ' ', 1, true)
if i then redis.call('PEXPIRE', KEYS[1], string.sub(v, 1, i - 1)) end
return v
"""


def _ms(seconds: float) -> int:
    return max(int(seconds * 1000), 1)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class _Outage:
    """Whether Redis is used now. A failure marks it down (one warning); while down
    nothing waits on it: after ``backoff`` one background ping tries it again.
    ``what`` names the shared state in the log lines (the budgets use it too)."""

    def __init__(
        self,
        ping: Callable[[], Awaitable[Any]],
        url: str,
        backoff: float,
        what: str = "routing state",
    ) -> None:
        from redis.exceptions import ConnectionError as Closed
        from redis.exceptions import RedisError

        self.ping = ping
        self.url = url
        self.backoff = backoff
        self.what = what
        self._errors = (RedisError, OSError)  # (TimeoutError is an OSError)
        self._closed = Closed
        self.down = False
        self._wait = backoff
        self._retry_at = 0.0
        self._pinging: asyncio.Task[None] | None = None

    def usable(self) -> bool:
        if not self.down:
            return True
        if self._pinging is None and time.monotonic() >= self._retry_at:
            self._pinging = asyncio.get_running_loop().create_task(self._try_again())
        return False

    def failed(self, exc: BaseException) -> None:
        if not self.down:
            self.down = True
            self._wait = self.backoff
            logger.warning(
                "%s: Redis unavailable, using this process's own view (%s: %s)",
                self.what,
                self.url,
                type(exc).__name__,
            )
        self._retry_at = time.monotonic() + self._wait

    async def _try_again(self) -> None:
        try:
            await self.ping()
        except Exception as exc:  # (any failure: still down)
            self._wait = min(self._wait * 2, MAX_BACKOFF)
            self.failed(exc)
        else:
            self.down = False
            logger.warning("%s: Redis %s answers again, sharing %s", self.what, self.url, self.what)
        finally:
            self._pinging = None

    async def run(
        self, work: Callable[[], Awaitable[_T]], timeout: float
    ) -> tuple[bool, _T | None]:
        """(True, the answer), or (False, None) when Redis is down."""
        if not self.usable():
            return False, None
        try:
            async with asyncio.timeout(timeout):
                try:
                    return True, await work()
                except self._closed:
                    # A pooled connection the server closed (idle timeout, restart):
                    # once more, on a new one, before calling Redis down.
                    return True, await work()
        except self._errors as exc:
            self.failed(exc)
            return False, None

    async def aclose(self) -> None:
        if self._pinging is not None:
            self._pinging.cancel()
            await asyncio.gather(self._pinging, return_exceptions=True)


class RedisRoutingState:
    """``RoutingState`` in Redis (``url``, or an existing ``client``: the response
    store's, so both share one connection pool; a client given is not closed here)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Redis | None = None,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = DEFAULT_TIMEOUT,
        backoff: float = DEFAULT_BACKOFF,
        local: MemoryRoutingState | None = None,
    ) -> None:
        self._owns_client = client is None
        self.redis: Any = shared_client(url, client, timeout, "RedisRoutingState")
        self.prefix = prefix
        self.timeout = timeout
        self.local = local if local is not None else MemoryRoutingState()
        self.outage = _Outage(self._ping, where(url, self.redis), backoff)
        self._cooled = self.redis.register_script(_COOLED)
        self._cool = self.redis.register_script(_COOL)
        self._claim = self.redis.register_script(_CLAIM)
        self._bound = self.redis.register_script(_BOUND)

    async def _ping(self) -> None:
        async with asyncio.timeout(self.timeout):
            await self.redis.ping()

    async def _run(self, work: Callable[[], Awaitable[_T]]) -> tuple[bool, _T | None]:
        """(True, the answer), or (False, None) when Redis is down."""
        return await self.outage.run(work, self.timeout)

    def _keys(self, name: str) -> list[str]:
        p = self.prefix
        return [p + "c:" + name, p + "f:" + name, p + "p:" + name]

    async def cooled(self, names: Sequence[str]) -> dict[str, float]:
        if not names:
            return {}
        keys = [k for name in names for k in self._keys(name)[:2]]
        ok, left = await self._run(lambda: self._cooled(keys=keys))
        if not ok or left is None:
            return await self.local.cooled(names)
        found: dict[str, float] = {}
        for name, ms in zip(names, left, strict=True):
            # The local view follows Redis's, for an outage.
            if ms >= 0:
                found[name] = ms / 1000
                self.local.learn(name, ms / 1000, count=False)
            elif self.local.knows(name):
                await self.local.recovered(name)
        return found

    async def cool(self, name: str, seconds: float) -> int:
        streak = await self.local.cool(name, seconds)
        args = [_ms(seconds), _ms(probation(seconds))]
        ok, shared = await self._run(lambda: self._cool(keys=self._keys(name), args=args))
        return int(shared) if ok and shared is not None else streak

    async def recovered(self, name: str) -> None:
        # Every cooldown in Redis a request could have seen is in the local view
        # (``cooled`` copies them): a success of a name not in it has nothing to clear,
        # and the healthy path pays no round trip.
        if not self.local.knows(name):
            return
        await self.local.recovered(name)
        await self._run(lambda: self.redis.delete(*self._keys(name)))

    async def claim_probe(self, name: str, seconds: float) -> bool:
        args = [_ms(seconds)]
        ok, won = await self._run(lambda: self._claim(keys=self._keys(name), args=args))
        if not ok or won is None:
            return await self.local.claim_probe(name, seconds)
        return bool(won)

    async def bound(self, session: str) -> str | None:
        key = self.prefix + "b:" + session
        ok, value = await self._run(lambda: self._bound(keys=[key]))
        if not ok:
            return await self.local.bound(session)
        if value is None:
            return None
        ms, _, target = _text(value).partition(" ")
        if not ms.isdigit():  # (not written by this code)
            return None
        await self.local.bind(session, target, int(ms) / 1000)
        return target

    async def bind(self, session: str, target: str, ttl: float) -> None:
        await self.local.bind(session, target, ttl)
        key, ms = self.prefix + "b:" + session, _ms(ttl)
        await self._run(lambda: self.redis.set(key, f"{ms} {target}", px=ms))

    async def aclose(self) -> None:
        await self.outage.aclose()
        await self.local.aclose()
        if self._owns_client:
            await self.redis.aclose()


def shared_client(url: str | None, client: Redis | None, timeout: float, who: str) -> Any:
    """``client`` (the response store's, to share its pool), else one for ``url`` whose
    every call gives up after ``timeout`` seconds (a Redis that does not answer is down)."""
    if client is not None:
        return client
    if url is None:
        raise ValueError(f"{who} needs a url or a client")
    from redis.asyncio import Redis

    return Redis.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False
    )


def where(url: str | None, client: Any) -> str:
    """The server a log line names, its password left out."""
    return _without_password(url or _client_url(client))


def _client_url(client: Any) -> str:
    """Where a client given connects, for messages (host and port, no password)."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    if "path" in kwargs:
        return "unix://" + str(kwargs["path"])
    return f"redis://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"
