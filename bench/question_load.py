"""100 agents over MCP, one daphne killed halfway: every question gets an outcome, and only one.

A production deployment as in ``bench/chaos.py``: two daphnes A and B, a Celery worker with its
beat (the sweep recovering dead turns every 5 s, ``planner.start_waiting_work`` every 10 s), a
fresh PostgreSQL database (``Deployment.create``) and Redis (the database of ``REDIS_URL``, which
the run owns: it is emptied before and after). A fake Messages API runs in a process of its own
(this script, started again with ``--serve-fake``): a question's sub-chat gets, after 0.5 to 1.5 s
(so turns are in flight when the kill comes), an ``answer_question`` call naming the question's
tag, then, after the tool result, a short text.

``--agents`` (100) users, members of DEMO, each with its own token, start one after another over
``--ramp`` seconds; half connect to A, half to B, with the SDK's own MCP client (Streamable
HTTP). Each calls ``ask_question`` with a unique tag in its text, an ``idempotency_key`` and
``wait_seconds=60``. If the call fails (its daphne was killed under it) or answers ``open``, the
agent connects to the other daphne (to B once A is dead), asks again with the same key (the same
question comes back) and polls ``get_question`` with ``wait_seconds=30`` until the question is
no longer open; it gives up ``--bound`` (180) seconds after it first asked.

The running-turn limits: per user raised (each agent is a user of its own anyway), per project
``--project-turns`` (20, ``BALLET_LIMIT_RUNNING_TURNS_PER_PROJECT``), so questions wait for a
free turn and the waiting queue is exercised. Once half the agents have asked and a quarter
have their answer (or after ``--kill-after`` seconds), daphne A is SIGKILLed and not restarted.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet_bench REDIS_URL=redis://127.0.0.1:6379/6 \\
        .venv/bin/python bench/question_load.py [--agents 100] [--keep DIR]

Figures (production mode only):

- **answered**: agents whose question came back ``answered`` with the answer naming its own tag;
  **wrong answers**, answered with another question's tag, must be 0.
- **needs_human**: questions whose sub-chat's turn died with daphne A, recovered by the sweep
  (or by the daphne an agent waits on) and left to the project's humans with a reason: not
  lost, they have an outcome. Their reasons are listed.
- **lost**: agents with no outcome (still ``open``) after the bound. Must be 0.
- **duplicated**: questions in the database beyond one per agent (``Question`` rows by asker,
  read with ``manage.py shell``). Must be 0: retries carry the idempotency key.
- **ask → outcome**: from sending the first ``ask_question`` to reading the settled question,
  retries included; p50 and p99, for answered and needs_human questions apart.
- **peak PostgreSQL connections**: the most backends ``pg_stat_activity`` showed on the
  deployment's database, polled every 0.5 s during the run (the bench's own left out); with the
  transactions committed and rolled back meanwhile (``pg_stat_database``: a refused turn start,
  past the running-turn limits, is a rollback).
- **turns by process**: the turns running (``planner_session.turn_owner`` names the process's
  pid) on A, B and the worker just before the kill, and the most of each at once during the run;
  the questions waiting for a free turn just before the kill.
- **the dead A's turns**: when no turn of A was left ``running`` (each holds one of the
  project's running-turn places until recovered); the recovery sweeps that finished during the
  run and the longest gap between two, next to the longest ``start_waiting_work`` task (the
  worker's one pool process runs the turns it starts to their end, and nothing else meanwhile);
  turns the logs say crashed.
- **peak RSS**: daphne B (sampled every 0.5 s, and the kernel's high-water mark) and the worker
  (its process group summed: the main process with the beat, and its pool child that runs the
  tasks).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _fake_process import FakeProcess, serve
from _ws import percentile, proc_status_kb, process_group, raise_fd_limit

if TYPE_CHECKING:
    from mcp import ClientSession

    from tests.fakes.servers import Deployment, Server, Worker

TAG = re.compile(r"\[q:([a-z0-9-]+)\]")
SETTLED = ("answered", "needs_human", "withdrawn")
CALL_MARGIN = 30  # seconds a call may take beyond its wait before the agent gives it up


# --- the fake, in its own process ------------------------------------------------------------


def serve_fake() -> None:
    """Run the fake Messages API until stdin closes; print its base URL first."""
    from tests.fakes.messages_api import HangReply, TextReply, ToolCallSpec, ToolUseReply

    def respond(body: dict[str, Any]) -> Any:
        content = body["messages"][-1]["content"]
        if isinstance(content, list) and any(block.get("type") == "tool_result" for block in content):
            return TextReply("Answered.")
        found = TAG.search(json.dumps(body["messages"][0]))
        tag = found.group(1) if found else "none"
        call = ToolUseReply([ToolCallSpec("answer_question", {"answer": f"The answer to [q:{tag}]."})])
        # The same pause for the same question on every run: the model "thinks" before it answers.
        return HangReply(random.Random(tag).uniform(0.5, 1.5), reply=call)

    serve(respond)


# --- the deployment --------------------------------------------------------------------------


@dataclass
class Cluster:
    deployment: Deployment
    worker: Worker
    servers: dict[str, Server]


def build(home: Path, fake_url: str, args: argparse.Namespace) -> Cluster:
    from tests.fakes.servers import Deployment, Server, Worker

    deployment = Deployment.create(
        home,
        fake_url,
        redis_url=os.environ["REDIS_URL"],
        extra_env={
            "BALLET_SEARCH_EMBEDDING_BACKEND": "tracker.search.embeddings.HashingBackend",
            "BALLET_LIMIT_RUNNING_TURNS_PER_USER": "1000",
            "BALLET_LIMIT_RUNNING_TURNS_PER_PROJECT": str(args.project_turns),
        },
    )
    worker = Worker(deployment, home)
    servers = {name: Server(deployment, log=home / f"daphne-{name}.log") for name in "AB"}
    worker.start()
    for server in servers.values():
        server.start(wait=False)
    for server in servers.values():
        server.wait_ready()
    return Cluster(deployment, worker, servers)


def teardown(cluster: Cluster) -> None:
    for server in cluster.servers.values():
        server.stop()
    cluster.worker.stop()
    cluster.deployment.drop()


def flush_redis() -> None:
    import redis

    with redis.Redis.from_url(os.environ["REDIS_URL"]) as client:
        client.flushdb()  # the run's database only: stale limits and broker queues of an earlier run


MAKE_AGENTS = """
import json
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from tracker.models import Membership, Project, Role
project = Project.objects.get(key="DEMO")
tokens = []
for n in range({count}):
    user, _ = User.objects.get_or_create(username=f"load-agent-{{n}}")
    Membership.objects.get_or_create(project=project, user=user, defaults={{"role": Role.MEMBER}})
    tokens.append(Token.objects.get_or_create(user=user)[0].key)
