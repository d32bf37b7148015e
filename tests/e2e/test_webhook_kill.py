"""Nothing lost (docs/events.md#webhooks), against real processes in production mode: a Celery
worker SIGKILLed while a receiver holds one of its deliveries leaves every delivery sent once a
worker runs again. The receiver may see the delivery it held a second time, with the same
``webhook-id``; it sees every other one, in order."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_events_live import Receiver, wait_until
from tests.fakes.client import Client
from tests.fakes.messages_api import FakeMessagesAPI
from tests.fakes.servers import PASSWORD, Server, Worker, production_mode, served

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not production_mode(), reason="the worker delivers in production mode"),
]

DEMO = "/api/v1/projects/DEMO/"
LEASE_SECONDS = 30  # a dead worker's hold on its endpoint runs out within this (tracker/services/webhooks.py)


class HoldingReceiver(Receiver):
    """A receiver that holds its first request open until released: the worker is mid-delivery."""

    def __post_init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()
        super().__post_init__()
        handler_class: Any = self.server.RequestHandlerClass
        answer = handler_class.do_POST
        receiver = self

        def do_post(handler: Any) -> None:
            if not receiver.holding.is_set():
                body = handler.rfile.read(int(handler.headers.get("Content-Length", "0")))
                receiver.received.append(({k.lower(): v for k, v in handler.headers.items()}, body))
                receiver.answered.append(0)  # nobody hears an answer: the worker is killed meanwhile
                receiver.holding.set()
                receiver.release.wait(60)
                return
            answer(handler)

        handler_class.do_POST = do_post


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
    receiver = HoldingReceiver(fail_first=0)
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
    held_id = receiver.received[0][0]["webhook-id"]

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
