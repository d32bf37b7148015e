"""Which Ballet processes are alive, and which watch a session (production mode, in Redis).

Every process that runs turns keeps a key with a short expiry and refreshes it
while it runs them; a process killed outright stops refreshing, and its key is
gone within ``TTL_SECONDS``, so its turns can be recovered. Processes that
have watchers of a session say so, so that a turn publishes its frames over
the channel layer only when someone in another process listens. In the
embedded mode there is one process: another owner is always a dead one, and
nobody watches from elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time

import redis
import redis.asyncio as aioredis
from django.conf import settings

from planner.process import PROCESS_ID, running_here

logger = logging.getLogger(__name__)

TTL_SECONDS = 10
REFRESH_SECONDS = 3.0
KEY_PREFIX = "ballet:process:"

_refresher: asyncio.Task[None] | None = None


def _key(process_id: str) -> str:
    return f"{KEY_PREFIX}{process_id}"


@functools.cache
def _sync_client() -> redis.Redis:
    return redis.Redis.from_url(settings.SERVER.redis_url or "", socket_timeout=2, socket_connect_timeout=2)


def process_alive(process_id: str) -> bool:
    """True while ``process_id`` keeps its presence key (production mode)."""
    try:
        return bool(_sync_client().exists(_key(process_id)))
    except redis.RedisError:
        logger.warning("cannot reach Redis to check process %s; assuming it is alive", process_id)
        return True


async def announce() -> None:
    """Mark this process alive now, and keep it so while the event loop runs."""
    global _refresher  # noqa: PLW0603 - one refresher per process
    if not settings.PRODUCTION_MODE:
        return
    if not running_here(_refresher):
        client = aioredis.Redis.from_url(settings.SERVER.redis_url or "")
        await client.set(_key(PROCESS_ID), "1", ex=TTL_SECONDS)
        _refresher = asyncio.get_running_loop().create_task(_refresh(client))


async def _refresh(client: aioredis.Redis) -> None:
    try:
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            with contextlib.suppress(redis.RedisError):
                await client.set(_key(PROCESS_ID), "1", ex=TTL_SECONDS)
    finally:
        with contextlib.suppress(Exception):
            await client.aclose()


# Who watches a session from which process: a sorted set of process ids scored by expiry.
WATCH_TTL_SECONDS = 60
WATCH_REFRESH_SECONDS = 20.0
_clients: dict[asyncio.AbstractEventLoop, aioredis.Redis] = {}


def _watchers_key(session_id: object) -> str:
    return f"ballet:watchers:{session_id}"


# A few connections, reused: hundreds of turns starting at once wait briefly for one instead
# of each opening its own (redis-py reads its package metadata for every new connection).
MAX_CONNECTIONS = 16


def _client() -> aioredis.Redis:
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.SERVER.redis_url or "", max_connections=MAX_CONNECTIONS, timeout=10, socket_timeout=10
        )
        client = _clients[loop] = aioredis.Redis(connection_pool=pool)
    return client


async def watching(*session_ids: object) -> None:
    """Say (again) that this process has watchers of each of ``session_ids`` (one round trip)."""
    if not session_ids:
        return
    now = time.time()
    async with _client().pipeline(transaction=False) as pipe:
        for session_id in session_ids:
            key = _watchers_key(session_id)
            pipe.zadd(key, {PROCESS_ID: now + WATCH_TTL_SECONDS})
            pipe.zremrangebyscore(key, "-inf", now)
            pipe.expire(key, WATCH_TTL_SECONDS * 2)
        await pipe.execute()


async def not_watching(session_id: object) -> None:
    with contextlib.suppress(redis.RedisError):
        await _client().zrem(_watchers_key(session_id), PROCESS_ID)


async def watched_elsewhere(session_id: object) -> bool:
    """Does a process other than this one watch ``session_id``?"""
    try:
        members = await _client().zrangebyscore(_watchers_key(session_id), time.time(), "+inf")
    except redis.RedisError:
        return True  # when unsure, publish
    return any((m.decode() if isinstance(m, bytes) else str(m)) != PROCESS_ID for m in members)