print(json.dumps(tokens))
"""

QUESTIONS_BY_ASKER = """
import json
from planner.models import Question
rows = Question.objects.filter(asker__username__startswith="load-agent-").order_by("pk")
out = {}
for q in rows.values("asker__username", "pk", "status", "started", "idempotency_key"):
    row = [q["pk"], q["status"], q["started"], q["idempotency_key"]]
    out.setdefault(q["asker__username"], []).append(row)
print(json.dumps(out))
"""


def manage_json(deployment: Deployment, code: str) -> Any:
    return json.loads(deployment.manage("shell", "-c", code).strip().splitlines()[-1])


# --- sampling: PostgreSQL connections, turns by process, RSS -------------------------------

BENCH_APP = "question-load-bench"  # the bench's own connections, left out of the counts


@dataclass
class Peaks:
    connections: int = 0
    running: Counter[str] = field(default_factory=Counter)  # most turns at once, by process
    daphne_b_kb: int = 0
    worker_kb: int = 0
    samples: int = 0
    killed: float | None = None  # when A was killed (monotonic)
    a_cleared: float | None = None  # seconds after the kill when no turn of A was left running


def group_rss_kb(pid: int) -> int:
    total = 0
    for member in process_group(pid):
        try:
            total += proc_status_kb(member, "VmRSS")
        except (OSError, KeyError):
            continue
    return total


class Database:
    """The bench's look at the deployment's database: connections, running turns by process,
    questions waiting for a free turn, transactions; thread-safe (the sampler and the kill)."""

    def __init__(self, cluster: Cluster) -> None:
        import psycopg

        base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
        self.name = cluster.deployment.database
        self.stats = psycopg.connect(f"{base}/postgres", autocommit=True, application_name=BENCH_APP)
        self.app = psycopg.connect(f"{base}/{self.name}", autocommit=True, application_name=BENCH_APP)
        self.lock = threading.Lock()
        self.names = {str(s.process.pid): name for name, s in cluster.servers.items() if s.process}
        assert cluster.worker.process is not None
        self.worker_pid = cluster.worker.process.pid

    def _one(self, connection: Any, sql: str, params: list[Any]) -> Any:
        with self.lock:
            return connection.execute(sql, params).fetchone()

    def connections(self) -> int:
        sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name <> %s"
        return int(self._one(self.stats, sql, [self.name, BENCH_APP])[0])

    def transactions(self) -> tuple[int, int]:
        sql = "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = %s"
        commits, rollbacks = self._one(self.stats, sql, [self.name])
        return int(commits), int(rollbacks)

    def running(self) -> Counter[str]:
        """Running turns by process: A, B, worker (the owner names the process's pid)."""
        with self.lock:
            rows = self.app.execute(
                "SELECT turn_owner, count(*) FROM planner_session WHERE state = 'running' GROUP BY 1"
            ).fetchall()
        workers = {str(pid) for pid in process_group(self.worker_pid)}
        by: Counter[str] = Counter()
        for owner, count in rows:
            pid = owner.split(":")[1] if owner.count(":") >= 2 else ""
            by[self.names.get(pid) or ("worker" if pid in workers else "other")] += count
        return by

    def waiting(self) -> int:
        sql = "SELECT count(*) FROM planner_question WHERE status = 'open' AND NOT started"
        return int(self._one(self.app, sql, [])[0])

    def close(self) -> None:
        self.stats.close()
        self.app.close()


def sample(cluster: Cluster, database: Database, peaks: Peaks, done: threading.Event) -> None:
    """Every 0.5 s until ``done``: connections and turns on the deployment's database, RSS."""
    daphne_b, worker = cluster.servers["B"].process, cluster.worker.process
    assert daphne_b is not None
    assert worker is not None
    while not done.wait(0.5):
        peaks.connections = max(peaks.connections, database.connections())
        running = database.running()
        peaks.running |= running  # the most of each, not the sum
        if peaks.killed is not None and peaks.a_cleared is None and not running["A"]:
            peaks.a_cleared = time.monotonic() - peaks.killed
        peaks.daphne_b_kb = max(peaks.daphne_b_kb, proc_status_kb(daphne_b.pid, "VmRSS"))
        peaks.worker_kb = max(peaks.worker_kb, group_rss_kb(worker.pid))
        peaks.samples += 1


LOGGED = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): [^]]*\] (.*)$")
TASK = re.compile(
    r"Task (planner\.\w+)\[([0-9a-f-]+)\] received|task finished: (planner\.\w+)\[([0-9a-f-]+)\]"
)


