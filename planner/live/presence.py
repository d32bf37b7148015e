"""Which processes watch a session, in Redis (production mode), and whether Redis still knows us.

A turn publishes its frames over the channel layer only while a process
other than its own has watchers of the session: each process with watchers
says so in a sorted set per session (scored by expiry, refreshed by its relay).

A turn here that nobody elsewhere watched when it started is looked at again
every ``LOOK_SECONDS`` (:meth:`Presence.when_watched`): one round trip for all
such turns, rather than one per turn (200 turns streaming asked Redis 100 times
a second, each with a timer of its own).

Redis may restart (or be flushed) under a running process and forget its
group memberships without the process's connections ever failing: the relay
keeps a *mark* with a short expiry and checks every few seconds that Redis
still has it. A missing mark means everything this process told Redis is
gone, and the relay joins its groups again.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable, Sequence

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from planner.ground.process import PROCESS_ID

WATCH_TTL_SECONDS = 60
MARK_TTL_SECONDS = 60
LOOK_SECONDS = 2.0
LOOK_KEYS = 500  # sessions asked about in one script call

# For each key (a session's watchers), whether a process other than ARGV[2] watches it at
# ARGV[1]: the 1-based positions of those that are.
_WATCHED_ELSEWHERE = """
local out = {}
for i, key in ipairs(KEYS) do
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, ARGV[1], '+inf')) do
    if member ~= ARGV[2] then
      out[#out + 1] = i
      break
    end
  end
end
return out
"""

# A few connections, reused: hundreds of turns starting at once wait briefly for one instead
# of each opening its own (redis-py reads its package metadata for every new connection).
MAX_CONNECTIONS = 16


def _watchers_key(session_id: object) -> str:
    return f"ballet:watchers:{session_id}"


_MARK_KEY = f"ballet:relay:{PROCESS_ID}"


class Presence:
    """This process's presence in Redis, over a connection pool of its own (the relay's, opened
    on the event loop the hub runs on and closed with it)."""

    def __init__(self, redis_url: str) -> None:
        pool = aioredis.BlockingConnectionPool.from_url(
            redis_url,
            max_connections=MAX_CONNECTIONS,
            timeout=10,
            socket_timeout=5,
            socket_connect_timeout=2,
            retry=Retry(ExponentialBackoff(cap=1.0, base=0.1), 3),  # stale connections after a restart
        )
        self.client = aioredis.Redis(connection_pool=pool)
        self._watched_elsewhere = self.client.register_script(_WATCHED_ELSEWHERE)
        self._followed: dict[object, tuple[object, Callable[[], None]]] = {}
        self._looking: asyncio.Task[None] | None = None

    async def close(self) -> None:
        if self._looking is not None:
            self._looking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._looking
        with contextlib.suppress(redis.RedisError, RuntimeError):
            await self.client.aclose(close_connection_pool=True)

    async def watching(self, *session_ids: object) -> None:
        """Say (again) that this process has watchers of each of ``session_ids`` (one round trip)."""
        if not session_ids:
            return
        now = time.time()
        async with self.client.pipeline(transaction=False) as pipe:
            for session_id in session_ids:
                key = _watchers_key(session_id)
                pipe.zadd(key, {PROCESS_ID: now + WATCH_TTL_SECONDS})
                pipe.zremrangebyscore(key, "-inf", now)
                pipe.expire(key, WATCH_TTL_SECONDS * 2)
            await pipe.execute()

    async def not_watching(self, session_id: object) -> None:
        with contextlib.suppress(redis.RedisError):
            await self.client.zrem(_watchers_key(session_id), PROCESS_ID)

    async def watched_elsewhere(self, session_id: object) -> bool:
        """Does a process other than this one watch ``session_id``? (True when Redis cannot say.)"""
        return (await self.watched_elsewhere_of([session_id]))[0]

    async def watched_elsewhere_of(self, session_ids: Sequence[object]) -> list[bool]:
        """For each of ``session_ids``, does a process other than this one watch it? All True
        when Redis cannot say: when unsure, publish."""
        watched = [False] * len(session_ids)
        try:
            for start in range(0, len(session_ids), LOOK_KEYS):
                keys = [_watchers_key(s) for s in session_ids[start : start + LOOK_KEYS]]
                for position in await self._watched_elsewhere(keys=keys, args=[time.time(), PROCESS_ID]):
                    watched[start + int(position) - 1] = True
        except redis.RedisError:
            return [True] * len(session_ids)
        return watched

    def when_watched(self, session_id: object, then: Callable[[], None]) -> Callable[[], None]:
        """Call ``then`` once a process other than this one is found watching ``session_id``, by
        the look every ``LOOK_SECONDS`` at every session followed so; returns what stops following
        it (``then`` is called at most once, and not after that)."""
        token = object()
        self._followed[token] = (session_id, then)
        if self._looking is None:
            loop = asyncio.get_running_loop()
            self._looking = loop.create_task(self._look_often(), context=contextvars.Context())

        def unfollow() -> None:
            self._followed.pop(token, None)

        return unfollow

    async def _look_often(self) -> None:
        try:
            while self._followed:
                await asyncio.sleep(LOOK_SECONDS)
                followed = list(self._followed.items())
                watched = await self.watched_elsewhere_of([session_id for _, (session_id, _) in followed])
                for (token, (_, then)), elsewhere in zip(followed, watched, strict=True):
                    if elsewhere and self._followed.pop(token, None) is not None:
                        then()
        finally:
            self._looking = None

    async def mark(self) -> None:
        """Leave (or renew) this process's mark in Redis."""
        await self.client.set(_MARK_KEY, "1", ex=MARK_TTL_SECONDS)

    async def marked(self) -> bool:
        """Does Redis still have this process's mark? (Raises when Redis cannot be reached.)"""
        return bool(await self.client.exists(_MARK_KEY))
