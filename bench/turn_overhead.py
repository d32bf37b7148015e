"""What Ballet adds to an agent turn over the bare SDK, end to end; how it grows with the session;
how many turns one daphne sustains; and all of it side by side with another commit.

The workload of docs/benchmarks.md: model call → three tool calls → model call → a 20-delta streamed answer.
A fake Messages API runs in a process of its own (``bench/_turns.py``) and answers every request by
its last message: tool results get the 20-delta answer, anything else three tool calls
(``list_runnable``, ``get_item``, ``list_items`` on the demo project).

* **Ballet**: one real daphne process (``tests/fakes/servers.py``: its own database, the demo users;
  in production mode PostgreSQL and Redis). A client logged in through the login form sends the
  message over the chat's WebSocket and times the turn until its ``turn_ended`` frame.
* **Ballet (REV)**, with ``--baseline REV``: the same from a git worktree of REV (``git worktree add
  --detach`` in a temporary directory, removed at the end; this checkout's ``.venv``): a second
  daphne on its own deployment (its own SQLite file; in production its own PostgreSQL database and a
  ``redis-server`` of its own, so the two channel layers never meet).
* **Bare SDK**: in this process, a hand-written loop on ``AsyncAnthropic`` (aiohttp transport, the
  raw events of ``messages.create(stream=True)``) against the same fake, with the same system prompt,
  tools and tool results as Ballet's requests (copied from the first turn's requests), keeping its
  own history as Ballet keeps the session's.

1. **Overhead**: ``--rounds`` rounds, a fresh session (and a fresh bare history) every 10 turns; each
   round runs one turn on every side, the order rotating round by round so all see the same machine;
   median and p90 of (Ballet - bare) per round, for each Ballet, and of their difference.
2. **Growth**: one ``--growth``-turn session per Ballet; turns 41-50 against turns 1-10. Here the
   bare client does not keep a history of its own: it *replays Ballet's own requests*. The fake
   records every request body while the session runs; after Ballet's turn n the bare client sends
   exactly those bodies, in order (Ballet's turn n, then its replay, always: a replay can only follow
   the turn it copies, and a fixed order costs nothing here since both sides are compared with
   themselves, turns 41-50 against 1-10). Whatever Ballet puts in its requests (long histories, or
   old tool results cleared), the replay sends the same, so the bare growth is the fake's and the
   SDK's own work on those very requests, and Ballet's growth beyond it is Ballet's.
3. **Capacity** (``--capacity N``): N sessions, each its own WebSocket client, turning at once
   through one daphne, ``--capacity-turns`` turns each back to back after two warm-up turns: turns
   per second sustained, p50/p99 of a turn (send → ``turn_ended``), the CPU share of daphne, of the
   fake and of this client process (the two others must not be the bottleneck), and the pauses over
   0.1 s in which no session heard a frame (a stall of the server or the fake, not of the turns).
   With ``--baseline`` the baseline's daphne is measured the same way right after (one daphne under
   load at a time), ``--capacity-repeats`` times in alternation.

    .venv/bin/python bench/turn_overhead.py                       # SQLite, in-memory channel layer
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/turn_overhead.py                   # PostgreSQL and Redis
    .venv/bin/python bench/turn_overhead.py --baseline HEAD~1     # and the commit before, side by side
    .venv/bin/python bench/turn_overhead.py --capacity 50 --rounds 0 --growth 0   # capacity alone
    .venv/bin/python bench/turn_overhead.py --py-spy .venv/bin/py-spy --log-dir /tmp/turns
                                                                  # and profile daphne meanwhile
                                                                  # (--gil: what holds the interpreter)

Targets: overhead median ≤ +10 ms embedded, ≤ +15 ms production; turns 41-50 at most
3 ms slower than turns 1-10 beyond a bare client replaying the same requests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _turns import TOOL_CALLS, BalletChat, BareLoop, FakeProcess, Silences, bare_from, serve_fake
from _ws import api_token, checkout, login_cookie, percentile, proc_cpu_seconds, raise_fd_limit

__all__ = ["TOOL_CALLS", "BalletChat", "BareLoop", "FakeProcess", "bare_from", "serve_fake"]

SESSION_TURNS = 10
GROWTH_TARGET = 3
BARE = "bare SDK"


@dataclass
class Side:
    """One Ballet under test: a daphne, its URL and the demo user's credentials."""

    name: str
    url: str
    cookie: str
    token: str
    pid: int

    def chat(self, silences: Silences | None = None) -> BalletChat:
        return BalletChat(self.url, self.cookie, self.token, silences)


