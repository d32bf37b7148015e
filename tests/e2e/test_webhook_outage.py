"""A Redis outage delays, never drops (docs/events.md#webhooks and #e-mail, SPEC § 15 "Nothing
lost"), against real processes in production mode: one daphne and a Celery worker with its beat
on a Redis server of the test's own (``RedisServer``: killed, it comes back empty).

While Redis is down, edits and a comment over REST answer as usual
(docs/operations.md#a-redis-outage); their webhook deliveries and the mail of the comment's
mention wait in the database (the outbox), pending, since nothing can ask the worker to send
them. Once Redis is back, beat's runs find them: the receiver gets every delivery once, in order,
signed, the deliveries' log shows each delivered at its first attempt, and the mail is sent.

Redis goes down whatever the worker holds; it fails, showing the worker's log, if the worker dies
(``tests/e2e/test_worker_redis_loss.py`` loses Redis while it holds fetched tasks on purpose).
"""

from __future__ import annotations

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

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not production_mode(), reason="the worker delivers, over Redis, in production mode"),
]

DEMO = "/api/v1/projects/DEMO/"
ITEM = f"{DEMO}items/DEMO-1/"
# Once Redis is back the worker and beat reconnect (Celery waits longer between attempts the
# longer it is down), then beat runs the sender within 5 s and the mail within 10 s: generous for
# a loaded machine.
BACK_SECONDS = 120


@dataclass
class Outage:
    redis: RedisServer
    server: Server
    worker: Worker
    mail: Path


@pytest.fixture
def deployment_up(tmp_path: Path, fake_api: FakeMessagesAPI) -> Iterator[Outage]:
    redis = RedisServer(tmp_path).start()
    mail = tmp_path / "mail"
    env = {
        "BALLET_WEBHOOKS_ALLOW_PRIVATE": "1",  # the receiver listens on loopback
        "BALLET_EMAIL_BACKEND": "file",
        "BALLET_EMAIL_FILE_PATH": str(mail),
    }
    try:
        with served(tmp_path, fake_api.base_url, redis_url=redis.url, extra_env=env) as server:
            worker = Worker(server.deployment, tmp_path).start()
            try:
                yield Outage(redis, server, worker, mail)
            finally:
                worker.stop()
    finally:
        redis.stop()


def _edit(demo: Client, server: Server, title: str) -> None:
    """Rename DEMO-1 over REST; a refusal shows the daphne's log."""
    version = demo.get(ITEM)["version"]
    status, body = demo.request("PATCH", ITEM, {"title": title, "version": version})
    assert status == 200, f"PATCH {title!r}: {status} {body}\ndaphne's log:\n{server.log_tail(80)}"


def _deliveries(demo: Client, hook_id: int) -> list[dict[str, Any]]:
    """The webhook's deliveries, oldest first."""
    logged = demo.get(f"{DEMO}webhooks/{hook_id}/deliveries/")
    deliveries: list[dict[str, Any]] = logged["results"] if isinstance(logged, dict) else logged
    return sorted(deliveries, key=lambda d: int(d["id"]))


def _all_delivered(demo: Client, hook_id: int) -> list[dict[str, Any]]:
    """The webhook's deliveries once none is pending any more, else []."""
    deliveries = _deliveries(demo, hook_id)
    return deliveries if all(d["status"] == "delivered" for d in deliveries) else []


def _mail_statuses(server: Server, word: str) -> str:
    """(user, status) of each mail whose text names ``word``, as the database holds them."""
    printed = server.deployment.manage(
        "shell",
        "-c",
        "from tracker.models import Mail; "
        f"mails = Mail.objects.filter(body__contains={word!r}); "
        "print(sorted(mails.values_list('user__username', 'status')))",
    )
    return printed.strip().splitlines()[-1]


def _worker_alive(worker: Worker) -> bool:
    """True while the worker runs; its log's end, in the failure, once it has died."""
    assert worker.process is not None
    if worker.process.poll() is None:
        return True
    tail = "\n".join(worker.log.read_text(errors="replace").splitlines()[-40:])
    raise AssertionError(f"the worker died with {worker.process.returncode}; its log ends:\n{tail}")


def test_a_redis_outage_delays_deliveries_and_mail_and_drops_none(deployment_up: Outage) -> None:
    up = deployment_up
    demo = Client(up.server.url, "demo", PASSWORD)
    receiver = Told(fail_first=0)
    status, hook = demo.request(
        "POST", f"{DEMO}webhooks/", {"name": "Outage test", "url": receiver.url, "types": ["item.updated"]}
    )
    assert status == 201, hook
    secret = hook["secret"]

    _edit(demo, up.server, "Before the outage")  # the path works: the worker delivers it
    wait_until(lambda: receiver.delivered(secret), "the delivery before the outage")

    up.redis.stop()
    word = f"outage{uuid.uuid4().hex[:8]}"
    titles = [f"During the outage {n}" for n in range(3)]
    try:
        for title in titles:
            _edit(demo, up.server, title)
        status, comment = demo.request("POST", f"{ITEM}comments/", {"body": f"@viewer see {word}"})
        assert status == 201, f"comment: {status} {comment}\ndaphne's log:\n{up.server.log_tail(80)}"
        assert comment["mentions"] == ["viewer"], comment
        during = [(d["type"], d["status"]) for d in _deliveries(demo, hook["id"])]
        mail_during = _mail_statuses(up.server, word)
        heard_during = len(receiver.received)
    finally:
        up.redis.start()  # empty, on the same port: every process finds it again

    assert during == [("item.updated", "delivered")] + [("item.updated", "pending")] * 3
    assert mail_during == "[('viewer', 'pending')]"  # the mention's mail, to send at once
    assert heard_during == 1

    bodies = wait_until(
        lambda: _worker_alive(up.worker) and len(found := receiver.delivered(secret)) >= 4 and found,
        "every delivery once Redis is back",
        timeout=BACK_SECONDS,
    )
    assert [body["data"]["data"]["changes"]["title"][1] for body in bodies] == ["Before the outage", *titles]
    logged = wait_until(lambda: _all_delivered(demo, hook["id"]), "the log showing every delivery delivered")
    assert [[a["status_code"] for a in d["attempts"]] for d in logged] == [[204]] * 4  # each at once
    assert [r.msg_id for r in receiver.received] == [d["msg_id"] for d in logged]  # each once, in order

    sent = wait_until(
        lambda: [p.read_text() for p in up.mail.glob("*") if word in p.read_text()],
        "the mention's mail once Redis is back",
        timeout=BACK_SECONDS,
    )
    assert len(sent) == 1, sent
    assert "viewer@example.com" in sent[0], sent
    assert _mail_statuses(up.server, word) == "[('viewer', 'sent')]"
