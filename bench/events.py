"""Events (docs/events.md): what recording one costs a write, how soon a long poll hears it, how
fast the sender delivers webhooks, and what an idle SSE stream costs the server.

In a throwaway deployment of either mode (``tests/fakes/servers.py``: its own database and the
demo project; in production mode PostgreSQL and Redis), the targets of issue 42:

1. **A write's cost** (``--writes``, 200): in the deployment's own process (``manage.py shell``),
   ``item_update`` of a title, ``claim_take`` and ``claim_release`` (the ticket back to ready: an
   ``item.runnable`` too), each ``--writes`` times with the events recorded and as many with
   ``tracker.services.activity.events_from_activity`` a no-op (the baseline), interleaved in
   random order. p50 and p95 of each side and their differences (target: at most +1 ms).
2. **Webhooks** (``--deliveries``, 2,000): ``deliveries_send`` (what the worker's
   ``tracker.deliver_webhooks`` and the embedded server's loop run), in the deployment's process,
   to completion, with the deliveries queued over 1, 4 and 20 endpoints of a receiver on
   127.0.0.1 in this process that answers 204 at once; deliveries/s (target: at least 200).
3. **Long polls** (``--waiters``, 1 then 100; ``--rounds``, 10): one daphne; the waiters each hold
   ``GET /api/v1/projects/DEMO/events/?after=ID&wait=60`` on a keep-alive connection of their
   own; once they listen (``--settle`` s), a comment is posted over REST, and each waiter's
   answer is timed from the write's request, from the event's ``created_at`` (its INSERT, just
   before the commit) and from the write's answer (after the commit, which the waiters' own work
   in the process delays). p50/p95/p99/max over the rounds (target: p99 within 50 ms of the
   commit, with 100 waiters). Beside them, the transport's baseline: one ``GET /healthz`` sent when the
   write answers, and ``GET /healthz`` on all the waiters' connections at once after each round.
4. **Idle streams** (``--streams``, 1,000): a fresh daphne, 20 streams opened and closed (first
   use), its RSS (``VmRSS``) and threads, then as many SSE streams of ``…/events/stream/``
   opened (each once its ``retry:`` line came), ``--idle`` seconds later its RSS again:
   (after - before) / streams (target: at most 40 KB each). All closed, the same again (what a
   daphne that has served as many already pays); then one comment, and how soon each stream had
   it. The streams ask with ``Accept: */*`` (as curl does);
   the status a browser's ``EventSource`` gets (``Accept: text/event-stream``) is printed too.

This process's open-file limit is raised to its hard limit; the daphne inherits it (both are
printed). The writes leave search indexing out of both sides (embedded, it embeds the item in the
committing thread), and run a hub on an event loop of the shell's process, as daphne does, so that
the tell that wakes the feed's waiters takes the server's road. The parts run in the order above:
1 and 2 with no daphne (embedded, its delivery loop would send the deliveries too).

Prints the figures; no assertion on time (docs/benchmarks.md).

    .venv/bin/python bench/events.py                                      # embedded (SQLite)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/events.py                                  # PostgreSQL and Redis
    .venv/bin/python bench/events.py --parts polls,streams --waiters 200  # some of it, bigger
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _events_http import Connection, PollFigures, poll_rounds, stream_status, streams_fan_out, streams_open
from _events_inprocess import OVERHEAD, WEBHOOKS, Receiver, in_deployment
from _ws import api_token, percentile, proc_status_kb, raise_fd_limit

from tests.fakes.servers import PASSWORD, Deployment, Server, production_mode

PARTS = ("writes", "webhooks", "polls", "streams")
ENDPOINTS = (1, 4, 20)
WRITES = ("item_update", "claim_take", "claim_release")


def figures(values: list[float], shares: tuple[float, ...] = (0.5, 0.95, 0.99)) -> str:
    """Milliseconds: the percentiles and the max."""
    if not values:
        return "none"
    parts = [f"p{round(share * 100)} {percentile(values, share):.1f}" for share in shares]
    return ", ".join([*parts, f"max {max(values):.1f} ms"])


def counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


# --- 1. a write's cost -------------------------------------------------------------------------


def measure_writes(deployment: Deployment, writes: int) -> None:
    result = in_deployment(deployment, OVERHEAD.format(writes=writes, warmup=10))
    print(f"\n1. A write's cost: {writes} of each, events recorded / not (baseline), interleaved")
    for op in WRITES:
        recorded = [s * 1000 for s in result["times"][f"{op} events"]]
        baseline = [s * 1000 for s in result["times"][f"{op} baseline"]]
        p50, p95 = percentile(recorded, 0.5), percentile(recorded, 0.95)
        b50, b95 = percentile(baseline, 0.5), percentile(baseline, 0.95)
        print(
            f"  {op:<14} ({result['events'].get(op, '?')} events): events p50 {p50:.2f} / p95 {p95:.2f} ms; "
            f"baseline p50 {b50:.2f} / p95 {b95:.2f} ms; "
            f"difference p50 {p50 - b50:+.2f} / p95 {p95 - b95:+.2f} ms"
        )


# --- 2. webhooks -------------------------------------------------------------------------------


def measure_webhooks(deployment: Deployment, receiver: Receiver, deliveries: int) -> None:
    print(f"\n2. Webhooks: {deliveries} deliveries, deliveries_send to completion, a receiver answering 204")
    for endpoints in ENDPOINTS:
        before = receiver.received.count
        code = WEBHOOKS.format(
            endpoints=endpoints, deliveries=deliveries, receiver=receiver.url, key=f"WH{endpoints}"
        )
        result = in_deployment(deployment, code)
        rate = result["delivered"] / result["seconds"]
        print(
            f"  {endpoints:>2} endpoint(s): {result['delivered']} delivered in {result['seconds']:.2f} s: "
            f"{rate:.0f} deliveries/s ({result['failed']} failed, "
            f"{receiver.received.count - before} received, "
            f"{receiver.received.out_of_order} out of order so far; {result['threads']} sending threads)"
        )


# --- 3. long polls -----------------------------------------------------------------------------


def first_item(base_url: str, auth: str) -> str:
    request = urllib.request.Request(
        f"{base_url}/api/v1/projects/DEMO/items/?kind=ticket", headers={"Authorization": auth}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        body: Any = json.loads(response.read())
    rows = body["results"] if isinstance(body, dict) else body
    return str(rows[0]["key"])


def measure_polls(server: Server, auth: str, item_key: str, args: argparse.Namespace) -> None:
    print(f"\n3. Long polls on one daphne, {args.rounds} rounds each (after one not counted)")
    for waiters in args.waiters:
        found: PollFigures = asyncio.run(
            poll_rounds(
                server.url, auth, item_key=item_key, waiters=waiters, rounds=args.rounds, settle=args.settle
            )
        )
        print(f"  {waiters} waiter(s):")
        print(f"    answer after the write's request:    {figures(found.from_request)}")
        print(f"    answer after the event's created_at: {figures(found.from_event)}")
        print(f"    answer after the write's answer:     {figures(found.from_response)}")
        print(f"    GET /healthz sent as the write answered, round trip: {figures(found.healthz_meanwhile)}")
        print(f"    GET /healthz on all {waiters} connections at once: {figures(found.healthz_all)}")
        print(f"    answers without the event: {found.missed}; answered before the write: {found.early}")


# --- 4. idle streams ---------------------------------------------------------------------------


def open_files_limit(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return " / ".join(line.split()[3:5])
    return "?"


def memory(pid: int) -> tuple[int, int]:
    """The process's RSS (KB) and its threads."""
    return proc_status_kb(pid, "VmRSS"), proc_status_kb(pid, "Threads")


