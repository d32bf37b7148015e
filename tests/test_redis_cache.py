"""The Redis cache's client is shared by every backend Django makes (ballet/redis_cache.py): one
per async context, each of which used to open its own pool and connection."""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis
import redis.connection
from django.conf import settings
from django.core.cache import caches

from ballet.redis_cache import SharedRedisCache
from tracker.trust.limits import rate_hit


def backend(location: str = "redis://127.0.0.1:1/0", **options: object) -> SharedRedisCache:
    return SharedRedisCache(location, {"OPTIONS": options})


def test_backends_of_the_same_servers_and_options_share_one_client_and_pool():
    first, second = backend(socket_timeout=3), backend(socket_timeout=3)

    assert first is not second
    assert first._cache is second._cache
    assert first._cache.get_client(write=True).connection_pool is second._cache.get_client().connection_pool


def test_a_pool_has_one_redis_client_built_once(monkeypatch):
    cache, built = backend(socket_timeout=5)._cache, []
    init = redis.Redis.__init__

    def counted_init(self: redis.Redis, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counted_init)

    clients = {id(cache.get_client(write=write)) for write in (True, False) for _ in range(20)}

    assert len(clients) == 1  # one server: reads and writes share its pool
    assert len(built) == 1  # Django's own client built a redis.Redis for each of the 40


def test_threads_racing_for_the_client_get_the_same_one():
    cache = backend(socket_timeout=6)._cache
    with ThreadPoolExecutor(max_workers=8) as pool:
        clients = list(pool.map(lambda _: cache.get_client(write=True), range(64)))

    assert len({id(client) for client in clients}) == 1
    assert len(cache._pools) == 1


def test_other_servers_or_options_get_a_client_of_their_own():
    shared = backend(socket_timeout=3)._cache

    assert backend("redis://127.0.0.1:1/1", socket_timeout=3)._cache is not shared
    assert backend(socket_timeout=4)._cache is not shared


def test_the_backends_of_two_async_contexts_share_the_client(settings):
    settings.CACHES = {
        "default": {"BACKEND": "ballet.redis_cache.SharedRedisCache", "LOCATION": "redis://127.0.0.1:1/2"}
    }

    async def backend_here() -> SharedRedisCache:
        return caches["default"]  # type: ignore[return-value]

    async def both() -> tuple[SharedRedisCache, SharedRedisCache]:
        return await asyncio.gather(backend_here(), backend_here())

    one, other = contextvars.copy_context().run(asyncio.run, both())

    assert one is not other  # Django made a backend per context, as it does
    assert one._cache is other._cache


@pytest.mark.skipif(not settings.PRODUCTION_MODE, reason="counts connections on Redis")
def test_rate_counts_from_fresh_contexts_reuse_one_connection(monkeypatch):
    key, opened = uuid.uuid4().hex, []
    connect = redis.connection.Connection._connect

    def counted_connect(self: redis.connection.Connection) -> object:
        opened.append(self)
        return connect(self)

    monkeypatch.setattr(redis.connection.Connection, "_connect", counted_connect)

    def count_in_a_context_of_its_own() -> bool:
        return contextvars.copy_context().run(
            lambda: rate_hit(scope="test", key=key, limit=100, window_seconds=60)
        )

    counted = [count_in_a_context_of_its_own() for _ in range(20)]

    assert counted == [True] * 20
    assert len(opened) <= 1  # the pool's first connection, if this process had none yet
