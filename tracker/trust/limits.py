"""Rate counting for the limits of docs/trust.md#limits, in the cache every process shares.

A sliding window approximated by two fixed ones: the previous window's count
weighs by how much of it still falls inside the sliding window. It may let a
burst of concurrent requests slightly past the limit; it never refuses early.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, cache, caches
from django.core.cache.backends.redis import RedisCache
from django.utils.connection import ConnectionProxy
from redis import RedisError
from redis.commands.core import Script

from tracker.errors import RateLimitedError, UnavailableError

logger = logging.getLogger(__name__)
LIMITER_UNAVAILABLE = (
    "Ballet cannot count requests right now (its cache, Redis, is unavailable), so it only serves "
    "reads; try again in a few seconds."
)


def rate_hit(*, scope: str, key: object, limit: int, window_seconds: int) -> bool:
    """Count one event of ``key`` in ``scope``; False, counting nothing, when ``limit`` events
    already happened within the last ``window_seconds``."""
    now = time.time()
    window = int(now // window_seconds)
    current, previous = f"ballet:rate:{scope}:{key}:{window}", f"ballet:rate:{scope}:{key}:{window - 1}"
    elapsed = (now % window_seconds) / window_seconds
    # ``cache`` is Django's proxy of the default cache (or what a test puts in its place).
    backend = caches[DEFAULT_CACHE_ALIAS] if isinstance(cache, ConnectionProxy) else cache
    if isinstance(backend, RedisCache):  # production: one round trip
        keys = [backend.make_and_validate_key(current), backend.make_and_validate_key(previous)]
        client = backend._cache.get_client(write=True)  # type: ignore[attr-defined]  # the cache's own pool
        args = [repr(1 - elapsed), limit, 2 * window_seconds]
        return bool(_hit_script()(keys=keys, args=args, client=client))
    counts = cache.get_many([current, previous])
    estimate = counts.get(previous, 0) * (1 - elapsed) + counts.get(current, 0)
    if estimate >= limit:
        return False
    # Counted with one write when the window's counter exists (the common case).
    if (current in counts and _incremented(current)) or cache.add(current, 1, timeout=2 * window_seconds):
        return True
    _incremented(current)  # another process started the window meanwhile
    return True


# rate_hit on Redis, whole in one script (atomic, one round trip): the two windows read, the
# event counted if under the limit, a new window's counter set to expire. Counters are the plain
# integers Django's Redis cache writes and reads.
_HIT = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local previous = tonumber(redis.call('GET', KEYS[2]) or '0')
if previous * tonumber(ARGV[1]) + current >= tonumber(ARGV[2]) then return 0 end
if redis.call('INCR', KEYS[1]) == 1 then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return 1
"""


@functools.cache
def _hit_script() -> Any:
    """The script, sent by its digest (loaded into Redis on its first use, again after a restart)."""
    return Script(None, _HIT.encode())  # type: ignore[arg-type]  # a client is given at each call


def _incremented(key: str) -> bool:
    try:
        cache.incr(key)
    except ValueError:  # expired since it was read
        return False
    return True


def agent_request_count(*, user_id: int, write: bool) -> bool:
    """Count one MCP or question request of a token's user; RateLimitedError past the limit
    (``mcp_requests_per_minute``, docs/trust.md#limits).

    While the cache cannot be reached a read goes uncounted (logged; False), and a write is
    refused with UnavailableError: nothing would limit it."""
    limit = settings.BALLET_LIMITS.mcp_requests_per_minute
    try:
        allowed = rate_hit(scope="agent-request", key=user_id, limit=limit, window_seconds=60)
    except RedisError as exc:
        if write:
            raise UnavailableError(LIMITER_UNAVAILABLE) from exc
        logger.warning("an agent's read went uncounted: the cache is unavailable (%s)", exc)
        return False
    if not allowed:
        raise RateLimitedError(
            f"At most {limit} MCP and question requests a minute per token; try again in a few seconds."
        )
    return True