# --- overhead and growth ---------------------------------------------------------------------


async def rounds(
    sides: list[Side], chats: list[BalletChat], bare: BareLoop, turns: int
) -> list[dict[str, float]]:
    """``turns`` rounds, one turn on every Ballet and on the bare loop, the order rotating."""
    results = []
    runners = [*((side.name, chat) for side, chat in zip(sides, chats, strict=True)), (BARE, None)]
    for n in range(turns):
        if n % SESSION_TURNS == 0:
            for chat in chats:
                await chat.new_session()
            bare.new_session()
        text = f"What should we do next? ({n})"
        shift = n % len(runners)
        times = {}
        for name, chat in runners[shift:] + runners[:shift]:
            times[name] = await (chat.turn(text) if chat is not None else bare.turn(text))
        results.append(times)
    return results


async def growth_session(
    sides: list[Side], chats: list[BalletChat], bare: BareLoop, fake: FakeProcess, turns: int
) -> dict[str, list[tuple[float, float]]]:
    """One ``turns``-turn session per Ballet: per turn (Ballet's time, the bare replay's time)."""
    for chat in chats:
        await chat.new_session()
    fake.start_recording()
    series: dict[str, list[tuple[float, float]]] = {side.name: [] for side in sides}
    try:
        for n in range(turns):
            shift = n % len(sides)
            for side, chat in (
                list(zip(sides, chats, strict=True))[shift:] + list(zip(sides, chats, strict=True))[:shift]
            ):
                ballet_ms = await chat.turn(f"What should we do next? ({n})")
                bodies = fake.recorded_since()
                if not bodies:
                    raise RuntimeError("the fake recorded none of Ballet's requests")
                bare_ms = await bare.replay(bodies)
                fake.skip(len(bodies))
                series[side.name].append((ballet_ms, bare_ms))
    finally:
        fake.stop_recording()
    return series


async def measure(sides: list[Side], fake: FakeProcess, args: argparse.Namespace) -> None:
    chats = [side.chat() for side in sides]
    for chat in chats:
        await chat.new_session()
        for n in range(3):  # warm-up: first-use costs stay out of the figures (and the requests get dumped)
            await chat.turn(f"warm up {n}")
    bare = bare_from(fake)
    await bare.start()
    await rounds(sides, chats, bare, 6)

    profile = start_profile(args, "turns", sides[0].pid) if args.py_spy else None
    overhead = await rounds(sides, chats, bare, args.rounds) if args.rounds else []
    growth = await growth_session(sides, chats, bare, fake, args.growth) if args.growth else {}
    if profile is not None:
        stop_profile(profile)
    for chat in chats:
        await chat.close()
    await bare.client.close()
    report(args, sides, overhead, growth)


# --- capacity --------------------------------------------------------------------------------


@dataclass
class Capacity:
    side: str
    turns: int
    seconds: float
    turn_ms: list[float]
    pauses: list[float]  # seconds in which no session heard a frame, those over 0.1 s
    daphne_cpu: float  # CPU seconds over the measured span
    fake_cpu: float
    client_cpu: float


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def capacity(
    side: Side, fake: FakeProcess, sessions: int, turns: int, profile: argparse.Namespace | None = None
) -> Capacity:
    silences = Silences()
    chats = [side.chat(silences) for _ in range(sessions)]
    await asyncio.gather(*(chat.new_session() for chat in chats))

    async def run(chat: BalletChat, label: str, count: int, into: list[float]) -> None:
        for n in range(count):
            into.append(await chat.turn(f"{label} ({n})", within_s=300))

    warm: list[float] = []
    await asyncio.gather(*(run(chat, "warm up", 2, warm) for chat in chats))
    times: list[float] = []
    silences.pauses.clear()
    spy = start_profile(profile, "capacity", side.pid) if profile is not None else None
    cpu = (proc_cpu_seconds(side.pid), proc_cpu_seconds(fake.process.pid), _own_cpu())
    started = time.perf_counter()
    await asyncio.gather(*(run(chat, "What should we do next?", turns, times) for chat in chats))
    seconds = time.perf_counter() - started
    if spy is not None:
        stop_profile(spy)
    after = (proc_cpu_seconds(side.pid), proc_cpu_seconds(fake.process.pid), _own_cpu())
    await asyncio.gather(*(chat.close() for chat in chats))
    used = (b - a for a, b in zip(cpu, after, strict=True))
    return Capacity(side.name, len(times), seconds, times, list(silences.pauses), *used)