@dataclass
class WorkerLog:
    sweeps: int = 0  # recovery sweeps finished during the run
    longest_gap: float = 0.0  # seconds between two finished sweeps (the beat asks every 5 s)
    longest_waiting_work: float = 0.0  # a start_waiting_work task, received to finished
    crashed: int = 0  # turns logged as crashed, in the worker and the daphnes


def worker_log(home: Path, began: datetime, ended: datetime) -> WorkerLog:
    """What the worker's log says of the run: sweeps, the longest start_waiting_work, crashed turns."""
    figures, received, finished = WorkerLog(), {}, []
    for line in (home / "worker.log").read_text(errors="replace").splitlines():
        logged, task = LOGGED.match(line), TASK.search(line)
        if logged is None or task is None:
            continue
        at = datetime.strptime(logged.group(1), "%Y-%m-%d %H:%M:%S,%f").astimezone()  # the local clock
        if not began <= at <= ended:
            continue
        if task.group(1) == "planner.start_waiting_work":
            received[task.group(2)] = at
        elif task.group(3) == "planner.recover_dead_turns":
            finished.append(at)
        elif task.group(4) in received:
            seconds = (at - received[task.group(4)]).total_seconds()
            figures.longest_waiting_work = max(figures.longest_waiting_work, seconds)
    figures.sweeps = len(finished)
    gaps = [(b - a).total_seconds() for a, b in zip([began, *finished], [*finished, ended], strict=True)]
    figures.longest_gap = max(gaps)
    logs = ["worker.log", "daphne-A.log", "daphne-B.log"]
    figures.crashed = sum((home / name).read_text(errors="replace").count(" crashed\n") for name in logs)
    return figures


