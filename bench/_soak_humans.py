"""The humans of ``bench/soak.py``: chats over REST and a WebSocket, and the one who keeps the plan going.

A human logs in as the chat page does (a session cookie for the WebSocket, a token for REST). Its
chat turns are sent over REST and over the socket in turn; a turn counts from the send to the
``turn_ended`` frame on the socket (reconnected if it closes). The keeper (the first human, with
the second applying what it proposes) keeps enough tickets runnable, moves tickets in review to
done, applies the chats' changesets and answers the questions left to humans, all over REST.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from _soak_figures import Figures, rest_call

if TYPE_CHECKING:
    import httpx2
    from websockets.asyncio.client import ClientConnection

TURN_BOUND = 120.0  # seconds a chat turn may take before it counts as stuck
KEEPER_EVERY = 5.0
MOST_AT_ONCE = 25  # operations in one of the keeper's changesets


@dataclass
class Human:
    name: str
    base_url: str
    project: str
    token: str
    cookie: str
    index: int = 0
    session: str | None = None
    socket: ClientConnection | None = None
    reader: asyncio.Task[None] | None = None
    ended: int = 0  # turn_ended frames seen on the socket
    errors: list[str] = field(default_factory=list)  # error frames' codes
    changed: asyncio.Event | None = None
    _http: httpx2.AsyncClient | None = None

    @classmethod
    def login(cls, name: str, base_url: str, project: str, index: int = 0) -> Human:
        from tests.fakes.client import Client
        from tests.fakes.servers import PASSWORD

        client = Client(base_url, name, PASSWORD)
        return cls(name, base_url, project, client.token, client.cookie, index)

    @property
    def http(self) -> httpx2.AsyncClient:
        import httpx2

        if self._http is None:
            auth = {"Authorization": f"Token {self.token}"}
            self._http = httpx2.AsyncClient(base_url=f"{self.base_url}/api/v1/", headers=auth, timeout=90.0)
        return self._http

    async def call(
        self, figures: Figures, op: str, method: str, path: str, body: Any = None
    ) -> tuple[int, Any]:
        """One REST call, counted as the human's ``op``."""
        return await rest_call(self.http, figures, f"human {op}", method, path, body=body)

    async def connect(self) -> None:
        """The chat's WebSocket, read in the background: ``turn_ended`` and ``error`` frames counted."""
        from websockets.asyncio.client import connect

        url = self.base_url.replace("http://", "ws://") + f"/ws/planner/sessions/{self.session}/"
        headers = {"Cookie": self.cookie, "Origin": self.base_url}
        self.socket = await connect(url, additional_headers=headers, open_timeout=30)
        self.changed = self.changed or asyncio.Event()
        self.reader = asyncio.create_task(self._read(self.socket))

    async def _read(self, socket: ClientConnection) -> None:
        assert self.changed is not None
        with contextlib.suppress(Exception):
            async for raw in socket:
                frame = json.loads(raw)
                if frame.get("type") == "turn_ended":
                    self.ended += 1
                    self.changed.set()
                elif frame.get("type") == "error":
                    self.errors.append(str(frame.get("code")))
                    self.changed.set()
        if self.socket is socket:
            self.socket = None
        self.changed.set()

    async def close(self) -> None:
        if self.socket is not None:
            await self.socket.close()
        if self.reader is not None:
            self.reader.cancel()
        if self._http is not None:
            await self._http.aclose()


async def human_loop(human: Human, figures: Figures, deadline: float) -> None:
    """A chat turn every 8 to 20 s, over REST and over the socket in turn, each watched to its end."""
    rng = random.Random(f"human {human.name}")
    status, body = await human.call(
        figures, "chat open", "POST", "planner/sessions/", {"project": human.project}
    )
    if status != 201:
        return
    human.session = body["id"]
    turn = 0
    while time.monotonic() < deadline:
        await asyncio.sleep(rng.uniform(8, 20))
        turn += 1
        text = f"How is the plan going? [soak {human.name} t{turn}]" + (
            " [soak propose]" if turn % 4 == 0 else ""
        )
        await chat_turn(human, figures, text, over="rest" if turn % 2 else "ws")