async def _fill(server: Server, auth: str, count: int, idle: float, label: str) -> list[Connection]:
    """``count`` streams opened, and what they cost the daphne ``idle`` seconds later."""
    assert server.process is not None
    (before, threads_before), started = memory(server.process.pid), time.perf_counter()
    streams = await streams_open(server.url, auth, count)
    opened = time.perf_counter() - started
    await asyncio.sleep(idle)
    after, threads = memory(server.process.pid)
    print(
        f"  {label}: opened in {opened:.1f} s; RSS {before / 1024:.1f} -> {after / 1024:.1f} MB "
        f"{idle:.0f} s later: {(after - before) / count:.1f} KB a stream; "
        f"threads {threads_before} -> {threads}"
    )
    return streams


async def _streams(server: Server, auth: str, item_key: str, count: int, idle: float) -> None:
    assert server.process is not None
    pid = server.process.pid
    print(f"\n4. Idle streams: {count} SSE streams on one daphne (its open files: {open_files_limit(pid)})")
    eventsource = await stream_status(server.url, auth, "text/event-stream")
    print(f"  asked for as a browser's EventSource asks (Accept: text/event-stream): HTTP {eventsource}")
    for stream in await streams_open(server.url, auth, 20):  # first-use costs stay out of the figure
        stream.close()
    await asyncio.sleep(2)
    for stream in await _fill(server, auth, count, idle, "the first fill, a fresh daphne"):
        stream.close()
    await asyncio.sleep(3)
    rss, threads = memory(pid)
    print(f"  closed: RSS {rss / 1024:.1f} MB, threads {threads}")
    streams = await _fill(server, auth, count, idle, "again")
    writer = await Connection.open(server.url, auth)
    try:
        times, missed = await streams_fan_out(streams, writer, item_key)
    finally:
        writer.close()
        for stream in streams:
            stream.close()
    print(f"  one comment, heard by each stream after the write's answer: {figures(times)}; missed: {missed}")


