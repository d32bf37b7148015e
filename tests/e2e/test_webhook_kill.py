"""Nothing lost (docs/events.md#webhooks), against real processes in production mode: a Celery
worker SIGKILLed while a receiver holds one of its deliveries leaves every delivery sent once a
worker runs again. The receiver may see the delivery it held a second time, with the same
``webhook-id``; it sees every other one, in order."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.e2e.test_events_live import Told, wait_until
from tests.fakes.client import Client
from tests.fakes.messages_api import FakeMessagesAPI
from tests.fakes.servers import PASSWORD, Server, Worker, production_mode, served
from tests.fakes.webhook_receiver import Received, Receiver, Reply

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not production_mode(), reason="the worker delivers in production mode"),
]

DEMO = "/api/v1/projects/DEMO/"
LEASE_SECONDS = 30  # a dead worker's hold on its endpoint runs out within this (tracker/services/webhooks.py)


class HoldingReceiver(Told):
    """A receiver that holds its first request open until released: the worker is mid-delivery."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()
        super().__init__(fail_first=0)

    def answer(self, receiver: Receiver, request: Received) -> Reply:
        if self.holding.is_set():
            return super().answer(receiver, request)
        self.answered.append(0)  # nobody hears an answer: the worker is killed meanwhile
        self.holding.set()
        self.release.wait(60)
        return Reply(204)


@pytest.fixture
def deployment_up(tmp_path, fake_api: FakeMessagesAPI) -> Iterator[tuple[Server, Worker]]:
    with served(tmp_path, fake_api.base_url, extra_env={"BALLET_WEBHOOKS_ALLOW_PRIVATE": "1"}) as server:
        worker = Worker(server.deployment, tmp_path).start()
        try:
            yield server, worker
        finally:
            worker.stop()


def test_a_worker_killed_mid_delivery_loses_no_delivery(deployment_up):
    server, worker = deployment_up
    demo = Client(server.url, "demo", PASSWORD)
    receiver = HoldingReceiver()
    status, hook = demo.request(
        "POST", f"{DEMO}webhooks/", {"name": "Kill test", "url": receiver.url, "types": ["item.updated"]}
    )
    assert status == 201, hook

    for n in range(3):
        version = demo.get(f"{DEMO}items/DEMO-1/")["version"]
        status, body = demo.request(
            "PATCH", f"{DEMO}items/DEMO-1/", {"title": f"Renamed {n}", "version": version}
        )
        assert status == 200, body
    assert receiver.holding.wait(60), "the worker never delivered"
    worker.kill()  # mid-delivery: the receiver holds the first request open
    receiver.release.set()
    held_id = receiver.received[0].msg_id

    worker.start()
    bodies = wait_until(
        lambda: len(found := receiver.delivered(hook["secret"])) >= 3 and found,
        "every delivery after the restart",
        timeout=LEASE_SECONDS + 60,
    )
    titles = [body["data"]["data"]["changes"]["title"][1] for body in bodies]
    assert titles == ["Renamed 0", "Renamed 1", "Renamed 2"]  # each once, in order
    assert bodies[0]["webhook-id"] == held_id  # the held one again, under the same id
    logged = demo.get(f"{DEMO}webhooks/{hook['id']}/deliveries/")
    deliveries = logged["results"] if isinstance(logged, dict) else logged
    assert sorted(d["status"] for d in deliveries) == ["delivered"] * 3
