"""The parts of ``bench/events.py`` that run in the deployment's own process (``manage.py shell``):
what recording an event adds to a write, and the webhook sender's throughput, with the local
receiver it sends to (in the benchmark's process, so that it takes no CPU from the sender's).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.servers import PYTHON, Deployment

# Each write N times with the events recorded and N times with ``events_from_activity`` a no-op
# (the baseline), the two interleaved in random order, in one process. The tell that wakes the
# feed's waiters takes the server's road: a hub runs on an event loop of this process, as in daphne
# (without one, the tell would wait for the relay's round trip). Search indexing is left out of
# both sides (in the embedded mode it embeds the item in the committing thread).
OVERHEAD = """
import asyncio, json, random, threading, time
from django.contrib.auth.models import User
from planner.live.hub import hub
from tracker.models import Event, Project
from tracker.services import activity, items as item_services
from tracker.services.activity import Actor
from tracker.services.items import item_create, item_update
from tracker.services.work import claim_release, claim_take

writes, warmup = {writes}, {warmup}
project = Project.objects.get(key="DEMO")
actor = Actor(user=User.objects.get(username="demo"))
recording = activity.events_from_activity
item_services.search_index_on_commit = lambda kind, ids: None
loop = asyncio.new_event_loop()
threading.Thread(target=loop.run_forever, daemon=True).start()
asyncio.run_coroutine_threadsafe(hub.start(), loop).result(10)

titled = item_create(actor=actor, project=project, kind="ticket", fields={{"title": "Bench: titles"}})
claimable = item_create(actor=actor, project=project, kind="ticket",
                        fields={{"title": "Bench: claims", "state": "ready"}})
times = {{}}
made = {{}}

def timed(op, side, call):
    activity.events_from_activity = recording if side == "events" else (lambda row: [])
    before = Event.objects.count() if side == "events" and op not in made else None
    started = time.perf_counter()
    result = call()
    times.setdefault(f"{{op}} {{side}}", []).append(time.perf_counter() - started)
    if before is not None:
        made[op] = Event.objects.count() - before
    return result

rng = random.Random(42)
for n in range(warmup + writes):
    sides = ["events", "baseline"]
    rng.shuffle(sides)
    for side in sides:
        title = f"Bench title {{n}} {{side}}"
        timed("item_update", side, lambda: item_update(actor=actor, item=titled, fields={{"title": title}}))
        claim = timed("claim_take", side, lambda: claim_take(actor=actor, project=project, item=claimable))
        timed("claim_release", side, lambda: claim_release(actor=actor, claim=claim))
    if n == warmup - 1:
        times.clear()
activity.events_from_activity = recording
asyncio.run_coroutine_threadsafe(hub.stop(), loop).result(10)
print("RESULT " + json.dumps({{"times": times, "events": made}}))
"""

# A project with ``endpoints`` webhooks to the receiver, ``deliveries`` events of it each queued
# for one of them in turn (as ``deliveries_queue`` would), then the sender run to completion.
WEBHOOKS = """
import json, time
from django.contrib.auth.models import User
from django.utils import timezone
from tracker.models import DeliveryStatus, Event, Membership, Project, Role, WebhookDelivery
from tracker.services.activity import Actor
from tracker.services.webhook_endpoints import webhook_create
from tracker.services.webhooks import SENDING_THREADS, deliveries_send

endpoints, deliveries, receiver, key = {endpoints}, {deliveries}, "{receiver}", "{key}"
demo = Project.objects.get(key="DEMO")
owner = User.objects.get(username="demo")
project = Project.objects.create(organization=demo.organization, key=key, name=f"Webhooks {{key}}",
                                 next_item_number=1)
Membership.objects.create(project=project, user=owner, role=Role.OWNER)
hooks = [webhook_create(actor=Actor(user=owner), project=project, name=f"Receiver {{n}}",
                        url=f"{{receiver}}/{{key}}/{{n}}")[0] for n in range(endpoints)]
def event(n):
    target = f"{{key}}-{{n % 50 + 1}}"
    data = {{"target": target, "changes": {{"title": ["Before", f"After {{n}}"]}}, "version": n}}
    return Event(organization_id=project.organization_id, project=project, type="item.updated",
                 actor="user:demo", on_behalf_of=owner, target=target, data=data)

events = Event.objects.bulk_create([event(n) for n in range(deliveries)])
now = timezone.now()
def delivery(n, row):
    hook = hooks[n % endpoints]
    return WebhookDelivery(webhook=hook, event=row, msg_id=f"msg_{{row.pk}}_{{hook.pk}}", type=row.type,
                           next_attempt_at=now)

WebhookDelivery.objects.bulk_create([delivery(n, row) for n, row in enumerate(events)])
started = time.perf_counter()
run = deliveries_send(within=3600)
seconds = time.perf_counter() - started
delivered = WebhookDelivery.objects.filter(webhook__project=project, status=DeliveryStatus.DELIVERED).count()
print("RESULT " + json.dumps({{"seconds": seconds, "delivered": delivered, "run_delivered": run.delivered,
                              "failed": run.failed, "threads": SENDING_THREADS}}))
"""


def in_deployment(deployment: Deployment, code: str, timeout: float = 1800) -> dict[str, Any]:
    """Run ``code`` in ``manage.py shell`` of the deployment; what it printed after ``RESULT``."""
    done = subprocess.run(
        [PYTHON, "manage.py", "shell", "-c", code],
        cwd=deployment.root,
        env=deployment.env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    found = re.search(r"^RESULT (.*)$", done.stdout, re.MULTILINE)
    if done.returncode or found is None:
        raise RuntimeError(f"the shell failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(found.group(1))
    return result


@dataclass
class Received:
    """What the receiver got: requests by path, and those that came before an earlier event's
    (``webhook-id`` is ``msg_{event}_{webhook}``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    count: int = 0
    last: dict[str, int] = field(default_factory=dict)
    out_of_order: int = 0

    def note(self, path: str, msg_id: str) -> None:
        event = int(msg_id.split("_")[1]) if msg_id.count("_") == 2 else 0
        with self.lock:
            self.count += 1
            if event < self.last.get(path, 0):
                self.out_of_order += 1
            self.last[path] = max(event, self.last.get(path, 0))


class Receiver:
    """A fast webhook receiver on 127.0.0.1: every POST answered 204 at once."""

    def __init__(self) -> None:
        received = self.received = Received()

        class Answer(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.note(self.path, self.headers.get("webhook-id") or "")
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
