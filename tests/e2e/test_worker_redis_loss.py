"""A Redis lost while the worker holds tasks it fetched and has not started leaves the worker
running, and every delivery sent once Redis is back (docs/events.md#webhooks "a Redis outage
delays deliveries and never drops them", SPEC § 15 "Nothing lost"), against real processes in
production mode: one daphne and a Celery worker with its beat on a Redis server of the test's own
(``RedisServer``: killed, it comes back empty).

The worker's one pool process is busy with a delivery the receiver holds, and beat's next tasks
are fetched behind it while the worker waits on Redis (BRPOP) for more. Redis is killed then:
Celery 5.7 with kombu 5.7 stopped the worker as it tried to put those tasks back (``Unrecoverable
error: AttributeError ... 'hostname'``); ``ballet/celery_consumer.py`` lets it reconnect instead.
Two more edits commit during the outage. The receiver answers the held request 500, so that
delivery is sent again whether or not the worker still listened: its retry, under the same
``webhook-id``, and the two later deliveries each reach the receiver once, in order, once Redis is
back.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_events_live import Told, wait_until
from tests.fakes.client import Client
from tests.fakes.messages_api import FakeMessagesAPI
from tests.fakes.servers import PASSWORD, RedisServer, Server, Worker, production_mode, served
from tests.fakes.webhook_receiver import Received, Receiver, Reply

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not production_mode(), reason="the worker delivers, over Redis, in production mode"),
]

DEMO = "/api/v1/projects/DEMO/"
ITEM = f"{DEMO}items/DEMO-1/"
# Once Redis is back the worker and beat reconnect (Celery waits longer between attempts the
# longer it is down), then beat runs the sender within 5 s and the held delivery's retry is due
# about 5 s after its failure: generous for a loaded machine.
BACK_SECONDS = 120
HOLD_SECONDS = 60  # the worker starts the held delivery within this
IDLE_SECONDS = 120  # the seed's search indexing, queued on this Redis, is done within this
PREFETCH = 4  # tasks the worker fetches ahead: Celery's prefetch multiplier (4) times its one process


class HeldThenRefused(Told):
    """A receiver that holds its first request open until released and answers it 500; it answers
    every later one 204."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()
        super().__init__(fail_first=0)

    def answer(self, receiver: Receiver, request: Received) -> Reply:
        if self.holding.is_set():
            return super().answer(receiver, request)
        self.answered.append(500)
        self.holding.set()
        self.release.wait(HOLD_SECONDS)
        return Reply(500)


@dataclass
class Deployment:
    redis: RedisServer
    server: Server
    worker: Worker


@pytest.fixture
def deployment_up(tmp_path: Path, fake_api: FakeMessagesAPI) -> Iterator[Deployment]:
    redis = RedisServer(tmp_path).start()
    env = {"BALLET_WEBHOOKS_ALLOW_PRIVATE": "1"}  # the receiver listens on loopback
    try:
        with served(tmp_path, fake_api.base_url, redis_url=redis.url, extra_env=env) as server:
            worker = Worker(server.deployment, tmp_path).start()
            try:
                yield Deployment(redis, server, worker)
            finally:
                worker.stop()
    finally:
        redis.stop()


def _edit(demo: Client, server: Server, title: str) -> None:
    """Rename DEMO-1 over REST; a refusal shows the daphne's log."""
    version = demo.get(ITEM)["version"]
    status, body = demo.request("PATCH", ITEM, {"title": title, "version": version})
    assert status == 200, f"PATCH {title!r}: {status} {body}\ndaphne's log:\n{server.log_tail(80)}"


def _fetched_and_waiting(redis: RedisServer) -> int:
    """How many tasks the worker fetched and has not started: kombu's Redis transport keeps each in
    its ``unacked`` hash until the worker acknowledges it, as it starts it."""
    with redis.client() as client:
        return int(client.hlen("unacked"))


def _idle(redis: RedisServer) -> bool:
    """Nothing queued on Redis, nothing fetched and waiting."""
    with redis.client() as client:
        return not client.llen("celery") and not client.hlen("unacked")