# --- the agents ------------------------------------------------------------------------------


@dataclass
class Outcome:
    status: str = "lost"  # answered, needs_human, withdrawn, or lost
    right_tag: bool = False
    reason: str = ""
    seconds: float = 0.0
    question_ids: set[int] = field(default_factory=set)
    failed_calls: int = 0
    connections: int = 0
    asked: bool = False


@dataclass
class Run:
    """What the agents share: where to connect, and the counts the kill waits for."""

    urls: dict[str, str]
    agents: int
    bound: float
    alive: set[str] = field(default_factory=lambda: {"A", "B"})
    asked: int = 0
    answered: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    killed_at: dict[str, Any] = field(default_factory=dict)


async def call(session: ClientSession, tool: str, arguments: dict[str, Any], wait: float) -> dict[str, Any]:
    """One tool call; the question's JSON, or an exception for a refusal or a dropped connection."""
    result = await session.call_tool(tool, arguments, read_timeout_seconds=wait + CALL_MARGIN)
    body: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    if result.is_error:
        raise RuntimeError(f"{tool} refused: {body.get('error', body)}")
    return body


@dataclass(frozen=True)
class Ask:
    """One agent's question: its token, its arguments (the same on every retry) and its deadline."""

    token: str
    arguments: dict[str, Any]
    deadline: float


async def attempt(run: Run, server: str, ask: Ask, first: bool, out: Outcome) -> dict[str, Any]:
    """Connect to ``server``, ask (again, with the same key), then poll until settled or out of time."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    wait = 60 if first else 30
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {ask.token}"}, timeout=wait + CALL_MARGIN
        ) as http,
        streamable_http_client(f"{run.urls[server]}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await asyncio.wait_for(session.initialize(), CALL_MARGIN)
        out.connections += 1
        if not out.asked:
            out.asked, run.asked = True, run.asked + 1
        body = await call(session, "ask_question", {**ask.arguments, "wait_seconds": wait}, wait)
        out.question_ids.add(int(body["id"]))
        while body["status"] == "open" and (left := ask.deadline - time.monotonic()) > 0:
            polled = {"project": "DEMO", "id": body["id"], "wait_seconds": min(30, max(1, int(left)))}
            body = await call(session, "get_question", polled, 30)
    return body


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside the transport's task groups: what actually went wrong."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def agent(run: Run, index: int, token: str, delay: float, tag: str) -> Outcome:
    """Ask on A or B; on a failure or an open answer, again on the other (B once A is dead)."""
    await asyncio.sleep(delay)
    began, out = time.monotonic(), Outcome()
    text = f"Which columns go in the export? [q:{tag}]"
    ask = Ask(token, {"project": "DEMO", "text": text, "idempotency_key": f"key-{tag}"}, began + run.bound)
    server, first, body = "AB"[index % 2], True, None
    while time.monotonic() < ask.deadline:
        try:
            body = await attempt(run, server, ask, first, out)
        except Exception as exc:  # the daphne died under the call, or refused it
            out.failed_calls += 1
            leaf = _leaf(exc)
            run.errors[f"{server}: {type(leaf).__name__}: {str(leaf)[:80]}"] += 1
            body = None
            await asyncio.sleep(0.2)
        first = False
        if body is not None and body["status"] in SETTLED:
            break
        server = ("B" if server == "A" else "A") if len(run.alive) > 1 else min(run.alive)
    if body is not None and body["status"] in SETTLED:
        out.status, out.reason = body["status"], body.get("reason") or ""
        out.right_tag = f"[q:{tag}]" in (body.get("answer") or "")
        out.seconds = time.monotonic() - began
        run.answered += out.status == "answered"
    return out


async def kill_halfway(
    run: Run, *, cluster: Cluster, database: Database, peaks: Peaks, started: float, kill_after: float
) -> None:
    """SIGKILL daphne A once half the agents asked and a quarter have their answer (or at the latest);
    what ran where, and what waited, just before."""
    while True:
        await asyncio.sleep(0.1)
        halfway = run.asked * 2 >= run.agents and run.answered * 4 >= run.agents
        late = time.monotonic() - started >= kill_after
        if halfway or late:
            break
    running, waiting = await asyncio.to_thread(lambda: (database.running(), database.waiting()))
    run.alive.discard("A")
    await asyncio.to_thread(cluster.servers["A"].kill)
    peaks.killed = time.monotonic()
    run.killed_at = {
        "seconds": time.monotonic() - started,
        "asked": run.asked,
        "answered": run.answered,
        "trigger": "halfway" if halfway else f"{kill_after:.0f} s passed",
        "running": dict(sorted(running.items())),
        "waiting": waiting,
    }


async def load(
    run: Run,
    *,
    cluster: Cluster,
    database: Database,
    peaks: Peaks,
    tokens: list[str],
    args: argparse.Namespace,
) -> list[Outcome]:
    prefix = uuid.uuid4().hex[:6]
    started = time.monotonic()
    killer = asyncio.create_task(
        kill_halfway(
            run, cluster=cluster, database=database, peaks=peaks, started=started, kill_after=args.kill_after
        )
    )
    step = args.ramp / max(1, len(tokens))
    outcomes = await asyncio.gather(
        *(agent(run, n, token, n * step, f"{prefix}-{n}") for n, token in enumerate(tokens))
    )
    if not killer.done():  # every agent done before the kill: a run that proves nothing
        killer.cancel()
    return list(outcomes)


# --- the figures -----------------------------------------------------------------------------


def _seconds(values: list[float]) -> str:
    if not values:
        return "none"
    return (
        f"p50 {percentile(values, 0.5):.1f} s, p99 {percentile(values, 0.99):.1f} s, max {max(values):.1f} s"
    )


def duplicates(cluster: Cluster, agents: int) -> tuple[int, int, list[str]]:
    """Questions beyond one per agent, agents without any, and the duplicates' rows."""
    by_asker: dict[str, list[list[Any]]] = manage_json(cluster.deployment, QUESTIONS_BY_ASKER)
    extra = sum(max(0, len(rows) - 1) for rows in by_asker.values())
    missing = agents - len(by_asker)
    shown = [f"{asker}: {rows}" for asker, rows in by_asker.items() if len(rows) > 1]
    return extra, missing, shown


