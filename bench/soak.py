"""A mixed-load soak in production mode: agents over REST and MCP, humans chatting, for ``--minutes``.

A deployment as in ``bench/chaos.py``: two daphnes A and B, a Celery worker with its beat, a fresh
PostgreSQL database (``Deployment.create``, with ``log_lock_waits`` on) and a Redis server of the
run's own (``RedisServer``), nothing injected: only load. The fake Messages API runs in a process
of its own (this script, started again with ``--serve-fake``).

``--agents`` (30) users, members of DEMO, each with an API key (scopes read, ask, work); half work
over REST, half over MCP (the SDK's Streamable HTTP client, one session per agent kept open, or
with ``--mcp-sessions per-call`` one opened and closed around each call), and half of each on A,
half on B. Each does a worker's day over and over: list the runnable tickets,
claim one (losing some races), read its brief, sometimes ask a question (about the ticket or the
project; a few texts asked by many agents alike, so answers are reused) and wait for its answer,
heartbeats and progress reports with pauses between them, then ``done``, ``blocked``, ``failed``
or a release; now and then it lists the project's questions. The model answers a question's
sub-chat with ``answer_question`` after 0.3 to 1.2 s, or leaves one in seven to the humans.

``--humans`` (3, at least 2) users, maintainers of DEMO, each with a chat on A or B watched over a
WebSocket: a turn every 8 to 20 s, sent over REST or over the socket in turn; the model calls
``list_runnable`` and ``get_item`` (or, one turn in four, ``propose_changeset``) and then
streams a short answer. The first human also keeps the plan going every 5 s over REST: when
fewer than ``--runnable`` (40) tickets are runnable it proposes a changeset creating the missing ones
(ready), which the second human applies; it moves tickets in review to done the same way
(a changeset of updates with their ``base_version``), applies what the chats proposed, and
answers the questions left to humans.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet_soak REDIS_URL=redis://127.0.0.1:6379/5 \\
        .venv/bin/python bench/soak.py --minutes 30

Each minute, and for the whole run at the end: calls by surface and status (``rest`` 2xx/4xx/5xx,
``mcp`` ok/tool refusals/rate-limit refusals/exceptions, ``ws`` chat turns), the server errors with
their messages (a deadlock answers 503), MCP call failures by exception type (with the first
traceback of each), p50/p99 latency per operation, the RSS of each daphne and of the worker (its
main process with the beat, and its pool child apart) with its slope in MB a minute over the run's
second half, and what the logs say (deadlocks, database errors answered 503, tracebacks;
PostgreSQL's own log too when it is readable, ``--pg-log``). Production mode only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _fake_process import FakeProcess, serve
from _soak_figures import Figures, LogWatch, print_final, print_minute, rest_call
from _soak_humans import Human, human_loop, keeper_loop
from _ws import process_group, raise_fd_limit

if TYPE_CHECKING:
    from mcp import ClientSession

    from tests.fakes.servers import Deployment, RedisServer, Server, Worker

PROJECT = "DEMO"
ASKED_BY = "(Asked by "  # planner/domain/services/agent_questions.py HOW_TO_ANSWER: a question's sub-chat
CALL_TIMEOUT = 90.0  # seconds: a call longer than its wait plus this counts as failed
RATE_LIMITED_PAUSE = 5.0  # seconds an agent waits when refused past its requests a minute
# Texts many agents ask alike (about their ticket or the project): the first answer is reused.
SHARED_TEXTS = (
    "Which columns go in the CSV export?",
    "Do we keep the old booking rules for waitlists?",
    "Is the login page in scope for this milestone?",
    "Which time zone do reports use?",
)


# --- the fake model, in its own process -------------------------------------------------------


def respond(body: dict[str, Any]) -> Any:
    """A question's sub-chat: ``answer_question`` (or, one in seven, a text: left to the humans).
    A human's chat: ``list_runnable`` and ``get_item``, or ``propose_changeset``; then a text."""
    from tests.fakes.messages_api import HangReply, TextReply, ToolCallSpec, ToolUseReply, message_text

    messages = body["messages"]
    last = messages[-1]["content"]
    answered = isinstance(last, list) and any(block.get("type") == "tool_result" for block in last)
    texts = [message_text(m) for m in messages if m.get("role") == "user"]
    rng = random.Random(json.dumps(texts[-1:]))
    if any(ASKED_BY in text for text in texts):
        if answered:
            return TextReply("Answered.")
        if rng.random() < 1 / 7:
            return HangReply(
                rng.uniform(0.3, 1.2), reply=TextReply("The plan does not say; the humans will.")
            )
        call = ToolCallSpec("answer_question", {"answer": f"From the plan: {rng.randint(1, 10**6)}."})
        return HangReply(rng.uniform(0.3, 1.2), reply=ToolUseReply([call]))
    if answered:
        words = [f"word{i} " for i in range(rng.randint(10, 30))]
        return TextReply(chunks=words, delay_between_deltas=0.03)
    if "[soak propose]" in texts[-1]:
        create = {"op": "create", "kind": "ticket", "fields": {"title": "From a chat", "state": "ready"}}
        spec = ToolCallSpec("propose_changeset", {"title": "A ticket from a chat", "operations": [create]})
        return ToolUseReply([spec], text_before="Let me propose it. ")
    calls = [ToolCallSpec("list_runnable", {"limit": 5}), ToolCallSpec("get_item", {"key": "DEMO-1"})]
    return ToolUseReply(calls, text_before="Let me look. ")


