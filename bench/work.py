"""A worker's calls as a worker makes them: over HTTP to a real daphne on the seeded demo, in either mode.

1. The brief against the calls it replaces, interleaved in the same run: one
   ``GET .../items/{key}/brief/`` against the item, each blocker, the claims, the knowledge
   search, the questions and the skills (what a worker read before there was a brief).
2. Claim races: ``--racers`` workers (threads, each its own connection) claim the same
   runnable ticket at once, for ``--rounds`` tickets; how many won each race (always 1), and
   the p50/p95 of a claim's answer, won or refused.
3. A claim's day: claim, heartbeat, a progress report and a done report, one after another;
   the p50 of each step.

    .venv/bin/python bench/work.py                                       # embedded (SQLite)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/work.py                                   # PostgreSQL and Redis
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.servers import Deployment, Server, production_mode

TICKET = "DEMO-12"  # "book": an epic, a milestone, a blocker, linked knowledge


class Agent:
    def __init__(self, base: str, key: str) -> None:
        self.base, self.key = base, key

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any, float]:
        request = urllib.request.Request(
            f"{self.base}/api/v1/projects/DEMO/{path}",
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
            method=method,
        )
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, payload = response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as refused:
            status, payload = refused.code, json.loads(refused.read() or b"null")
        return status, payload, time.perf_counter() - started


def ms(values: list[float], share: float = 0.5) -> str:
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(len(ordered) * share))] * 1000:.1f} ms"


def briefs(agent: Agent, rounds: int) -> None:
    brief, six = [], []
    for _ in range(rounds):
        brief.append(agent.call("GET", f"items/{TICKET}/brief/")[2])
        started = time.perf_counter()
        status, item, _ = agent.call("GET", f"items/{TICKET}/")
        assert status == 200, item
        for blocker in item["dependencies"]["blockers"]:
            agent.call("GET", f"items/{blocker['key']}/")
        agent.call("GET", "claims/?active=false")
        agent.call("GET", "search/?q=booking+rules")
        agent.call("GET", "questions/?status=answered")
        agent.call("GET", "skills/")
        six.append(time.perf_counter() - started)
    print(f"brief: p50 {ms(brief)}, p95 {ms(brief, 0.95)} (one call)")
    replaced = "item, blockers, claims, search, questions, skills"
    print(f"the calls it replaces: p50 {ms(six)}, p95 {ms(six, 0.95)} ({replaced})")


def races(agent: Agent, keys: list[str], racers: int) -> None:
    winners, latencies = [], []
    lock = threading.Lock()
    for key in keys:
        gate = threading.Barrier(racers)
        answers: list[int] = []

        def race(key: str = key, gate: threading.Barrier = gate, answers: list[int] = answers) -> None:
            gate.wait()
            status, _, seconds = agent.call("POST", f"items/{key}/claim/")
            with lock:
                answers.append(status)
                latencies.append(seconds)

        threads = [threading.Thread(target=race) for _ in range(racers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert set(answers) <= {201, 409}, answers
        winners.append(answers.count(201))
    print(
        f"races: {len(keys)} tickets, {racers} workers each: winners per race {sorted(set(winners))}; "
        f"a claim's answer p50 {ms(latencies)}, p95 {ms(latencies, 0.95)}"
    )


def days(agent: Agent, keys: list[str]) -> None:
    steps: dict[str, list[float]] = {"claim": [], "heartbeat": [], "progress": [], "done": []}
    for key in keys:
        status, claim, seconds = agent.call("POST", f"items/{key}/claim/")
        assert status == 201, claim
        steps["claim"].append(seconds)
        steps["heartbeat"].append(agent.call("POST", f"claims/{claim['id']}/")[2])
        reports = f"claims/{claim['id']}/reports/"
        steps["progress"].append(agent.call("POST", reports, {"kind": "progress", "summary": "Half"})[2])
        done = {"kind": "done", "summary": "Done", "links": ["https://git.example.com/pr/1"]}
        steps["done"].append(agent.call("POST", reports, done)[2])
    print("a claim's day, p50: " + ", ".join(f"{name} {ms(values)}" for name, values in steps.items()))


TICKETS = """
from django.contrib.auth.models import User
from tracker.models import Project
from tracker.services.activity import Actor
from tracker.services.items import item_create
from tracker.services.keys import key_create
project = Project.objects.get(key="DEMO")
owner = User.objects.get(username="demo")
keys = [item_create(actor=Actor(user=owner), project=project, kind="ticket",
                    fields={{"title": f"Bench ticket {{n}}", "state": "ready"}}).key for n in range({count})]
agent = User.objects.get(username="agent")
print(key_create(user=agent, name="bench", scopes=["read", "ask", "work"])[1], *keys)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--racers", type=int, default=8)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ballet-bench-work-"))
    deployment = Deployment.create(home, "http://127.0.0.1:9")
    server = Server(deployment, log=home / "daphne.log").start()
    try:
        out = deployment.manage("shell", "-c", TICKETS.format(count=2 * args.rounds)).splitlines()[-1].split()
        key, tickets = out[0], out[1:]
        agent = Agent(server.url, key)
        print(f"mode: {'postgresql' if production_mode() else 'sqlite'}, one daphne")
        for _ in range(5):
            agent.call("GET", f"items/{TICKET}/brief/")  # warm up
        briefs(agent, args.rounds)
        races(agent, tickets[: args.rounds], args.racers)
        days(agent, tickets[args.rounds :])
    finally:
        server.stop()
        deployment.drop()


if __name__ == "__main__":
    main()