def report(run: Run, outcomes: list[Outcome], cluster: Cluster, args: argparse.Namespace) -> None:
    by_status = Counter(out.status for out in outcomes)
    right = sum(out.status == "answered" and out.right_tag for out in outcomes)
    extra, missing, shown = duplicates(cluster, len(outcomes))
    kill = run.killed_at
    print(f"question load · {len(outcomes)} agents over MCP · {args.project_turns} running turns a project")
    if kill:
        print(
            f"  daphne A SIGKILLed at {kill['seconds']:.1f} s ({kill['trigger']}): "
            f"{kill['asked']} asked, {kill['answered']} answered; turns running just before "
            f"{kill['running'] or 0}, questions waiting for a free turn {kill['waiting']}"
        )
    else:
        print("  daphne A was never killed: every agent was done first")
    print(
        f"  answered with the right tag: {right}; wrong answers: {by_status['answered'] - right}  [must be 0]"
    )
    reasons = Counter(out.reason[:100] for out in outcomes if out.status == "needs_human")
    print(f"  needs_human (turn died with A, recovered; not lost): {by_status['needs_human']}")
    for reason, count in reasons.most_common():
        print(f"    {count}x {reason}")
    if by_status["withdrawn"]:
        print(f"  withdrawn: {by_status['withdrawn']}")
    print(f"  lost (still open after {run.bound:.0f} s): {by_status['lost']}  [must be 0]")
    print(f"  duplicated (questions beyond one per agent in the database): {extra}  [must be 0]")
    for line in shown[:10]:
        print(f"    {line}")
    if missing:
        print(f"  agents without any question in the database: {missing}")


