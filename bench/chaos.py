"""Chaos run: planner turns while daphnes die, Redis restarts and PostgreSQL connections drop.

A production deployment as in ``tests/e2e/test_faults.py``: two daphnes A and B, a
Celery worker with its beat (the sweep that recovers dead turns), a fresh PostgreSQL
database and a Redis server of the run's own. ``--sessions`` sessions take turns,
``--turns`` in all, each sent over REST to A or B at random; the fake model answers
each turn with streamed text, or with tool calls (``list_items``, ``get_item``) and
then text. Every session has a WebSocket watcher on each daphne that reconnects like
the chat page (on a close: a short backoff, the transcript over REST, a new socket).

While turns run, faults come at random every few seconds: SIGKILL of A or B (started
again 0.5 to 2 s later), a Redis restart (down 1 to 3 s), or all of the deployment's
PostgreSQL connections terminated. After each turn settles (the session no longer
``running`` over REST), each of its watchers must show the session's state within
``--grace`` seconds. At the end every request the fake model received is checked as
the Messages API would (``history_problems``).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet_chaos REDIS_URL=redis://127.0.0.1:6379/13 \
        .venv/bin/python bench/chaos.py --turns 100 --seed 1

Figures: turns completed, turns recovered (ended ``failed`` by recovery), other ends,
faults by kind, watchers left showing the wrong state (must be 0), invalid histories
sent to the model (must be 0). Production mode only.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from tests.fakes.client import Client
    from tests.fakes.messages_api import FakeMessagesAPI, Reply
    from tests.fakes.servers import Deployment, RedisServer, Server, Worker
    from tests.fakes.watchers import Watcher

TOKEN = re.compile(r"\[chaos s(\d+) t(\d+)\]")
RECOVERED = "The process running this turn stopped"  # the recovery's error (sessions/recovery.py)
SETTLE_SECONDS = 150  # a turn (recovery included) settles within this, or it counts as stuck
RECONNECT_SECONDS = 90  # a watcher whose daphne was killed is connected again within this


# -- the model's script ----------------------------------------------------------------------------------


class Model:
    """Answers each turn by its plan: the n-th call after the turn's human message gets its n-th reply.

    The turn is named by the last ``[chaos sS tT]`` token of the request's last human text, so
    replies never depend on the order in which concurrent turns reach the fake.
    """

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.plans: dict[tuple[int, int], list[Reply]] = {}
        self.lock = threading.Lock()

    def plan(self, session: int, turn: int) -> str:
        from tests.fakes.messages_api import TextReply, ToolCallSpec, ToolUseReply

        rng = self.random
        words = [f"s{session}t{turn}w{i} " for i in range(rng.randint(15, 35))]
        final = TextReply(chunks=words, delay_between_deltas=rng.uniform(0.05, 0.12))
        replies: list[Reply] = [final]
        if rng.random() < 0.5:
            calls = [ToolCallSpec("list_items", {"limit": 3}, json_chunks=2)]
            if rng.random() < 0.5:
                calls.append(ToolCallSpec("get_item", {"key": "DEMO-1"}, json_chunks=2))
            replies.insert(0, ToolUseReply(calls, text_before="Let me look. ", delay_between_deltas=0.05))
        with self.lock:
            self.plans[(session, turn)] = replies
        return f"[chaos s{session} t{turn}]"

    def __call__(self, request: dict[str, Any]) -> Reply | None:
        from tests.fakes.messages_api import TextReply, message_text

        messages = request.get("messages") or []
        calls_since = 0
        for message in reversed(messages):
            if message.get("role") == "assistant":
                calls_since += 1
                continue
            tokens = TOKEN.findall(message_text(message))
            if tokens:
                with self.lock:
                    replies = self.plans.get((int(tokens[-1][0]), int(tokens[-1][1])))
                if replies:
                    return replies[min(calls_since, len(replies) - 1)]
        return TextReply("(a request of no planned turn)")


# -- the deployment ---------------------------------------------------------------------------------------


@dataclass
class Cluster:
    fake: FakeMessagesAPI
    redis: RedisServer
    deployment: Deployment
    worker: Worker
    servers: dict[str, Server]
    clients: dict[str, Client] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)  # one fault at a time

    def up(self) -> list[str]:
        return [name for name, server in self.servers.items() if server.running]


@dataclass
class Figures:
    turns: int = 0
    ends: Counter[str] = field(default_factory=Counter)
    other_ends: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    refused_sends: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, counter: str, key: str) -> None:
        with self.lock:
            getattr(self, counter)[key] += 1


# -- sessions taking turns -------------------------------------------------------------------------------


class Driver:
    """One session: its watchers on A and B, and its turns, one after another."""

    def __init__(self, index: int, cluster: Cluster, model: Model, figures: Figures, args: Any) -> None:
        from tests.fakes.watchers import Watcher

        self.index = index
        self.cluster = cluster
        self.model = model
        self.figures = figures
        self.args = args
        self.random = random.Random(args.seed * 1000 + index)
        client = cluster.clients["A"]
        self.session: str = client.post("/api/v1/planner/sessions/", {"project": "DEMO"})["id"]
        self.watchers: list[Watcher] = [
            Watcher(
                server.url,
                self.session,
                client.cookie,
                reconnect=True,
                resync=self._resync(name),
                name=f"s{index} on {name}",
                seed=args.seed * 1000 + index,
            ).start()
            for name, server in cluster.servers.items()
        ]
        self.running = False

    def _resync(self, name: str) -> Any:
        client = self.cluster.clients[name]

        def state() -> str:
            return str(client.transcript(self.session)["state"])  # the page reloads from its own server

        return state

    def run(self, turns: int, counter: Any) -> None:
        while counter.take():
            self.turn()

    def turn(self) -> None:
        number = self._start()
        if number is None:
            return
        body = self._settle()
        if body is None:
            self.figures.stuck.append(f"session {self.index} turn {number}")
            return
        ended = [e["data"] for e in body["events"] if e["kind"] == "turn_ended" and e["turn"] == number]
        reason = ended[-1]["reason"] if ended else "no turn_ended"
        error = (ended[-1].get("error") or "") if ended else ""
        if reason == "failed" and RECOVERED in error:
            reason = "recovered"
        self.figures.add("ends", reason)
        if reason not in ("completed", "recovered"):
            self.figures.add("other_ends", f"{reason}: {error[:90]}")
        self._check_watchers(body["state"], number)

    def _start(self) -> int | None:
        """Send the turn's message to A or B (whichever is up), again after a refusal; its number."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline:
            up = self.cluster.up()
            if not up:
                time.sleep(0.5)
                continue
            name = self.random.choice(up)
            client = self.cluster.clients[name]
            try:
                before = client.transcript(self.session)
            except (OSError, urllib.error.URLError):
                self.figures.add("refused_sends", "transcript unreachable")
                time.sleep(0.5)
                continue
            if before["state"] == "running":
                self._settle()
                continue
            number = before["turn_count"] + 1
            token = self.model.plan(self.index, number)
            status, body = _post(client, f"/api/v1/planner/sessions/{self.session}/messages/", token)
            if status == 202 and isinstance(body, dict) and body.get("meaning") == "started":
                self.running = True
                with self.figures.lock:
                    self.figures.turns += 1
                return int(body["turn"])
            self.figures.add("refused_sends", f"HTTP {status}")
            time.sleep(0.5)
        self.figures.stuck.append(f"session {self.index}: no turn could start")
        return None

    def _settle(self) -> dict[str, Any] | None:
        """The transcript once the session no longer runs (polled on whichever process is up)."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline:
            up = self.cluster.up()
            if up:
                try:
                    body = self.cluster.clients[self.random.choice(up)].transcript(self.session)
                except (OSError, urllib.error.URLError):
                    body = None
                if body is not None and body["state"] != "running":
                    self.running = False
                    return body
            time.sleep(0.3)
        return None

    def _check_watchers(self, state: str, number: int) -> None:
        """Each watcher, once connected (its daphne may be starting again), shows ``state``."""
        for watcher in self.watchers:
            try:
                watcher.wait_for(lambda w: w.open, RECONNECT_SECONDS, "a connection")
                watcher.wait_for(lambda w: w.view == state, self.args.grace, f"the view {state!r}")
            except AssertionError:
                self.figures.wrong.append(
                    f"{watcher.name} after turn {number}: shows {watcher.view!r}, the session is {state!r} "
                    f"(connections {watcher.connections}, closes {watcher.closes[-3:]})"
                )


def _post(client: Client, path: str, text: str) -> tuple[int, Any]:
    try:
        return client.request("POST", path, {"text": f"Carry on {text}"})
    except (OSError, urllib.error.URLError) as exc:  # the process died under the request
        return 0, str(exc)


class TurnCounter:
    def __init__(self, turns: int) -> None:
        self.left = turns
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.left <= 0:
                return False
            self.left -= 1
            return True


# -- faults ----------------------------------------------------------------------------------------------


def inject_faults(cluster: Cluster, drivers: list[Driver], figures: Figures, args: Any, done: Any) -> None:
    rng = random.Random(args.seed)
    while not done.wait(rng.uniform(args.fault_every * 0.5, args.fault_every * 1.5)):
        if not any(d.running for d in drivers):
            continue  # faults during turns
        kind = rng.choice(["kill A", "kill B", "redis restart", "drop db connections"])
        with cluster.lock:
            if kind.startswith("kill"):
                server = cluster.servers[kind[-1]]
                server.kill()
                time.sleep(rng.uniform(0.5, 2))
                server.start()
            elif kind == "redis restart":
                cluster.redis.stop()
                time.sleep(rng.uniform(1, 3))
                cluster.redis.start()
            else:
                cluster.deployment.drop_connections()
        figures.add("faults", kind)


# -- the run ---------------------------------------------------------------------------------------------


def invalid_histories(fake: FakeMessagesAPI) -> list[str]:
    from tests.fakes.messages_api import history_problems

    out = []
    for request in fake.requests:
        if not isinstance(request.json, dict):
            continue
        problems = history_problems(request.json.get("messages"))
        if problems:
            out.append(f"request {request.index}: {'; '.join(problems)}")
    return out


def build(home: Path, model: Model) -> Cluster:
    from tests.fakes.client import Client
    from tests.fakes.messages_api import FakeMessagesAPI
    from tests.fakes.servers import PASSWORD, Deployment, RedisServer, Server, Worker

    fake = FakeMessagesAPI(responder=model)
    redis = RedisServer(home).start()
    many = "1000"
    deployment = Deployment.create(
        home,
        fake.base_url,
        redis_url=redis.url,
        extra_env={
            "BALLET_SEARCH_EMBEDDING_BACKEND": "tracker.search.embeddings.HashingBackend",
            "BALLET_LIMIT_MESSAGES_PER_MINUTE": many,
            "BALLET_LIMIT_RUNNING_TURNS_PER_USER": many,
            "BALLET_LIMIT_RUNNING_TURNS_PER_PROJECT": many,
        },
    )
    worker = Worker(deployment, home)
    servers = {name: Server(deployment, log=home / f"daphne-{name}.log") for name in "AB"}
    cluster = Cluster(fake, redis, deployment, worker, servers)
    worker.start()
    for server in servers.values():
        server.start(wait=False)
    for name, server in servers.items():
        server.wait_ready()
        cluster.clients[name] = Client(server.url, "demo", PASSWORD)
    return cluster


def teardown(cluster: Cluster) -> None:
    for server in cluster.servers.values():
        server.stop()
    cluster.worker.stop()
    cluster.redis.stop()
    cluster.deployment.drop()
    cluster.fake.close()


def report(figures: Figures, cluster: Cluster, drivers: list[Driver], args: Any, seconds: float) -> None:
    invalid = invalid_histories(cluster.fake)
    print(
        f"chaos run · {figures.turns} turns · {args.sessions} sessions · seed {args.seed} · {seconds:.0f} s"
    )
    print(
        f"  turns completed: {figures.ends['completed']}, recovered (ended failed by recovery): "
        f"{figures.ends['recovered']}, other ends: "
        f"{dict((k, v) for k, v in figures.ends.items() if k not in ('completed', 'recovered')) or 0}"
    )
    for end, count in figures.other_ends.most_common():
        print(f"    {count}x {end}")
    print(f"  faults injected: {sum(figures.faults.values())} {dict(sorted(figures.faults.items()))}")
    print(f"  messages refused or lost in transit (sent again): {dict(figures.refused_sends) or 0}")
    print(f"  watchers left showing the wrong state: {len(figures.wrong)}  [must be 0]")
    for line in figures.wrong[:15]:
        print(f"    {line}")
    print(
        f"  invalid histories sent to the model: {len(invalid)} of {len(cluster.fake.requests)}  [must be 0]"
    )
    for line in invalid[:10]:
        print(f"    {line}")
    if figures.stuck:
        print(f"  turns that never settled within {SETTLE_SECONDS} s: {figures.stuck}")
    reconnects = sum(max(0, w.connections - 1) for d in drivers for w in d.watchers)
    print(f"  watcher reconnects: {reconnects}")
    if cluster.fake.responder_errors:
        print(f"  the fake's responder failed: {cluster.fake.responder_errors[:3]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--fault-every", type=float, default=6.0, help="mean seconds between faults")
    parser.add_argument("--grace", type=float, default=10.0, help="seconds a watcher has to show the state")
    parser.add_argument("--keep", type=Path, default=None, help="keep the processes' logs in this folder")
    args = parser.parse_args()
    if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        print("the chaos run needs the production mode: set DATABASE_URL and REDIS_URL", file=sys.stderr)
        raise SystemExit(2)
    home = args.keep or Path(tempfile.mkdtemp(prefix="ballet-chaos-"))
    home.mkdir(parents=True, exist_ok=True)
    model = Model(args.seed)
    started = time.monotonic()
    cluster = build(home, model)
    print(f"  (deployment up in {time.monotonic() - started:.0f} s; logs in {home})")
    figures = Figures()
    drivers: list[Driver] = []
    done = threading.Event()
    try:
        drivers = [Driver(i, cluster, model, figures, args) for i in range(args.sessions)]
        counter = TurnCounter(args.turns)
        began = time.monotonic()
        faults = threading.Thread(target=inject_faults, args=(cluster, drivers, figures, args, done))
        faults.start()
        threads = [threading.Thread(target=d.run, args=(args.turns, counter)) for d in drivers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        faults.join()
        report(figures, cluster, drivers, args, time.monotonic() - began)
    finally:
        done.set()
        for driver in drivers:
            for watcher in driver.watchers:
                watcher.close()
        teardown(cluster)
        if args.keep is None:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