async def chat_turn(human: Human, figures: Figures, text: str, *, over: str) -> None:
    started = time.monotonic()
    if human.socket is None:
        try:
            await human.connect()
        except Exception as exc:
            figures.failed("ws", "connect", exc, time.monotonic() - started)
            return
    assert human.changed is not None
    assert human.socket is not None
    ended, errors = human.ended, len(human.errors)
    human.changed.clear()
    if over == "rest":
        path = f"planner/sessions/{human.session}/messages/"
        status, _ = await human.call(figures, "chat send", "POST", path, {"text": text})
        if status != 202:
            return
    else:
        await human.socket.send(json.dumps({"type": "message", "text": text}))
    outcome = "timeout"
    while time.monotonic() - started < TURN_BOUND:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(human.changed.wait(), TURN_BOUND)
        human.changed.clear()
        if human.ended > ended:
            outcome = "ok"
            break
        if len(human.errors) > errors:
            outcome = f"error:{human.errors[-1]}"
            break
        if human.socket is None:
            outcome = "closed"
            break
    figures.add("ws", f"chat turn via {over}", outcome, time.monotonic() - started, outcome)


async def keeper_loop(
    keeper: Human, applier: Human, figures: Figures, deadline: float, runnable: int
) -> None:
    """Every 5 s: enough runnable tickets, tickets in review done, the chats' changesets applied,
    the questions left to humans answered."""
    rng = random.Random("keeper")
    while time.monotonic() < deadline:
        await top_up(keeper, applier, figures, runnable)
        await review(keeper, applier, figures)
        status, body = await applier.call(
            figures, "changesets", "GET", f"projects/{keeper.project}/changesets/?status=proposed"
        )
        for changeset in body["results"] if status == 200 else []:
            await apply(applier, figures, changeset["number"], "chat changeset applied")
        await answer_left(keeper, figures, rng)
        await asyncio.sleep(KEEPER_EVERY)


async def top_up(keeper: Human, applier: Human, figures: Figures, runnable: int) -> None:
    status, body = await keeper.call(figures, "runnable", "GET", f"projects/{keeper.project}/runnable/")
    missing = min(MOST_AT_ONCE, runnable - int(body["count"])) if status == 200 else 0
    if missing <= 0:
        return
    stamp = time.strftime("%H:%M:%S")
    operations = [
        {
            "op": "create",
            "kind": "ticket",
            "fields": {
                "title": f"Soak ticket {stamp} #{n}",
                "state": "ready",
                "description": "Made by the soak's keeper so that agents always find work.",
                "acceptance_criteria": ["It is done when the agent says so."],
            },
        }
        for n in range(missing)
    ]
    number = await propose(keeper, figures, f"{missing} more tickets", operations)
    if number is not None:
        await apply(applier, figures, number, "tickets created", missing)


async def review(keeper: Human, applier: Human, figures: Figures) -> None:
    path = f"projects/{keeper.project}/items/?kind=ticket&state=in_review"
    status, body = await keeper.call(figures, "in review", "GET", path)
    rows = body["results"][:MOST_AT_ONCE] if status == 200 else []
    if not rows:
        return
    operations = [
        {"op": "update", "item": row["key"], "base_version": row["version"], "fields": {"state": "done"}}
        for row in rows
    ]
    number = await propose(keeper, figures, "Reviewed: done", operations)
    if number is not None:
        await apply(applier, figures, number, "tickets reviewed", len(rows))


async def propose(human: Human, figures: Figures, title: str, operations: list[dict[str, Any]]) -> int | None:
    body = {"title": title, "rationale": "The soak's keeper.", "operations": operations}
    status, created = await human.call(
        figures, "propose", "POST", f"projects/{human.project}/changesets/", body
    )
    return int(created["number"]) if status == 201 else None


async def apply(human: Human, figures: Figures, number: int, what: str, count: int = 1) -> bool:
    path = f"projects/{human.project}/changesets/{number}/apply/"
    status, _ = await human.call(figures, "apply", "POST", path, {"note": "soak"})
    if status == 200:
        figures.note(what, count)
    return status == 200


async def answer_left(human: Human, figures: Figures, rng: random.Random) -> None:
    path = f"projects/{human.project}/questions/?status=needs_human"
    status, body = await human.call(figures, "questions left", "GET", path)
    for question in body["results"] if status == 200 else []:
        answer = {"answer": f"A human's answer ({rng.randint(1, 10**6)}).", "one_off": rng.random() < 0.3}
        path = f"projects/{human.project}/questions/{question['id']}/answer/"
        status, _ = await human.call(figures, "answer", "POST", path, answer)
        if status == 200:
            figures.note("questions answered by humans")