def refused_code(error: BaseException) -> str | None:
    """The code of a refusal the MCP server sent as a JSON-RPC error (``rate_limited`` past the
    token's requests a minute), else None."""
    from mcp.shared.exceptions import MCPError

    data = error.data if isinstance(error, MCPError) else None
    return str(data.get("code")) if isinstance(data, dict) and data.get("code") else None


# --- the deployment ---------------------------------------------------------------------------


@dataclass
class Cluster:
    redis: RedisServer
    deployment: Deployment
    worker: Worker
    servers: dict[str, Server]

    def pids(self) -> dict[str, list[int]]:
        """The processes whose memory is sampled: each daphne, the worker's main process (with the
        beat's) and its pool child(ren)."""
        out = {name: [s.process.pid] for name, s in self.servers.items() if s.process}
        assert self.worker.process is not None
        main = self.worker.process.pid
        out["worker main"] = [main]
        out["worker pool"] = [pid for pid in process_group(main) if pid != main]
        return out


def build(home: Path, fake_url: str, args: argparse.Namespace) -> Cluster:
    from tests.fakes.servers import Deployment, RedisServer, Server, Worker, _psql

    redis = RedisServer(home).start()
    deployment = Deployment.create(
        home,
        fake_url,
        redis_url=redis.url,
        extra_env={
            "BALLET_SEARCH_EMBEDDING_BACKEND": "tracker.search.embeddings.HashingBackend",
            "BALLET_LIMIT_RUNNING_TURNS_PER_USER": "1000",  # every agent is a user of its own anyway
            "BALLET_LIMIT_RUNNING_TURNS_PER_PROJECT": str(args.project_turns),
        },
    )
    # Every lock wait past deadlock_timeout (1 s) in PostgreSQL's log, with the statements.
    _psql(f'ALTER DATABASE "{deployment.database}" SET log_lock_waits = on')
    worker = Worker(deployment, home)
    servers = {name: Server(deployment, log=home / f"daphne-{name}.log") for name in "AB"}
    worker.start()
    for server in servers.values():
        server.start(wait=False)
    for server in servers.values():
        server.wait_ready()
    return Cluster(redis, deployment, worker, servers)


def teardown(cluster: Cluster) -> None:
    for server in cluster.servers.values():
        server.stop()
    cluster.worker.stop()
    cluster.redis.stop()
    cluster.deployment.drop()


PEOPLE = """
import json
from django.contrib.auth.models import User
from tracker.models import Membership, Project, Role
from tracker.services.keys import key_create
project = Project.objects.get(key="{project}")
keys, humans = [], []
for n in range({agents}):
    user, _ = User.objects.get_or_create(username=f"soak-agent-{{n}}")
    Membership.objects.get_or_create(project=project, user=user, defaults={{"role": Role.MEMBER}})
    keys.append(key_create(user=user, name="soak", scopes=["read", "ask", "work"])[1])
for n in range({humans}):
    user, _ = User.objects.get_or_create(username=f"soak-human-{{n}}")
    user.set_password("{password}")
    user.save()
    Membership.objects.get_or_create(project=project, user=user, defaults={{"role": Role.MAINTAINER}})
    humans.append(user.username)
print(json.dumps([keys, humans]))
"""


def people(deployment: Deployment, args: argparse.Namespace) -> tuple[list[str], list[str]]:
    from tests.fakes.servers import PASSWORD

    code = PEOPLE.format(project=PROJECT, agents=args.agents, humans=args.humans, password=PASSWORD)
    keys, humans = json.loads(deployment.manage("shell", "-c", code).strip().splitlines()[-1])
    return keys, humans


# --- the agents' two surfaces -----------------------------------------------------------------


