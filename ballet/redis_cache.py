"""Django's Redis cache with one client, and so one connection pool, per process.

Django makes a cache backend per async context (``caches`` is context-local), and each
``RedisCache`` made its own client and pool: every request, and every turn's begin in a thread
of its own, opened a new connection to Redis (a TCP connect, redis-py's handshake, its version
read from the package's metadata on disk) and left it to the garbage collector. With the client
shared, a rate count is one round trip on a connection already open.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache
from django.utils.functional import cached_property

_clients: dict[str, Any] = {}
_lock = threading.Lock()


class SharedRedisCache(RedisCache):
    """``RedisCache`` whose client is the one every backend of the same servers and options shares
    (redis-py's pool is thread-safe, and after a fork it opens its own connections)."""

    @cached_property
    def _cache(self) -> Any:
        # RedisCache's own attributes, which django-stubs leaves out.
        servers, options, make = self._servers, self._options, self._class  # type: ignore[attr-defined]
        key = repr((make, servers, sorted(options.items())))
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = make(servers, **options)
        return client
