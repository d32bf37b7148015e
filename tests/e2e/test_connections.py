"""PostgreSQL connections of a live daphne stay within its pool, whatever the request count."""

from __future__ import annotations

import os
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from tests.e2e.conftest import agent_key
from tests.fakes.servers import Server, production_mode, served

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not production_mode(), reason="the embedded mode has one SQLite file, no server"),
]

POOL_SIZE = 10
BOUND = POOL_SIZE + 2  # the pool's connections, and two more while one is replaced


@pytest.fixture
def server(tmp_path) -> Iterator[Server]:
    # The model is never called: the address only has to be valid.
    env = {"BALLET_DATABASE_POOL_SIZE": str(POOL_SIZE)}
    with served(tmp_path, "http://127.0.0.1:9", extra_env=env) as live:
        yield live


class Sampler:
    """The most connections to ``database`` seen so far, read every 20 ms on a thread."""

    def __init__(self, database: str) -> None:
        self.database, self.peak, self._done = database, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def now(self, connection: psycopg.Connection) -> int:
        sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
        row = connection.execute(sql, (self.database,)).fetchone()
        return int(row[0]) if row else 0

    def _run(self) -> None:
        with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as connection:
            while not self._done.wait(0.02):
                self.peak = max(self.peak, self.now(connection))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)


def test_rest_requests_keep_the_database_connections_within_the_pool(server: Server) -> None:
    token = agent_key(server)
    url = f"{server.url}/api/v1/projects/DEMO/items/?limit=5"

    def get(_: int = 0) -> int:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)

    assert server.deployment.database
    statuses: list[int] = []
    with Sampler(server.deployment.database) as sampler, ThreadPoolExecutor(16) as clients:
        # 300 requests: each round 5 one after another, then 15 at once (more than the pool holds).
        for _ in range(15):
            statuses += [get() for _ in range(5)]
            statuses += list(clients.map(get, range(15)))
            if sampler.peak > BOUND:
                break  # leaking: no need to hold more of the server's connections
        during = sampler.peak
    time.sleep(2)
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as connection:
        after = sampler.now(connection)

    assert {
        "connections over the bound (during, after)": [n for n in (during, after) if n > BOUND],
        "requests": len(statuses),
        "not 200": [s for s in statuses if s != 200],
    } == {"connections over the bound (during, after)": [], "requests": 300, "not 200": []}