# --- the run -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"some of {','.join(PARTS)}")
    parser.add_argument("--writes", type=int, default=200, help="writes of each kind, per side")
    parser.add_argument(
        "--waiters", type=counts, default=[1, 100], help="long polls at once, comma-separated: a run each"
    )
    parser.add_argument("--rounds", type=int, default=10, help="rounds of long polls")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds for the waiters to listen")
    parser.add_argument("--deliveries", type=int, default=2000, help="webhook deliveries per run")
    parser.add_argument("--streams", type=int, default=1000, help="idle SSE streams")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds the streams stay idle")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if parts - set(PARTS):
        parser.error(f"--parts: some of {', '.join(PARTS)}")
    limit = raise_fd_limit()  # the daphne started below inherits it
    home = Path(tempfile.mkdtemp(prefix="ballet-bench-events-"))
    extra = {"BALLET_LIMIT_MCP_REQUESTS_PER_MINUTE": "1000000", "BALLET_WEBHOOKS_ALLOW_PRIVATE": "1"}
    receiver = Receiver().start()
    deployment = Deployment.create(home, "http://127.0.0.1:9", extra_env=extra)
    server = Server(deployment, log=home / "daphne.log")
    try:
        mode = "postgresql + redis" if production_mode() else "sqlite + in-memory layer"
        load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
        print(f"mode: {mode}; load {load}; open files here: {limit}; daphne's log: {server.log}")
        # In the deployment's process first, with no daphne: embedded, its delivery loop would
        # send the webhooks' deliveries too.
        if "writes" in parts:
            measure_writes(deployment, args.writes)
        if "webhooks" in parts:
            measure_webhooks(deployment, receiver, args.deliveries)
        if parts & {"polls", "streams"}:
            server.start()
            auth = f"Token {api_token(server.url, 'demo', PASSWORD)}"
            item_key = first_item(server.url, auth)
            if "polls" in parts:
                measure_polls(server, auth, item_key, args)
            if "streams" in parts:
                if "polls" in parts:  # a fresh daphne: what the polls left is no stream's
                    server.stop()
                    server.start()
                asyncio.run(_streams(server, auth, item_key, args.streams, args.idle))
    finally:
        server.stop()
        deployment.drop()
        receiver.stop()


if __name__ == "__main__":
    main()
