"""The dependency graph as a picture: how long drawing it takes, alone and as ``graph.svg`` over HTTP.

For plans of 200, 400 and 1,000 tickets (with epics and milestones, about 1.5 dependencies per
ticket between nearby tickets, mixed states, some claims), in a throwaway deployment of either
mode with one real daphne:

1. In the deployment's own process: ``project_graph`` (the queries) and ``graph_document``
   (layout and render) alone, each ``--runs`` times.
2. End to end over HTTP, logged in through the login form, ``--runs`` times each:
   ``GET /projects/{key}/graph.svg``, the plan page ``GET /projects/{key}/`` (the tree, the
   panels and the graph drawn in it) and, as the baseline of the transport, ``GET /healthz``.

Prints p50, p95 and max of each; no assertion on time (docs/benchmarks.md).

    .venv/bin/python bench/graph.py                                       # embedded (SQLite)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/graph.py                                   # PostgreSQL and Redis
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _ws import login_cookie

from tests.fakes.servers import PASSWORD, Deployment, Server, production_mode

SIZES = (200, 400, 1000)

# Runs in the deployment (manage.py shell): builds the plan, then times the in-process steps.
PLAN = """
import random, time
from datetime import timedelta
from django.contrib.auth.models import User
from django.utils import timezone
from tracker.models import Claim, Dependency, Item, Membership, Project
from tracker.graph.plan_graph import project_graph
from tracker.graph.svg import graph_document

count, key, runs = {count}, "{key}", {runs}
demo = Project.objects.get(key="DEMO")
owner = User.objects.get(username="demo")
project = Project.objects.create(organization=demo.organization, key=key, name=f"Graph {{count}}",
                                 next_item_number=1)
Membership.objects.create(project=project, user=owner, role="owner")
rng = random.Random(count)
milestones, epics = max(1, count // 50), max(1, count // 20)
states = ["draft", "ready", "ready", "in_progress", "in_review", "done", "done", "cancelled"]
rows, number = [], 0
for kind, many in (("milestone", milestones), ("epic", epics)):
    for _ in range(many):
        number += 1
        rows.append(Item(project=project, kind=kind, number=number, title=f"{{kind}} {{number}}",
                         state="open"))
Item.objects.bulk_create(rows)
parents = {{kind: list(Item.objects.filter(project=project, kind=kind)) for kind in ("milestone", "epic")}}
rows = []
for n in range(count):
    number += 1
    rows.append(Item(project=project, kind="ticket", number=number, state=rng.choice(states),
                     title=f"Ticket {{n}}: the <{{rng.choice(['billing', 'login', 'export'])}}> part & more",
                     epic=rng.choice(parents["epic"]), milestone=rng.choice(parents["milestone"])))
Item.objects.bulk_create(rows)
tickets = list(Item.objects.filter(project=project, kind="ticket").order_by("number"))
pairs = set()
while len(pairs) < count * 3 // 2:
    a = rng.randrange(count - 1)
    pairs.add((a, min(count - 1, a + rng.randrange(1, 12))))
Dependency.objects.bulk_create([Dependency(blocker=tickets[a], blocked=tickets[b]) for a, b in sorted(pairs)])
now = timezone.now()
Claim.objects.bulk_create([Claim(project=project, item=t, holder=owner, renewed_at=now,
                                 expires_at=now + timedelta(hours=1))
                           for t in tickets if t.state == "in_progress"][: count // 10])
project.next_item_number = number + 1
project.save(update_fields=["next_item_number"])

def link(node):
    return f"/projects/{{key}}/items/{{node.key}}/"

read, drawn = [], []
for _ in range(runs):
    started = time.perf_counter()
    graph = project_graph(project=project)
    middle = time.perf_counter()
    graph_document(graph, href=link, title="Plan")
    read.append(middle - started)
    drawn.append(time.perf_counter() - middle)
print("TIMES", len(graph.nodes), len(graph.edges), " ".join(f"{{s:.6f}}" for s in read), "|",
      " ".join(f"{{s:.6f}}" for s in drawn))
"""


def figures(values: list[float]) -> str:
    ordered = sorted(values)

    def at(share: float) -> float:
        return ordered[min(len(ordered) - 1, int(len(ordered) * share))] * 1000

    return f"p50 {at(0.5):.1f} ms, p95 {at(0.95):.1f} ms, max {ordered[-1] * 1000:.1f} ms"


def over_http(url: str, cookie: str, runs: int) -> tuple[list[float], int]:
    seconds, size = [], 0
    for n in range(runs + 3):
        request = urllib.request.Request(url, headers={"Cookie": cookie})
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.status == 200, response.status
            size = len(response.read())
        if n >= 3:  # the first few warm the process up
            seconds.append(time.perf_counter() - started)
    return seconds, size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ballet-bench-graph-"))
    deployment = Deployment.create(home, "http://127.0.0.1:9")
    server = Server(deployment, log=home / "daphne.log").start()
    try:
        print(f"mode: {'postgresql' if production_mode() else 'sqlite'}, one daphne, {args.runs} runs each")
        cookie = login_cookie(server.url, "demo", PASSWORD)
        for count in SIZES:
            key = f"G{count}"
            out = deployment.manage("shell", "-c", PLAN.format(count=count, key=key, runs=args.runs))
            line = next(line for line in out.splitlines() if line.startswith("TIMES"))
            _, nodes, edges, *rest = line.split()
            split = rest.index("|")
            read = [float(value) for value in rest[:split]]
            drawn = [float(value) for value in rest[split + 1 :]]
            http, size = over_http(f"{server.url}/projects/{key}/graph.svg", cookie, args.runs)
            page, page_size = over_http(f"{server.url}/projects/{key}/", cookie, args.runs)
            baseline, _ = over_http(f"{server.url}/healthz", cookie, args.runs)
            print(f"{count} tickets ({nodes} in the graph, {edges} dependencies), {size // 1024} KiB of SVG:")
            print(f"  project_graph (queries):   {figures(read)}")
            print(f"  layout + render:           {figures(drawn)}")
            print(f"  graph.svg over HTTP:       {figures(http)}")
            print(f"  the plan page over HTTP:   {figures(page)} ({page_size // 1024} KiB)")
            print(f"  /healthz over HTTP:        {figures(baseline)}")
    finally:
        server.stop()
        deployment.drop()


if __name__ == "__main__":
    main()
