"""What Ballet adds to an agent turn over the bare SDK, end to end, and how it grows with the session.

The workload of docs/benchmarks.md: model call → three tool calls → model call → a 20-delta streamed answer.
A fake Messages API runs in a process of its own (this script, started again with ``--serve-fake``)
and answers every request by its last message: tool results get the 20-delta answer, anything else
three tool calls (``list_runnable``, ``get_item``, ``list_items`` on the demo project).

* **Ballet**: one real daphne process (``tests/fakes/servers.py``: its own database, the demo users;
  in production mode PostgreSQL and Redis). A client logged in through the login form sends the
  message over the chat's WebSocket and times the turn until its ``turn_ended`` frame.
* **Bare SDK**: in this process, a hand-written loop on ``AsyncAnthropic`` (aiohttp transport, the
  raw events of ``messages.create(stream=True)``) against the same fake, with the same system prompt,
  tools and tool results as Ballet's requests (copied from the first turn's requests), keeping its
  own history as Ballet keeps the session's.

The two run interleaved, round by round (their order alternating), so both see the same machine.

1. **Overhead**: ``--rounds`` rounds, a fresh session (and a fresh bare history) every 10 turns;
   median and p90 of (Ballet - bare) per round.
2. **Growth**: one ``--growth``-turn session on each side; turns 41-50 against turns 1-10 of
   Ballet and of the bare loop (whose growth is the fake's and the SDK's own work on the longer
   requests), and what Ballet grows beyond it.

    .venv/bin/python bench/turn_overhead.py                       # SQLite, in-memory channel layer
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/turn_overhead.py                   # PostgreSQL and Redis
    .venv/bin/python bench/turn_overhead.py --py-spy .venv/bin/py-spy --log-dir /tmp/turns
                                                                  # and profile daphne meanwhile

Targets: overhead median ≤ +10 ms embedded, ≤ +15 ms production; turns 41-50 at most
5 ms slower than turns 1-10 beyond the bare loop's own growth.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websockets
from _ws import api, api_token, login_cookie, percentile, raise_fd_limit

ANSWER_DELTAS = 20
TOOL_CALLS = (
    ("list_runnable", {}),
    ("get_item", {"key": "DEMO-1"}),
    ("list_items", {"limit": 20}),
)
SESSION_TURNS = 10
DUMPED = 2  # requests the fake keeps: the first turn's two (tools, then tool results)


# --- the fake, in its own process ------------------------------------------------------------


def serve_fake(dump_dir: Path) -> None:
    """Run the fake Messages API until stdin closes; print its base URL first."""
    from tests.fakes.messages_api import FakeMessagesAPI, TextReply, ToolCallSpec, ToolUseReply

    answer = TextReply(" ".join(f"word{i}" for i in range(ANSWER_DELTAS)), chunks=ANSWER_DELTAS)
    dumped = [0]

    def respond(body: dict[str, Any]) -> Any:
        if dumped[0] < DUMPED:
            (dump_dir / f"{dumped[0]}.json").write_text(json.dumps(body))
            dumped[0] += 1
        content = body["messages"][-1]["content"]
        if isinstance(content, list) and any(block.get("type") == "tool_result" for block in content):
            return answer
        return ToolUseReply([ToolCallSpec(name, args) for name, args in TOOL_CALLS])

    fake = FakeMessagesAPI(responder=respond)
    print(fake.base_url, flush=True)
    try:
        sys.stdin.read()  # the bench closes it (or dies)
    finally:
        fake.close()


class FakeProcess:
    def __init__(self, dump_dir: Path) -> None:
        self.dump_dir = dump_dir
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve-fake", str(dump_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError("the fake Messages API did not start")

    def dumped(self, index: int) -> dict[str, Any]:
        result: dict[str, Any] = json.loads((self.dump_dir / f"{index}.json").read_text())
        return result

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)


# --- the bare SDK loop -----------------------------------------------------------------------


@dataclass
class BareLoop:
    """The hand-written agent loop on the bare SDK: what Ballet is measured against."""

    base_url: str
    system: Any
    tools: list[dict[str, Any]]
    results: list[str]
    model: str
    max_tokens: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    client: Any = None

    async def start(self) -> None:
        import anthropic

        self.client = anthropic.AsyncAnthropic(
            api_key="sk-fake", base_url=self.base_url, http_client=anthropic.DefaultAioHttpClient()
        )

    def new_session(self) -> None:
        self.messages = []

    async def turn(self, text: str) -> float:
        started = time.perf_counter()
        self.messages.append({"role": "user", "content": text})
        for _ in range(10):
            content, stop_reason = await self._call()
            self.messages.append({"role": "assistant", "content": content})
            if stop_reason != "tool_use":
                break
            calls = [block for block in content if block["type"] == "tool_use"]
            self.messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": call["id"], "content": self.results[i]}
                        for i, call in enumerate(calls)
                    ],
                }
            )
        return (time.perf_counter() - started) * 1000

    async def _call(self) -> tuple[list[dict[str, Any]], str]:
        blocks: list[dict[str, Any]] = []
        partial: list[str] = []
        stop_reason = ""
        stream = await self.client.messages.create(
            model=self.model,
            system=self.system,
            messages=self.messages,
            tools=self.tools,
            max_tokens=self.max_tokens,
            stream=True,
        )
        async for event in stream:
            if event.type == "content_block_start":
                blocks.append(event.content_block.model_dump(exclude_none=True))
                partial = []
            elif event.type == "content_block_delta":
                if event.delta.type == "text_delta":
                    blocks[-1]["text"] += event.delta.text
                elif event.delta.type == "input_json_delta":
                    partial.append(event.delta.partial_json)
            elif event.type == "content_block_stop" and blocks[-1]["type"] == "tool_use":
                blocks[-1]["input"] = json.loads("".join(partial) or "{}")
            elif event.type == "message_delta":
                stop_reason = event.delta.stop_reason or ""
        return blocks, stop_reason


# --- Ballet over its WebSocket ---------------------------------------------------------------


class BalletChat:
    def __init__(self, base_url: str, cookie: str, token: str) -> None:
        self.base_url = base_url
        self.cookie = cookie
        self.token = token
        self.ws: websockets.ClientConnection | None = None

    async def new_session(self) -> None:
        await self.close()
        session = api(
            self.base_url, "POST", "/api/v1/planner/sessions/", {"project": "DEMO"}, token=self.token
        )
        url = self.base_url.replace("http://", "ws://") + f"/ws/planner/sessions/{session['id']}/"
        self.ws = await websockets.connect(
            url,
            origin=websockets.Origin(self.base_url),
            additional_headers={"Cookie": self.cookie},
            ping_interval=None,
            max_size=None,
        )
        first = json.loads(await self.ws.recv())
        if first.get("type") != "state":
            raise RuntimeError(f"expected a state frame first, got {first}")

    async def turn(self, text: str) -> float:
        assert self.ws is not None
        started = time.perf_counter()
        await self.ws.send(json.dumps({"type": "message", "text": text}))
        async with asyncio.timeout(60):
            async for raw in self.ws:
                frame = json.loads(raw)
                if frame["type"] == "turn_ended":
                    if frame["reason"] != "completed":
                        raise RuntimeError(f"a Ballet turn ended {frame}")
                    return (time.perf_counter() - started) * 1000
                if frame["type"] == "error":
                    raise RuntimeError(f"Ballet answered an error frame: {frame}")
        raise RuntimeError("the WebSocket closed mid-turn")

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None


# --- the measurement -------------------------------------------------------------------------


@dataclass
class Pair:
    ballet_ms: float
    bare_ms: float

    @property
    def overhead_ms(self) -> float:
        return self.ballet_ms - self.bare_ms


async def paired_turns(ballet: BalletChat, bare: BareLoop, turns: int, *, fresh_every: int) -> list[Pair]:
    pairs = []
    for n in range(turns):
        if n % fresh_every == 0:
            await ballet.new_session()
            bare.new_session()
        text = f"What should we do next? ({n})"
        if n % 2:
            bare_ms = await bare.turn(text)
            ballet_ms = await ballet.turn(text)
        else:
            ballet_ms = await ballet.turn(text)
            bare_ms = await bare.turn(text)
        pairs.append(Pair(ballet_ms=ballet_ms, bare_ms=bare_ms))
    return pairs


def bare_from(fake: FakeProcess) -> BareLoop:
    """A bare loop sending what Ballet sends: its system prompt, tools and tool results."""
    first, second = fake.dumped(0), fake.dumped(1)
    results = [
        block["content"] for block in second["messages"][-1]["content"] if block.get("type") == "tool_result"
    ]
    if len(results) != len(TOOL_CALLS):
        raise RuntimeError(f"Ballet's first turn sent {len(results)} tool results")
    return BareLoop(
        base_url=fake.base_url,
        system=first["system"],
        tools=first["tools"],
        results=results,
        model=first["model"],
        max_tokens=first["max_tokens"],
    )


async def measure(
    server_url: str, cookie: str, token: str, fake: FakeProcess, args: argparse.Namespace
) -> None:
    ballet = BalletChat(server_url, cookie, token)
    await ballet.new_session()
    for n in range(3):  # warm-up: first-use costs stay out of the figures (and the requests get dumped)
        await ballet.turn(f"warm up {n}")
    bare = bare_from(fake)
    await bare.start()
    await paired_turns(ballet, bare, 6, fresh_every=3)

    profile = start_profile(args, "turns") if args.py_spy else None
    overhead = await paired_turns(ballet, bare, args.rounds, fresh_every=SESSION_TURNS)
    growth = await paired_turns(ballet, bare, args.growth, fresh_every=args.growth)
    if profile is not None:
        stop_profile(profile)
    await ballet.close()
    await bare.client.close()
    report(args, overhead, growth)


def start_profile(args: argparse.Namespace, name: str) -> subprocess.Popen[bytes]:
    out = args.log_dir / f"daphne-{name}.pyspy.txt"
    print(f"  (profiling daphne into {out})")
    return subprocess.Popen(
        [args.py_spy, "record", "--nonblocking", "-f", "raw", "-r", "500", "-o", str(out), "-p", args.pid],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop_profile(spy: subprocess.Popen[bytes]) -> None:
    spy.send_signal(signal.SIGINT)
    spy.wait(timeout=30)


def _figures(values: list[float]) -> str:
    return f"median {statistics.median(values):+.1f} ms, p90 {percentile(values, 0.9):+.1f} ms"


def report(args: argparse.Namespace, overhead: list[Pair], growth: list[Pair]) -> None:
    print(f"turn overhead · {args.mode} · end to end over the WebSocket vs the bare SDK, interleaved")
    print(
        f"  {len(overhead)} rounds (a fresh session every {SESSION_TURNS}): Ballet - bare "
        f"{_figures([p.overhead_ms for p in overhead])}  [target median ≤ {args.target:g} ms]"
    )
    print(
        f"    Ballet turn median {statistics.median(p.ballet_ms for p in overhead):.1f} ms, "
        f"bare SDK turn median {statistics.median(p.bare_ms for p in overhead):.1f} ms"
    )
    if len(growth) < 50:
        return
    early, late = growth[:10], growth[40:50]

    def grew(side: Callable[[Pair], float]) -> float:
        return statistics.median(side(p) for p in late) - statistics.median(side(p) for p in early)

    ballet_grew, bare_grew = grew(lambda p: p.ballet_ms), grew(lambda p: p.bare_ms)
    print(f"  one {len(growth)}-turn session: turns 41-50 vs 1-10 (medians)")
    print(
        f"    Ballet {ballet_grew:+.1f} ms, bare SDK {bare_grew:+.1f} ms (the fake's and the SDK's own "
        f"work on the longer requests): Ballet beyond it {ballet_grew - bare_grew:+.1f} ms  [target ≤ +5 ms]"
    )
    print(
        f"    overhead turns 1-10 {_figures([p.overhead_ms for p in early])}; "
        f"turns 41-50 {_figures([p.overhead_ms for p in late])}"
    )


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve-fake":
        serve_fake(Path(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60, help="paired turns, a fresh session every 10")
    parser.add_argument("--growth", type=int, default=50, help="turns of the one long session (0: skip)")
    parser.add_argument("--log-dir", type=Path, default=None, help="keep daphne's log (and profile) here")
    parser.add_argument("--py-spy", default=None, help="a py-spy binary: profile daphne while the turns run")
    args = parser.parse_args()
    from tests.fakes.servers import PASSWORD, production_mode, served

    raise_fd_limit()
    args.mode = "postgresql + redis" if production_mode() else "sqlite + in-memory layer"
    args.target = 15 if production_mode() else 10
    tmp = Path(tempfile.mkdtemp(prefix="ballet-turn-bench-"))
    args.log_dir = args.log_dir or tmp
    args.log_dir.mkdir(parents=True, exist_ok=True)
    (tmp / "dump").mkdir()
    fake = FakeProcess(tmp / "dump")
    many = "100000"
    unlimited = {
        "BALLET_LIMIT_MESSAGES_PER_MINUTE": many,
        "BALLET_LIMIT_RUNNING_TURNS_PER_USER": many,
        "BALLET_LIMIT_RUNNING_TURNS_PER_PROJECT": many,
        "BALLET_LIMIT_FRAMES_PER_SECOND": many,  # turns back to back outpace a human
    }
    try:
        with served(
            tmp,
            fake.base_url,
            extra_env=unlimited,
            redis_url=os.environ.get("REDIS_URL"),
            log=args.log_dir / "daphne.log",
        ) as server:
            assert server.process is not None
            args.pid = str(server.process.pid)
            cookie = login_cookie(server.url, "demo", PASSWORD)
            token = api_token(server.url, "demo", PASSWORD)
            asyncio.run(measure(server.url, cookie, token, fake, args))
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