class Rest:
    """An agent's calls over REST, each counted with its status and latency."""

    surface = "rest"

    def __init__(self, figures: Figures, base_url: str, key: str) -> None:
        import httpx2

        self.figures = figures
        self.http = httpx2.AsyncClient(
            base_url=f"{base_url}/api/v1/projects/{PROJECT}/",
            headers={"Authorization": f"Bearer {key}"},
            timeout=CALL_TIMEOUT,
        )

    async def close(self) -> None:
        await self.http.aclose()

    async def call(self, op: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return await rest_call(self.http, self.figures, op, method, path, body=body)

    async def runnable(self) -> list[str]:
        status, body = await self.call("runnable", "GET", "runnable/")
        return [row["key"] for row in body["results"]] if status == 200 else []

    async def brief(self, key: str) -> None:
        await self.call("brief", "GET", f"items/{key}/brief/")

    async def claim(self, key: str) -> int | None:
        status, body = await self.call("claim", "POST", f"items/{key}/claim/", {})
        return int(body["id"]) if status == 201 else None

    async def heartbeat(self, claim: int) -> None:
        await self.call("heartbeat", "POST", f"claims/{claim}/", {})

    async def report(self, claim: int, kind: str) -> None:
        body = {
            "kind": kind,
            "summary": f"{kind.title()}: soak report.",
            "links": ["https://example.com/pr/1"],
        }
        await self.call(f"report {kind}", "POST", f"claims/{claim}/reports/", body)

    async def release(self, claim: int) -> None:
        await self.call("release", "POST", f"claims/{claim}/release/", {"reason": "soak: letting it go"})

    async def ask(self, text: str, item: str | None, wait: int) -> str | None:
        status, body = await self.call("ask", "POST", "questions/", {"text": text, "item": item})
        if status not in (200, 201):
            return None
        if body["status"] == "open":
            status, body = await self.call("question wait", "GET", f"questions/{body['id']}/?wait={wait}")
        return str(body["status"]) if status in (200, 201) else None  # 201: answered at once (reused)

    async def questions(self) -> None:
        await self.call("questions", "GET", "questions/")


class Mcp:
    """An agent's calls over MCP, on one session kept open (opened again after a failure); or,
    ``per_call``, each call on a session of its own, opened and closed around it."""

    surface = "mcp"

    def __init__(self, figures: Figures, base_url: str, key: str, *, per_call: bool = False) -> None:
        self.figures = figures
        self.url = f"{base_url}/mcp"
        self.key = key
        self.per_call = per_call
        self.stack: contextlib.AsyncExitStack | None = None
        self.session: ClientSession | None = None
        self.last_question: int | None = None

    async def _open(self) -> ClientSession:
        import httpx2
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        stack = contextlib.AsyncExitStack()
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.key}"}, timeout=CALL_TIMEOUT)
        )
        read, write = await stack.enter_async_context(streamable_http_client(self.url, http_client=http))
        session = await stack.enter_async_context(ClientSession(read, write))
        self.stack = stack
        await asyncio.wait_for(session.initialize(), CALL_TIMEOUT)
        self.session = session
        return session

    async def _once(self, name: str, arguments: dict[str, Any], read_seconds: float) -> Any:
        """One call on a session of its own: what failed inside comes out of the transport's
        task group (an ``ExceptionGroup``), as a client written this way meets it."""
        import httpx2
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.key}"}, timeout=CALL_TIMEOUT) as http,
            streamable_http_client(self.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await asyncio.wait_for(session.initialize(), CALL_TIMEOUT)
            return await session.call_tool(name, arguments, read_timeout_seconds=read_seconds)

    async def close(self) -> BaseException | None:
        """Close the session; what closing it raised (the transport's task group), if anything."""
        stack, self.stack, self.session = self.stack, None, None
        if stack is None:
            return None
        try:
            await stack.aclose()
        except BaseException as exc:  # counted, not hidden: the caller records it
            return exc
        return None

    async def tool(
        self, op: str, name: str, arguments: dict[str, Any], wait: float = 0
    ) -> dict[str, Any] | None:
        """The tool's JSON, or None after a refusal (counted by its code) or a failure (by type)."""
        started = time.monotonic()
        try:
            if self.per_call:
                result = await self._once(name, {"project": PROJECT, **arguments}, wait + CALL_TIMEOUT)
            else:
                session = self.session or await self._open()
                result = await session.call_tool(
                    name, {"project": PROJECT, **arguments}, read_timeout_seconds=wait + CALL_TIMEOUT
                )
        except Exception as exc:
            if refused_code(exc) == "rate_limited":  # a refusal sent as an error: the session stands
                self.figures.add("mcp", op, "refused:rate_limited", time.monotonic() - started, str(exc))
                await asyncio.sleep(RATE_LIMITED_PAUSE)  # "try again in a few seconds"
                return None
            self.figures.failed("mcp", op, exc, time.monotonic() - started)
            closing = await self.close()  # the transport's task group may say more: counted apart
            if closing is not None:
                self.figures.failed("mcp", "session close", closing, 0.0)
            return None
        seconds = time.monotonic() - started
        body: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
        if result.is_error:
            error: dict[str, Any] = body["error"] if isinstance(body.get("error"), dict) else body
            self.figures.add(
                "mcp", op, f"tool:{error.get('code', '?')}", seconds, str(error.get("message", ""))
            )
            return None
        self.figures.add("mcp", op, "ok", seconds)
        return body

    async def runnable(self) -> list[str]:
        body = await self.tool("runnable", "list_runnable", {})
        return [row["key"] for row in body["results"]] if body else []

    async def brief(self, key: str) -> None:
        await self.tool("brief", "get_brief", {"item": key})

    async def claim(self, key: str) -> int | None:
        body = await self.tool("claim", "claim_ticket", {"item": key})
        return int(body["id"]) if body else None

    async def heartbeat(self, claim: int) -> None:
        await self.report(claim, "progress")  # MCP has no heartbeat: a progress report renews

    async def report(self, claim: int, kind: str) -> None:
        arguments = {"claim": claim, "kind": kind, "summary": f"{kind.title()}: soak report."}
        await self.tool(f"report {kind}", "report", arguments)

    async def release(self, claim: int) -> None:
        await self.tool("release", "release_claim", {"claim": claim, "reason": "soak: letting it go"})

    async def ask(self, text: str, item: str | None, wait: int) -> str | None:
        arguments: dict[str, Any] = {"text": text, "wait_seconds": wait} | ({"item": item} if item else {})
        body = await self.tool("ask", "ask_question", arguments, wait)
        if body is not None:
            self.last_question = int(body["id"])
        if body is not None and body["status"] == "open":
            body = await self.tool(
                "question wait", "get_question", {"id": body["id"], "wait_seconds": wait}, wait
            )
        return str(body["status"]) if body else None

    async def questions(self) -> None:
        """MCP lists no questions: the agent reads its last one again (or the plan, before any)."""
        if self.last_question is None:
            await self.tool("items", "list_items", {"limit": 20})
        else:
            await self.tool("question get", "get_question", {"id": self.last_question})


Surface = Rest | Mcp


# --- an agent's day ---------------------------------------------------------------------------


async def agent_loop(index: int, surface: Surface, figures: Figures, deadline: float) -> None:
    """Claim, brief, maybe ask, heartbeats and progress, then end the claim; again until the deadline."""
    rng = random.Random(index)
    await asyncio.sleep(rng.uniform(0, 10))  # the agents start over ten seconds
    asked = 0
    while time.monotonic() < deadline:
        keys = await surface.runnable()
        if not keys:
            figures.note("runnable list empty")
            await asyncio.sleep(rng.uniform(1, 3))
            continue
        key = rng.choice(keys)
        claim = await surface.claim(key)
        if claim is None:
            figures.note("claims lost")
            await asyncio.sleep(rng.uniform(0.2, 1.0))
            continue
        figures.note("claims won")
        await surface.brief(key)
        if rng.random() < 0.35:
            asked += 1
            await ask(surface, figures, rng, key=key, own=f"agent {index}, question {asked}")
        for _ in range(rng.randint(1, 3)):
            await asyncio.sleep(rng.uniform(1, 4))
            if rng.random() < 0.5:
                await surface.heartbeat(claim)
            else:
                await surface.report(claim, "progress")
        await asyncio.sleep(rng.uniform(0.5, 2))
        end = rng.choices(["done", "blocked", "failed", "release"], [60, 10, 10, 20])[0]
        if end == "release":
            await surface.release(claim)
        else:
            await surface.report(claim, end)
        figures.note(f"ended {end}")
        if rng.random() < 0.2:
            await surface.questions()
        await asyncio.sleep(rng.uniform(0.5, 2))


async def ask(surface: Surface, figures: Figures, rng: random.Random, *, key: str, own: str) -> None:
    """A question about the ticket or the project, shared with other agents or its own; its outcome."""
    shared = rng.random() < 0.4
    text = rng.choice(SHARED_TEXTS) if shared else f"What does the ticket mean by done? ({own})"
    item = key if rng.random() < 0.6 else None
    status = await surface.ask(text, item, rng.randint(5, 20))
    figures.note(f"questions {status or 'refused'}")


# --- the run ----------------------------------------------------------------------------------


async def sample_minutes(
    cluster: Cluster, figures: Figures, logs: dict[str, LogWatch], deadline: float, started: float
) -> None:
    figures.memory.sample(0.0, cluster.pids())
    minute = 0
    while time.monotonic() < deadline + 1:
        await asyncio.sleep(max(0.0, started + 60 * (minute + 1) - time.monotonic()))
        minute += 1
        window = figures.close_minute()
        memory = figures.memory.sample((time.monotonic() - started) / 60, cluster.pids())
        found = {name: watch.read() for name, watch in logs.items()}
        print_minute(minute, window, memory, found, details=minute % 5 == 0)
        sys.stdout.flush()


async def load(cluster: Cluster, keys: list[str], humans: list[Human], figures: Figures, args: Any) -> None:
    started = time.monotonic()
    deadline = started + args.minutes * 60
    urls = [cluster.servers["A"].url, cluster.servers["B"].url]
    per_call = args.mcp_sessions == "per-call"
    surfaces: list[Surface] = [
        Rest(figures, urls[(n // 2) % 2], key)
        if n % 2 == 0
        else Mcp(figures, urls[(n // 2) % 2], key, per_call=per_call)
        for n, key in enumerate(keys)
    ]
    logs = {
        name: LogWatch(path, from_end=True)
        for name, path in {
            "daphne A": cluster.servers["A"].log,
            "daphne B": cluster.servers["B"].log,
            "worker": cluster.worker.log,
        }.items()
        if path is not None
    }
    pg = Path(args.pg_log)
    pg_log = LogWatch(pg, from_end=True) if os.access(pg, os.R_OK) else None
    if pg_log is not None:
        logs["postgresql"] = pg_log
    tasks = [agent_loop(n, s, figures, deadline) for n, s in enumerate(surfaces)]
    tasks += [human_loop(h, figures, deadline) for h in humans]
    tasks.append(keeper_loop(humans[0], humans[1], figures, deadline, args.runnable))
    sampler = asyncio.create_task(sample_minutes(cluster, figures, logs, deadline, started))
    try:
        await asyncio.gather(*tasks)
        await sampler
    finally:
        sampler.cancel()
        for surface in surfaces:
            await surface.close()
        for human in humans:
            await human.close()
    for watch in logs.values():
        watch.read()
    print_final(
        figures, (time.monotonic() - started) / 60, {k: v for k, v in logs.items() if v is not pg_log}, pg_log
    )


def main() -> None:
    if len(sys.argv) == 2 and sys.argv[1] == "--serve-fake":
        serve(respond)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--agents", type=int, default=30)
    parser.add_argument("--humans", type=int, default=3)
    parser.add_argument("--runnable", type=int, default=40, help="runnable tickets the humans keep at least")
    parser.add_argument("--project-turns", type=int, default=10, help="running turns per project")
    parser.add_argument(
        "--mcp-sessions",
        choices=["per-agent", "per-call"],
        default="per-agent",
        help="an MCP agent keeps one session, or opens one for each call",
    )
    parser.add_argument("--pg-log", default="/var/log/postgresql/postgresql-15-main.log")
    parser.add_argument("--keep", type=Path, default=None, help="keep the processes' logs in this folder")
    args = parser.parse_args()
    if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")) or args.humans < 2:
        print("the soak needs the production mode (DATABASE_URL, REDIS_URL) and two humans", file=sys.stderr)
        raise SystemExit(2)
    raise_fd_limit()
    for name in ("mcp", "httpx2", "httpcore2"):  # failures are counted, with their tracebacks
        logging.getLogger(name).setLevel(logging.CRITICAL)
    home = args.keep or Path(tempfile.mkdtemp(prefix="ballet-soak-"))
    home.mkdir(parents=True, exist_ok=True)
    fake = FakeProcess(__file__, "--serve-fake")
    cluster = None
    try:
        began = time.monotonic()
        cluster = build(home, fake.base_url, args)
        keys, names = people(cluster.deployment, args)
        urls = [cluster.servers["A"].url, cluster.servers["B"].url]
        humans = [Human.login(name, urls[n % 2], PROJECT) for n, name in enumerate(names)]
        print(
            f"soak · {args.agents} agents (REST and MCP), {args.humans} humans, two daphnes, "
            f"{args.minutes:g} minutes · deployment up in {time.monotonic() - began:.0f} s; logs in {home}"
        )
        asyncio.run(load(cluster, keys, humans, Figures(), args))
    finally:
        if cluster is not None:
            teardown(cluster)
        fake.stop()
        if args.keep is None:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