async def measure_capacity(sides: list[Side], fake: FakeProcess, args: argparse.Namespace) -> None:
    print(
        f"capacity · {args.mode} · {args.capacity} sessions turning at once through one daphne, "
        f"{args.capacity_turns} turns each (after 2 warm-up turns); one daphne under load at a time"
    )
    repeats = args.capacity_repeats if len(sides) > 1 else 1
    for repeat in range(repeats):
        for side in sides if repeat % 2 == 0 else sides[::-1]:
            profile = args if args.py_spy and repeat == 0 and side is sides[0] else None
            result = await capacity(side, fake, args.capacity, args.capacity_turns, profile)
            share = {
                name: f"{100 * used / result.seconds:.0f} %"
                for name, used in (
                    ("daphne", result.daphne_cpu),
                    ("fake", result.fake_cpu),
                    ("client", result.client_cpu),
                )
            }
            print(
                f"  {result.side}: {result.turns / result.seconds:.1f} turns/s ({result.turns} turns in "
                f"{result.seconds:.1f} s); turn p50 {statistics.median(result.turn_ms):.0f} ms, "
                f"p99 {percentile(result.turn_ms, 0.99):.0f} ms; CPU (of one core) daphne {share['daphne']}, "
                f"fake {share['fake']}, this client {share['client']}"
            )
            if result.pauses:
                print(
                    f"    {len(result.pauses)} pauses over 0.1 s with no frame to any session, the longest "
                    f"{1000 * max(result.pauses):.0f} ms: the server or the fake stalled"
                )


# --- profile and report ----------------------------------------------------------------------


