"""Being told, against real processes in either mode (docs/events.md): a receiver the owner
registers gets signed deliveries of a claim, a report, an applied changeset and a question left to
the humans, verified with the standard library; one that fails once gets the delivery again and
the log shows both attempts; an agent waiting on the feed hears a claim made elsewhere during its
wait; ``demo`` gets the question by e-mail (the file backend) and in the inbox.

In the embedded mode the server delivers and mails itself; in production a Celery worker with its
beat does, and the claim the agent hears is made through another daphne."""

from __future__ import annotations

import base64
import email
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Script, agent_key
from tests.fakes.client import Client, rest_call
from tests.fakes.messages_api import FakeMessagesAPI, TextReply
from tests.fakes.servers import PASSWORD, Server, Worker, production_mode, served
from tests.fakes.webhook_receiver import Received, Receiver, Reply

pytestmark = pytest.mark.e2e

DEMO = "/api/v1/projects/DEMO/"
TOLD_SECONDS = 60  # a delivery (with one retry after about 5 s) or a mail arrives within this


class Told:
    """A webhook receiver on 127.0.0.1 (``tests/fakes/webhook_receiver.py``) that answers 500 to its
    first ``fail_first`` requests, and the status it gave each."""

    def __init__(self, fail_first: int = 1) -> None:
        self.fail_first = fail_first
        self.answered: list[int] = []
        self.receiver = Receiver(self.answer).start()
        self.url = self.receiver.url("/hooks/ballet")

    def answer(self, receiver: Receiver, request: Received) -> Reply:
        status = 500 if len(self.answered) < self.fail_first else 204
        self.answered.append(status)
        return Reply(status)

    @property
    def received(self) -> list[Received]:
        return self.receiver.received

    def delivered(self, secret: str) -> list[dict[str, Any]]:
        """The bodies answered 2xx, each verified as a receiver would with the standard library."""
        key = base64.b64decode(secret.removeprefix("whsec_"))
        bodies = []
        for request, code in zip(self.received, self.answered, strict=False):
            headers = request.headers
            signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + request.body
            expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
            signatures = [part.split(",", 1)[1] for part in headers["webhook-signature"].split()]
            assert any(hmac.compare_digest(expected, given) for given in signatures), headers
            assert abs(time.time() - int(headers["webhook-timestamp"])) < 300
            if 200 <= code < 300:
                bodies.append({**json.loads(request.body), "webhook-id": headers["webhook-id"]})
        return bodies


@dataclass
class Live:
    a: Server
    b: Server  # the same as a in the embedded mode: one process
    mail: Path
    worker: Worker | None


@pytest.fixture(scope="module")
def live(fake_api: FakeMessagesAPI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("told")
    mail = home / "mail"
    env = {
        "BALLET_WEBHOOKS_ALLOW_PRIVATE": "1",  # the receiver listens on loopback
        "BALLET_EMAIL_BACKEND": "file",
        "BALLET_EMAIL_FILE_PATH": str(mail),
    }
    with served(home, fake_api.base_url, extra_env=env) as a:
        if not production_mode():
            yield Live(a, a, mail, None)
            return
        b = Server(a.deployment, log=home / "b.log").start()
        worker = Worker(a.deployment, home).start()
        try:
            yield Live(a, b, mail, worker)
        finally:
            worker.stop()
            b.stop()


def wait_until(condition: Any, what: str, timeout: float = TOLD_SECONDS) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout} s")