def report_costs(run: Run, outcomes: list[Outcome], cluster: Cluster, peaks: Peaks, xacts: list[int]) -> None:
    answered = [out.seconds for out in outcomes if out.status == "answered"]
    human = [out.seconds for out in outcomes if out.status == "needs_human"]
    print(f"  ask → outcome, answered: {_seconds(answered)}")
    print(f"  ask → outcome, needs_human: {_seconds(human)}")
    print(f"  ask → outcome, all settled: {_seconds(answered + human)}")
    retried = sum(out.connections > 1 or out.failed_calls > 0 for out in outcomes)
    print(f"  agents that reconnected: {retried}; failed calls: {sum(out.failed_calls for out in outcomes)}")
    for error, count in run.errors.most_common(6):
        print(f"    {count}x {error}")
    database = cluster.deployment.database
    print(f"  peak PostgreSQL connections to {database}: {peaks.connections} ({peaks.samples} samples)")
    print(f"    transactions during the run: {xacts[0]} committed, {xacts[1]} rolled back")
    print(f"  most turns running at once, by process: {dict(sorted(peaks.running.items()))}")
    daphne_b = cluster.servers["B"].process
    assert daphne_b is not None
    hwm = proc_status_kb(daphne_b.pid, "VmHWM") if daphne_b.poll() is None else 0
    print(
        f"  peak RSS: daphne B {peaks.daphne_b_kb / 1024:.1f} MB (high-water mark {hwm / 1024:.1f} MB), "
        f"worker {peaks.worker_kb / 1024:.1f} MB (main + pool child)"
    )


def report_worker(peaks: Peaks, logged: WorkerLog) -> None:
    cleared = "never" if peaks.a_cleared is None else f"{peaks.a_cleared:.1f} s after the kill"
    print(f"  no turn of the dead A left running (each holding a running-turn place): {cleared}")
    print(
        f"  recovery sweeps during the run: {logged.sweeps}, the longest gap between two "
        f"{logged.longest_gap:.1f} s; the longest start_waiting_work task {logged.longest_waiting_work:.1f} s"
    )
    print(f"  turns logged as crashed (worker and daphnes): {logged.crashed}")


def measure(cluster: Cluster, home: Path, args: argparse.Namespace) -> None:
    tokens: list[str] = manage_json(cluster.deployment, MAKE_AGENTS.format(count=args.agents))
    urls = {name: server.url for name, server in cluster.servers.items()}
    run = Run(urls=urls, agents=len(tokens), bound=args.bound)
    database, peaks, done = Database(cluster), Peaks(), threading.Event()
    sampler = threading.Thread(target=sample, args=(cluster, database, peaks, done), daemon=True)
    before = database.transactions()
    sampler.start()
    began = datetime.now(UTC).astimezone()
    try:
        outcomes = asyncio.run(
            load(run, cluster=cluster, database=database, peaks=peaks, tokens=tokens, args=args)
        )
    finally:
        done.set()
        sampler.join(5)
    logged = worker_log(home, began, datetime.now(UTC).astimezone())
    xacts = [after - then for after, then in zip(database.transactions(), before, strict=True)]
    xacts[0] -= peaks.samples + 1  # the sampler's own reads of the deployment's database
    database.close()
    report(run, outcomes, cluster, args)
    report_costs(run, outcomes, cluster, peaks, xacts)
    report_worker(peaks, logged)


def main() -> None:
    if len(sys.argv) == 2 and sys.argv[1] == "--serve-fake":
        serve_fake()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds over which the agents start")
    parser.add_argument("--project-turns", type=int, default=20, help="running turns per project")
    parser.add_argument("--kill-after", type=float, default=60.0, help="kill A by then at the latest")
    parser.add_argument("--bound", type=float, default=180.0, help="seconds an agent waits for an outcome")
    parser.add_argument("--keep", type=Path, default=None, help="keep the processes' logs in this folder")
    args = parser.parse_args()
    if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        print("the question load needs the production mode: set DATABASE_URL and REDIS_URL", file=sys.stderr)
        raise SystemExit(2)
    raise_fd_limit()
    for name in ("mcp", "httpx2", "httpcore2"):  # a dropped connection is expected here, and counted
        logging.getLogger(name).setLevel(logging.CRITICAL)
    home = args.keep or Path(tempfile.mkdtemp(prefix="ballet-question-load-"))
    home.mkdir(parents=True, exist_ok=True)
    flush_redis()
    fake = FakeProcess(__file__, "--serve-fake")
    cluster = None
    try:
        started = time.monotonic()
        cluster = build(home, fake.base_url, args)
        print(f"  (deployment up in {time.monotonic() - started:.0f} s; logs in {home})")
        measure(cluster, home, args)
    finally:
        if cluster is not None:
            teardown(cluster)
        fake.stop()
        flush_redis()
        if args.keep is None:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
