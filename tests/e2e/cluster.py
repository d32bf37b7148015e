"""A production deployment for the fault tests (``test_faults.py``): two daphnes A and B, a Celery
worker with its beat, a fresh PostgreSQL database and a Redis server of the tests' own, which they
kill, start again and flush; :meth:`Cluster.ready` brings back whatever a test took down."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.conftest import Script
from tests.fakes.client import Client
from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest
from tests.fakes.servers import PASSWORD, Deployment, RedisServer, Server, Worker
from tests.fakes.watchers import Watcher

RECOVERY_SECONDS = 45  # a dead turn's process is noticed and the turn recovered within this
STREAM_SECONDS = 15  # a live frame reaches a watcher in the other process within this
BACK_SECONDS = 10  # once Redis is back, every process works again within this
DEPLOYMENT_ENV = {
    "BALLET_SEARCH_EMBEDDING_BACKEND": "tracker.search.embeddings.HashingBackend",
    "BALLET_LIMIT_MESSAGES_PER_MINUTE": "600",
    "BALLET_LIMIT_RUNNING_TURNS_PER_USER": "50",
    "BALLET_LIMIT_RUNNING_TURNS_PER_PROJECT": "50",
}


@dataclass
class Cluster:
    fake: FakeMessagesAPI
    script: Script
    redis: RedisServer
    deployment: Deployment
    worker: Worker
    a: Server
    b: Server
    on_a: Client  # demo, talking to A
    on_b: Client  # demo, talking to B

    def ready(self) -> None:
        """Every process up again after a test that killed one (started again in the background)."""
        if not self.redis.running:
            self.redis.start()
        for server in (self.a, self.b):
            if not server.running:
                server.start(wait=False)
            server.wait_ready()
        if self.worker.process is None or self.worker.process.poll() is not None:
            self.worker.start()

    def session(self) -> str:
        session_id: str = self.on_a.post("/api/v1/planner/sessions/", {"project": "DEMO"})["id"]
        return session_id

    def watch(self, server: Server, session_id: str, *, reconnect: bool = False, name: str = "") -> Watcher:
        return Watcher(server.url, session_id, self.on_a.cookie, reconnect=reconnect, name=name)

    def requests_naming(self, keyword: str) -> list[RecordedRequest]:
        """The model requests whose history names ``keyword``."""
        return [r for r in self.fake.requests if keyword in r.body.decode(errors="replace")]

    def wait_requests(self, keyword: str, count: int = 1, timeout: float = STREAM_SECONDS) -> None:
        wait_for(
            lambda: len(self.requests_naming(keyword)) >= count,
            timeout,
            f"model request {count} of {keyword}",
        )


@contextmanager
def cluster_up(home: Path, fake: FakeMessagesAPI, script: Script) -> Iterator[Cluster]:
    """The deployment, up for the block, in ``home``."""
    redis = RedisServer(home).start()
    deployment = Deployment.create(home, fake.base_url, redis_url=redis.url, extra_env=DEPLOYMENT_ENV)
    worker = Worker(deployment, home)
    a = Server(deployment, log=home / "a.log")
    b = Server(deployment, log=home / "b.log")
    try:
        worker.start()
        a.start(wait=False)
        b.start()
        a.wait_ready()
        yield Cluster(
            fake,
            script,
            redis,
            deployment,
            worker,
            a,
            b,
            Client(a.url, "demo", PASSWORD),
            Client(b.url, "demo", PASSWORD),
        )
    finally:
        for server in (a, b):
            server.stop()
        worker.stop()
        redis.stop()
        deployment.drop()


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.1)
