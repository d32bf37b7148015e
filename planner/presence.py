"""Which Ballet processes are alive, so that a turn whose process died can be recovered.

In production mode every process that runs turns keeps a key in Redis with a
short expiry and refreshes it while it runs them; a process killed outright
stops refreshing, and its key is gone within ``TTL_SECONDS``. In the embedded
mode there is one process, so another owner is always a dead one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging

import redis
import redis.asyncio as aioredis
from django.conf import settings

from planner.process import PROCESS_ID

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
    if _refresher is None or _refresher.done() or _refresher.get_loop() is not asyncio.get_running_loop():
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
