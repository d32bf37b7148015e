"""Which processes watch a session, in Redis (production mode), and whether Redis still knows us.

A turn publishes its frames over the channel layer only while a process
other than its own has watchers of the session: each process with watchers
says so in a sorted set per session (scored by expiry, refreshed by its relay).

Redis may restart (or be flushed) under a running process and forget its
group memberships without the process's connections ever failing: the relay
keeps a *mark* with a short expiry and checks every few seconds that Redis
still has it. A missing mark means everything this process told Redis is
gone, and the relay joins its groups again.
"""

from __future__ import annotations

import contextlib
import time

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from planner.ground.process import PROCESS_ID

WATCH_TTL_SECONDS = 60
MARK_TTL_SECONDS = 60

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

    async def close(self) -> None:
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
        """Does a process other than this one watch ``session_id``?"""
        try:
            members = await self.client.zrangebyscore(_watchers_key(session_id), time.time(), "+inf")
        except redis.RedisError:
            return True  # when unsure, publish
        return any((m.decode() if isinstance(m, bytes) else str(m)) != PROCESS_ID for m in members)

    async def mark(self) -> None:
        """Leave (or renew) this process's mark in Redis."""
        await self.client.set(_MARK_KEY, "1", ex=MARK_TTL_SECONDS)

    async def marked(self) -> bool:
        """Does Redis still have this process's mark? (Raises when Redis cannot be reached.)"""
        return bool(await self.client.exists(_MARK_KEY))