def start_profile(args: argparse.Namespace, name: str, pid: int) -> subprocess.Popen[bytes]:
    out = args.log_dir / f"daphne-{name}.pyspy.txt"
    print(f"  (profiling daphne into {out})")
    options = ["--gil"] if args.gil else []
    options += ["--nonblocking", "-f", "raw", "-r", "500", "-o", str(out), "-p", str(pid)]
    return subprocess.Popen(
        [args.py_spy, "record", *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop_profile(spy: subprocess.Popen[bytes]) -> None:
    spy.send_signal(signal.SIGINT)
    spy.wait(timeout=30)


def _figures(values: list[float]) -> str:
    return f"median {statistics.median(values):+.1f} ms, p90 {percentile(values, 0.9):+.1f} ms"


def report(
    args: argparse.Namespace,
    sides: list[Side],
    overhead: list[dict[str, float]],
    growth: dict[str, list[tuple[float, float]]],
) -> None:
    names = [side.name for side in sides]
    print(f"turn overhead · {args.mode} · end to end over the WebSocket vs the bare SDK, interleaved")
    if overhead:
        print(f"  {len(overhead)} rounds (a fresh session every {SESSION_TURNS}, order rotating):")
        for name in names:
            print(
                f"    {name} - bare {_figures([r[name] - r[BARE] for r in overhead])}  "
                f"[target median ≤ {args.target:g} ms]; its turn median "
                f"{statistics.median(r[name] for r in overhead):.1f} ms"
            )
        print(f"    bare SDK turn median {statistics.median(r[BARE] for r in overhead):.1f} ms")
        if len(names) == 2:
            between = [r[names[0]] - r[names[1]] for r in overhead]
            print(f"    {names[0]} - {names[1]} (same round) {_figures(between)}")
    if not growth or len(next(iter(growth.values()))) < 50:
        return
    print(
        f"  one {len(next(iter(growth.values())))}-turn session each: turns 41-50 vs 1-10 (medians), "
        "beside a bare client replaying Ballet's own requests after each turn"
    )
    beyond = {}
    for name in names:
        early, late = growth[name][:10], growth[name][40:50]
        ballet_grew = statistics.median(b for b, _ in late) - statistics.median(b for b, _ in early)
        bare_grew = statistics.median(r for _, r in late) - statistics.median(r for _, r in early)
        beyond[name] = ballet_grew - bare_grew
        print(
            f"    {name} {ballet_grew:+.1f} ms, its bare replay {bare_grew:+.1f} ms: beyond what a bare "
            f"client replaying the same requests loses {beyond[name]:+.1f} ms  [target ≤ +{GROWTH_TARGET} ms]"
        )
        print(
            f"      overhead over the replay turns 1-10 {_figures([b - r for b, r in early])}; "
            f"turns 41-50 {_figures([b - r for b, r in late])}"
        )
    if len(names) == 2:
        between_ms = beyond[names[0]] - beyond[names[1]]
        print(f"    growth beyond the replay, {names[0]} - {names[1]}: {between_ms:+.1f} ms")


# --- set-up ----------------------------------------------------------------------------------


def side_of(name: str, server: object) -> Side:
    from tests.fakes.servers import PASSWORD, Server

    assert isinstance(server, Server)
    assert server.process is not None
    return Side(
        name=name,
        url=server.url,
        cookie=login_cookie(server.url, "demo", PASSWORD),
        token=api_token(server.url, "demo", PASSWORD),
        pid=server.process.pid,
    )


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve-fake":  # as before bench/_turns.py ran it
        serve_fake(Path(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60, help="rounds of turns, a fresh session every 10")
    parser.add_argument("--growth", type=int, default=50, help="turns of the one long session (0: skip)")
    parser.add_argument("--baseline", metavar="REV", help="also run this commit's daphne, side by side")
    parser.add_argument(
        "--capacity",
        type=int,
        nargs="?",
        const=50,
        default=0,
        metavar="N",
        help="N sessions turning at once through one daphne (50 without a value)",
    )
    parser.add_argument("--capacity-turns", type=int, default=20, help="turns per session under load")
    parser.add_argument("--capacity-repeats", type=int, default=2, help="alternations with --baseline")
    parser.add_argument("--log-dir", type=Path, default=None, help="keep daphne's log (and profile) here")
    parser.add_argument(
        "--py-spy", default=None, help="a py-spy binary: profile daphne while turns (and a capacity run) run"
    )
    parser.add_argument("--gil", action="store_true", help="with --py-spy: sample the thread holding the GIL")
    args = parser.parse_args()
    from tests.fakes.servers import RedisServer, production_mode, served

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
        with contextlib.ExitStack() as stack:
            (tmp / "current").mkdir()
            server = stack.enter_context(
                served(
                    tmp / "current",
                    fake.base_url,
                    extra_env=unlimited,
                    redis_url=os.environ.get("REDIS_URL"),
                    log=args.log_dir / "daphne.log",
                )
            )
            sides = [side_of("Ballet", server)]
            if args.baseline:
                root, commit = stack.enter_context(checkout(args.baseline, tmp))
                redis_url = None
                if production_mode():
                    (tmp / "redis").mkdir()
                    redis_server = RedisServer(tmp / "redis").start()
                    stack.callback(redis_server.stop)
                    redis_url = redis_server.url
                (tmp / "baseline-home").mkdir()
                baseline = stack.enter_context(
                    served(
                        tmp / "baseline-home",
                        fake.base_url,
                        extra_env=unlimited,
                        redis_url=redis_url,
                        log=args.log_dir / "daphne-baseline.log",
                        root=root,
                    )
                )
                sides.append(side_of(f"Ballet {args.baseline} ({commit})", baseline))
            if args.rounds or args.growth:
                asyncio.run(measure(sides, fake, args))
            if args.capacity:
                asyncio.run(measure_capacity(sides, fake, args))
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