def _worker_log(worker: Worker) -> str:
    return worker.log.read_text(errors="replace")


def _ten_second_ticks(worker: Worker) -> int:
    """How many times beat sent its 10-second entries (docs/operations.md#celery-beat)."""
    return _worker_log(worker).count("Sending due task send-mail ")


def _worker_alive(worker: Worker) -> bool:
    """True while the worker runs; its log's end, in the failure, once it has died."""
    assert worker.process is not None
    if worker.process.poll() is None:
        return True
    tail = "\n".join(_worker_log(worker).splitlines()[-40:])
    raise AssertionError(f"the worker died with {worker.process.returncode}; its log ends:\n{tail}")


def _deliveries(demo: Client, hook_id: int) -> list[dict[str, Any]]:
    """The webhook's deliveries, oldest first, once none is pending any more, else []."""
    logged = demo.get(f"{DEMO}webhooks/{hook_id}/deliveries/")
    deliveries: list[dict[str, Any]] = logged["results"] if isinstance(logged, dict) else logged
    if any(d["status"] != "delivered" for d in deliveries):
        return []
    return sorted(deliveries, key=lambda d: int(d["id"]))


def test_a_redis_lost_while_the_worker_holds_tasks_drops_no_delivery(deployment_up: Deployment) -> None:
    up = deployment_up
    demo = Client(up.server.url, "demo", PASSWORD)
    receiver = HeldThenRefused()
    status, hook = demo.request(
        "POST", f"{DEMO}webhooks/", {"name": "Redis loss", "url": receiver.url, "types": ["item.updated"]}
    )
    assert status == 201, hook
    titles = [f"Renamed {n} {uuid.uuid4().hex[:6]}" for n in range(3)]

    wait_until(lambda: _idle(up.redis), "the seed's search indexing done", timeout=IDLE_SECONDS)
    # Beat's entries of 5 s send 2 tasks, those of 10 s 2 more at the same time: 4, as many as the
    # worker fetches ahead (4 per process), and with as many waiting it does not wait on Redis.
    # Held right after a 10-second tick, the worker fetches the next tick's 2 and waits for more.
    ticks = _ten_second_ticks(up.worker)
    wait_until(lambda: _ten_second_ticks(up.worker) > ticks, "beat's 10-second entries", timeout=30)
    _edit(demo, up.server, titles[0])
    assert receiver.holding.wait(HOLD_SECONDS), "the worker never delivered"
    wait_until(
        lambda: 0 < _fetched_and_waiting(up.redis) < PREFETCH,
        "the worker fetching tasks behind the held delivery and waiting on Redis for more",
    )

    up.redis.stop()
    try:
        wait_until(
            lambda: _worker_alive(up.worker) and "Connection to broker lost" in _worker_log(up.worker),
            "the worker noticing Redis is gone",
        )
        receiver.release.set()  # the held delivery fails (500): it is tried again later
        for title in titles[1:]:  # committed with their deliveries pending, sent once Redis is back
            _edit(demo, up.server, title)
    finally:
        receiver.release.set()
        up.redis.start()  # empty, on the same port: every process finds it again

    bodies = wait_until(
        lambda: _worker_alive(up.worker) and len(found := receiver.delivered(hook["secret"])) >= 3 and found,
        "every delivery once Redis is back",
        timeout=BACK_SECONDS,
    )
    assert [body["data"]["data"]["changes"]["title"][1] for body in bodies] == titles  # each once, in order
    logged = wait_until(lambda: _deliveries(demo, hook["id"]), "the log showing every delivery delivered")
    assert [body["webhook-id"] for body in bodies] == [d["msg_id"] for d in logged]
    assert bodies[0]["webhook-id"] == receiver.received[0].msg_id  # the held one again, under its id
    assert [d["attempts"][-1]["status_code"] for d in logged] == [204] * 3
    assert _worker_alive(up.worker)
    # The case the test is about happened: the tasks fetched behind the held one were not put back.
    assert "could not be put back" in _worker_log(up.worker)