def test_a_receiver_gets_signed_deliveries_of_what_the_team_and_agents_do(live: Live, script: Script):
    demo = Client(live.a.url, "demo", PASSWORD)
    receiver = Told(fail_first=1)
    status, hook = demo.request(
        "POST",
        f"{DEMO}webhooks/",
        {
            "name": "CI",
            "url": receiver.url,
            "types": ["claim.taken", "report.added", "changeset.applied", "question.needs_human"],
        },
    )
    assert status == 201, hook
    secret = hook["secret"]
    assert secret.startswith("whsec_")

    key = agent_key(live.a)
    agent = f"Bearer {key}"
    runnable = rest_call(live.b.url, agent, "GET", f"{DEMO}runnable/")[1]
    ticket = (runnable["results"] if isinstance(runnable, dict) else runnable)[0]["key"]
    status, claim = rest_call(live.b.url, agent, "POST", f"{DEMO}items/{ticket}/claim/")
    assert status == 201, claim
    report = {"kind": "progress", "summary": "Wrote the handler; tests next."}
    assert rest_call(live.b.url, agent, "POST", f"{DEMO}claims/{claim['id']}/reports/", report)[0] == 201

    proposed = demo.get(f"{DEMO}changesets/?status=proposed")["results"][0]
    status, applied = demo.request("POST", f"{DEMO}changesets/{proposed['number']}/apply/", {})
    assert status == 200, applied
    assert applied["status"] == "applied", applied

    script.on("needs-humans", TextReply("The plan does not say; the project's humans will answer."))
    status, asked = rest_call(
        live.a.url, agent, "POST", f"{DEMO}questions/", {"text": "needs-humans: which CDN?"}
    )
    assert status == 201, asked
    waited = rest_call(live.a.url, agent, "GET", f"{DEMO}questions/{asked['id']}/?wait=30")[1]
    assert waited["status"] == "needs_human", waited

    wanted = {"claim.taken", "report.added", "changeset.applied", "question.needs_human"}
    try:
        bodies = wait_until(
            lambda: (found := receiver.delivered(secret)) and wanted <= {b["type"] for b in found} and found,
            "the four deliveries",
        )
    except AssertionError as missing:  # what did come, to tell a slow retry from a lost event
        came = sorted(body["type"] for body in receiver.delivered(secret))
        raise AssertionError(f"{missing}: answered {receiver.answered}, delivered {came}") from None
    by_type = {body["type"]: body for body in bodies}
    assert by_type["claim.taken"]["data"]["target"] == ticket
    assert by_type["report.added"]["data"]["data"]["summary"].startswith("Wrote the handler")
    assert by_type["changeset.applied"]["data"]["target"] == f"changeset:{proposed['number']}"
    assert by_type["question.needs_human"]["data"]["target"] == f"question:{asked['id']}"
    assert [body["type"] for body in bodies] == [
        t for t in ("claim.taken", "report.added", "changeset.applied", "question.needs_human")
    ]  # in order per endpoint, the first one after its retry

    # The first delivery failed once and came again with the same webhook-id; the log shows both.
    assert receiver.answered[0] == 500
    first_id = receiver.received[0].msg_id
    assert [request.msg_id for request in receiver.received].count(first_id) == 2
    logged = demo.get(f"{DEMO}webhooks/{hook['id']}/deliveries/")
    deliveries = logged["results"] if isinstance(logged, dict) else logged
    retried = next(d for d in deliveries if d["msg_id"] == first_id)
    assert [a["status_code"] for a in retried["attempts"]] == [500, 204]

    # demo is told of the question: in the inbox at once, and by mail (questions: now by default).
    inbox = demo.get("/api/v1/inbox/")
    entries = inbox["results"] if isinstance(inbox, dict) else inbox
    assert any("which CDN" in json.dumps(entry) for entry in entries), entries
    mail = wait_until(
        lambda: [p.read_text() for p in live.mail.glob("*") if "which CDN" in p.read_text()],
        "the mail to demo",
    )
    message = email.message_from_string(
        next(block for block in mail[0].split("\n" + "-" * 79 + "\n") if "which CDN" in block)
    )
    text = next(
        str(part.get_payload(decode=True), "utf-8")  # type: ignore[arg-type]  # a leaf part: bytes
        for part in message.walk()
        if part.get_content_type() == "text/plain"
    )
    assert "demo@example.com" in message["To"]
    assert "which CDN" in text
    assert f"/inbox/#question-{asked['id']}" in text  # the page it is about
    assert "/notifications/unsubscribe/" in message["List-Unsubscribe"]


def test_an_agent_waiting_on_the_feed_hears_a_claim_made_elsewhere(live: Live):
    key = agent_key(live.a)
    agent = f"Bearer {key}"
    head = rest_call(live.a.url, agent, "GET", f"{DEMO}events/?after=now")[1]["next"]
    heard: dict[str, Any] = {}

    def wait() -> None:
        heard["answer"] = rest_call(
            live.a.url, agent, "GET", f"{DEMO}events/?after={head}&types=claim.taken&wait=30"
        )

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(1.0)  # the agent waits on A
    assert "answer" not in heard
    runnable = rest_call(live.b.url, agent, "GET", f"{DEMO}runnable/")[1]
    ticket = (runnable["results"] if isinstance(runnable, dict) else runnable)[0]["key"]
    status, claim = rest_call(live.b.url, agent, "POST", f"{DEMO}items/{ticket}/claim/")
    assert status == 201, claim
    waiter.join(35)

    status, body = heard["answer"]
    assert status == 200, body
    # Woken by the claim: a wait that ran out would answer what it read before, nothing.
    assert [(e["type"], e["target"]) for e in body["events"]] == [("claim.taken", ticket)]
