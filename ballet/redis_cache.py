"""Django's Redis cache with one client, and so one connection pool, per process.

Django makes a cache backend per async context (``caches`` is context-local), and each
``RedisCache`` made its own client and pool: every request, and every turn's begin in a thread
of its own, opened a new connection to Redis (a TCP connect, redis-py's handshake, its version
read from the package's metadata on disk) and left it to the garbage collector. With the client
shared, a rate count is one round trip on a connection already open.

Django's client also builds a new ``redis.Redis`` around its pool for every operation, and
redis-py's constructor fills a table of some 170 response callbacks and its observability hooks
each time: 0.3-0.35 ms of a rate count's 0.5 on this machine, more than the round trip. Here each
pool has one ``redis.Redis``, built once (it is thread-safe: each command takes a connection of
the pool).
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property

_clients: dict[str, Any] = {}
_lock = threading.Lock()


class _OneClientPerPool(RedisCacheClient):
    """``RedisCacheClient`` whose ``get_client`` returns the same ``redis.Redis`` for a pool each
    time, where Django's builds a new one per call."""

    def __init__(self, servers: list[str], **options: Any) -> None:
        super().__init__(servers, **options)
        self._per_pool: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        index = self._get_connection_pool_index(write)  # type: ignore[attr-defined]  # Django's, unstubbed
        client = self._per_pool.get(index)
        if client is None:
            with _lock:  # one pool, and one client, per index even when threads race for them
                client = self._per_pool.get(index)
                if client is None:
                    client = self._per_pool[index] = super().get_client(key, write=write)
        return client


class SharedRedisCache(RedisCache):
    """``RedisCache`` whose client is the one every backend of the same servers and options shares
    (redis-py's pool is thread-safe, and after a fork it opens its own connections)."""

    @cached_property
    def _cache(self) -> Any:
        # RedisCache's own attributes, which django-stubs leaves out.
        servers, options = self._servers, self._options  # type: ignore[attr-defined]
        key = repr((servers, sorted(options.items())))
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = _OneClientPerPool(servers, **options)
        return client
