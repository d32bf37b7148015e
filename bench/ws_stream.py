"""Live streaming over WebSockets: one daphne process, many sessions streaming at once.

A fake Messages API (in a process of its own, ``bench/_fake_process.py``: in this one its thread and
the clients' event loop took turns at the interpreter, and the clients' reads waited on the fake's
writes) answers every turn with a text of ``--deltas`` deltas, ``--delay`` seconds apart, each delta
stamped with ``time.time_ns()`` as it is written to the socket. One real daphne process
(``tests/fakes/servers.py``: its own database, the demo users) serves ``--sessions`` sessions
created over REST; a client per session, logged in through the login form, watches it over its
WebSocket, sends one message (all at once) and reads frames until ``turn_ended``. Prints frames lost
(deltas whose stamped text never reached the client; a watcher that falls behind gets a run of
deltas joined in one ``text_delta`` frame), the latency from the fake writing a delta to the client
receiving it (p50, p99), the daphne process's peak memory (VmHWM) and, on a fresh daphne process,
its memory per idle WebSocket with ``--idle`` connections open. The default pace, 20 ms between
deltas (50 deltas/s per stream, 10,000/s across 200 sessions), is faster than a model streams.

    .venv/bin/python bench/ws_stream.py                     # SQLite, in-memory channel layer
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/ws_stream.py                 # PostgreSQL and Redis

Targets: no frame lost, p99 under 100 ms at 200 sessions, under 50 KB per idle connection.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import websockets
from _fake_process import FakeProcess, serve
from _ws import (
    ROOT,
    api,
    api_token,
    checkout,
    login_cookie,
    percentile,
    proc_cpu_seconds,
    proc_status_kb,
    raise_fd_limit,
)

if TYPE_CHECKING:
    from tests.fakes.servers import Deployment, Server

MARKER = "@TS@"
WARM_UP = "warm up"  # the turn that goes first on each daphne, answered short
STAMP = re.compile(r"<(\d{19})>")
HANDSHAKES_AT_ONCE = 50  # daphne's listen backlog is 50: more at once would wait on SYN retries


@dataclass
class Watch:
    """What one client saw of its session's turn."""

    text_deltas: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)
    out_of_order: int = 0
    types: Counter[str] = field(default_factory=Counter)
    ended: str | None = None
    error: str | None = None


async def connect(ws_url: str, cookie: str, origin: str) -> websockets.ClientConnection:
    """A WebSocket as a browser opens it (session cookie, page origin), after its ``state`` frame."""
    ws = await websockets.connect(
        ws_url,
        origin=websockets.Origin(origin),
        additional_headers={"Cookie": cookie},
        open_timeout=60,
        ping_interval=None,  # browsers answer pings but send none
        max_size=None,
    )
    first = json.loads(await asyncio.wait_for(ws.recv(), 60))
    if first.get("type") != "state":
        raise RuntimeError(f"expected a state frame first, got {first}")
    return ws


async def open_many(urls: list[str], cookie: str, origin: str) -> list[websockets.ClientConnection]:
    gate = asyncio.Semaphore(HANDSHAKES_AT_ONCE)

    async def one(url: str) -> websockets.ClientConnection:
        async with gate:
            return await connect(url, cookie, origin)

    return list(await asyncio.gather(*(one(url) for url in urls)))


async def close_all(connections: list[websockets.ClientConnection]) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(
            asyncio.gather(*(ws.close() for ws in connections), return_exceptions=True), 30
        )


async def converse(ws: websockets.ClientConnection, text: str, turn_seconds: float) -> Watch:
    """Send one message and read the turn's frames until ``turn_ended`` (or ``turn_seconds`` pass)."""
    watch = Watch()
    last_stamp = 0
    try:
        async with asyncio.timeout(turn_seconds):
            await ws.send(json.dumps({"type": "message", "text": text}))
            async for raw in ws:
                now = time.time_ns()
                frame = json.loads(raw)
                kind = frame.get("type")
                watch.types[kind] += 1
                if kind == "text_delta":
                    watch.text_deltas += 1
                    for match in STAMP.finditer(frame["text"]):
                        stamp = int(match.group(1))
                        watch.latencies_ms.append((now - stamp) / 1e6)
                        watch.stamps.append(stamp)
                        watch.out_of_order += stamp < last_stamp
                        last_stamp = stamp
                elif kind == "turn_ended":
                    watch.ended = frame.get("reason")
                    if frame.get("error"):
                        watch.error = frame["error"]
                    break
                elif kind == "error":
                    watch.error = f"{frame.get('code')}: {frame.get('message')}"
    except TimeoutError:
        watch.error = "timed out"
    except websockets.ConnectionClosed as exc:
        watch.error = f"connection closed ({exc})"
    return watch


async def sample_rss(pid: int, peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(OSError):
            peak[0] = max(peak[0], proc_status_kb(pid, "VmRSS"))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.05)


@dataclass
class StreamResult:
    watches: list[Watch]
    wall_s: float
    daphne_cpu_s: float
    fake_cpu_s: float
    bench_cpu_s: float
    rss_before_kb: int
    rss_peak_sampled_kb: int
    hwm_kb: int


def start_py_spy(binary: str, pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling ``pid`` (collapsed stacks into ``out``) until it gets SIGINT."""
    options = ["--nonblocking", "--threads", "-f", "raw", "-r", "250", "-o", str(out)]
    return subprocess.Popen(
        [binary, "record", *options, "-p", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def stream_phase(
    server: Server,
    fake: FakeProcess,
    cookie: str,
    sessions: list[str],
    *,
    warm_session: str,
    turn_seconds: float,
    profile: tuple[str, Path] | None = None,
) -> StreamResult:
    assert server.process is not None
    pid = server.process.pid
    origin = server.url
    ws_base = server.url.replace("http://", "ws://")

    def url(session: str) -> str:
        return f"{ws_base}/ws/planner/sessions/{session}/"

    # Warm-up: one short turn, so first-use costs (the SDK client, imports) stay out of the figures.
    warm = await connect(url(warm_session), cookie, origin)
    warm_watch = await converse(warm, WARM_UP, turn_seconds=60)
    await warm.close()
    if warm_watch.ended != "completed":
        raise RuntimeError(f"the warm-up turn failed: {warm_watch}")

    connections = await open_many([url(s) for s in sessions], cookie, origin)
    try:
        await asyncio.sleep(1.0)  # let the handshakes' work settle
        rss_before = proc_status_kb(pid, "VmRSS")
        peak = [rss_before]
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample_rss(pid, peak, stop))
        spy = None
        if profile is not None:  # sample daphne while the turns run
            spy = start_py_spy(profile[0], pid, profile[1])
            await asyncio.sleep(1.0)  # attached
        fake0 = proc_cpu_seconds(fake.process.pid)
        cpu0, bench0, wall0 = proc_cpu_seconds(pid), os.times(), time.perf_counter()
        watches = await asyncio.gather(
            *(
                converse(ws, f"Plan the next step, please ({i})", turn_seconds)
                for i, ws in enumerate(connections)
            )
        )
        wall = time.perf_counter() - wall0
        cpu1, bench1, fake1 = proc_cpu_seconds(pid), os.times(), proc_cpu_seconds(fake.process.pid)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=30)
        stop.set()
        await sampler
        hwm = proc_status_kb(pid, "VmHWM")
    finally:
        await close_all(connections)
    bench_cpu = (bench1.user + bench1.system) - (bench0.user + bench0.system)
    return StreamResult(
        watches=list(watches),
        wall_s=wall,
        daphne_cpu_s=cpu1 - cpu0,
        fake_cpu_s=fake1 - fake0,
        bench_cpu_s=bench_cpu,
        rss_before_kb=rss_before,
        rss_peak_sampled_kb=peak[0],
        hwm_kb=hwm,
    )


@dataclass
class IdleResult:
    connections: int
    rss_before_kb: int
    rss_open_kb: int
    rss_closed_kb: int
    open_s: float


async def idle_phase(server: Server, cookie: str, sessions: list[str], count: int) -> IdleResult:
    assert server.process is not None
    pid = server.process.pid
    ws_base = server.url.replace("http://", "ws://")
    urls = [f"{ws_base}/ws/planner/sessions/{sessions[i % len(sessions)]}/" for i in range(count)]
    # Warm-up: the first connections pay for imports and caches, not for being connections.
    await close_all(await open_many(urls[:50], cookie, server.url))
    await asyncio.sleep(1.0)
    before = proc_status_kb(pid, "VmRSS")
    started = time.perf_counter()
    connections = await open_many(urls, cookie, server.url)
    open_s = time.perf_counter() - started
    try:
        await asyncio.sleep(2.0)
        with_open = proc_status_kb(pid, "VmRSS")
    finally:
        await close_all(connections)
    await asyncio.sleep(2.0)
    return IdleResult(count, before, with_open, proc_status_kb(pid, "VmRSS"), open_s)


def create_sessions(base_url: str, token: str, count: int) -> list[str]:
    return [
        api(base_url, "POST", "/api/v1/planner/sessions/", {"project": "DEMO"}, token=token)["id"]
        for _ in range(count)
    ]


def report_stream(mode: str, args: argparse.Namespace, result: StreamResult) -> None:
    watches = result.watches
    expected = args.sessions * args.deltas
    received = sum(w.text_deltas for w in watches)
    stamps = sum(len(w.latencies_ms) for w in watches)
    latencies = [ms for w in watches for ms in w.latencies_ms]
    unfinished = [w for w in watches if w.ended != "completed"]
    stream_s = args.deltas * args.delay
    print(
        f"websocket streaming · {mode} · one daphne process · {args.sessions} sessions x {args.deltas} "
        f"deltas, "
        f"{args.delay * 1000:g} ms between deltas (≈ {stream_s:.1f} s per stream, "
        f"≈ {args.sessions / args.delay:,.0f} deltas/s in all)"
    )
    print(
        f"  frames lost: {expected - stamps} of {expected:,} deltas (each delta's text carries its stamp; "
        f"out of order {sum(w.out_of_order for w in watches)}, turns not completed {len(unfinished)})  "
        f"[target 0]"
    )
    print(
        f"    they came in {received:,} text_delta frames: a watcher that falls behind gets a run of "
        f"deltas as one frame"
    )

    def seen(w: Watch) -> str:
        return "all" if w.text_deltas == args.deltas else "none" if w.text_deltas == 0 else "some"

    why = Counter(f"ended={w.ended}, error={w.error}, {seen(w)} of the deltas seen" for w in unfinished)
    for reason, count in why.most_common(5):
        print(f"    {count} turns: {reason}")
    if latencies:
        print(
            f"  delta latency, fake writes → client reads: p50 {percentile(latencies, 0.5):.1f} ms, "
            f"p90 {percentile(latencies, 0.9):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms, "
            f"max {max(latencies):.1f} ms  [target p99 < 100 ms]"
        )
        firsts = [w.latencies_ms[0] for w in watches if w.latencies_ms]
        print(
            f"    first delta of a turn: median {statistics.median(firsts):.1f} ms, max {max(firsts):.1f} ms"
        )
    print(
        f"  daphne peak memory: VmHWM {result.hwm_kb / 1024:.1f} MB "
        f"(RSS {result.rss_before_kb / 1024:.1f} MB with the {args.sessions} sockets open before the turns, "
        f"sampled peak {result.rss_peak_sampled_kb / 1024:.1f} MB)"
    )
    print(
        f"  all turns took {result.wall_s:.2f} s; CPU meanwhile: daphne {result.daphne_cpu_s:.2f} s "
        f"({100 * result.daphne_cpu_s / result.wall_s:.0f} % of a core), the fake "
        f"{result.fake_cpu_s:.2f} s ({100 * result.fake_cpu_s / result.wall_s:.0f} %), "
        f"this process (the clients) {result.bench_cpu_s:.2f} s "
        f"({100 * result.bench_cpu_s / result.wall_s:.0f} %)"
    )


def report_timeline(result: StreamResult) -> None:
    """Latency by when the fake wrote the delta, per second of the run: where a backlog builds."""
    pairs = [(stamp, ms) for w in result.watches for stamp, ms in zip(w.stamps, w.latencies_ms, strict=True)]
    if not pairs:
        return
    start = min(stamp for stamp, _ in pairs)
    buckets: dict[int, list[float]] = {}
    for stamp, ms in pairs:
        buckets.setdefault((stamp - start) // 1_000_000_000, []).append(ms)
    print("  timeline (second the fake wrote the delta: deltas written, latency p50 / p99):")
    for second in sorted(buckets):
        values = buckets[second]
        print(
            f"    {second:3d} s: {len(values):6d} deltas, "
            f"{percentile(values, 0.5):8.1f} / {percentile(values, 0.99):8.1f} ms"
        )


def report_idle(result: IdleResult) -> float:
    per_kb = (result.rss_open_kb - result.rss_before_kb) / result.connections
    print(f"idle websockets · a fresh daphne process · {result.connections:,} connections")
    print(
        f"  daphne RSS: {result.rss_before_kb / 1024:.1f} MB before, {result.rss_open_kb / 1024:.1f} MB with "
        f"them open, {result.rss_closed_kb / 1024:.1f} MB after closing them; opened in {result.open_s:.1f} s"
    )
    print(f"  memory per idle connection: {per_kb:.1f} KB  [target < 50 KB]")
    return per_kb


@dataclass
class Figures:
    """One run's figures, for the summary of runs side by side."""

    cpu_per_delta_us: float
    deltas_a_frame: float
    p99_ms: float
    idle_kb: float | None


def run(args: argparse.Namespace, fake: FakeProcess, root: Path, tmp: Path, logs: Path) -> Figures:
    """One run on a fresh deployment of the code in ``root``: the streams, then the idle sockets."""
    from tests.fakes.servers import PASSWORD, Deployment, Server, production_mode

    turn_seconds = args.timeout or 60 + 10 * args.deltas * args.delay
    mode = "postgresql + redis" if production_mode() else "sqlite + in-memory layer"
    logs.mkdir(parents=True, exist_ok=True)
    deployment: Deployment | None = None
    servers: list[Server] = []
    try:
        deployment = Deployment.create(tmp, fake.base_url, root=root)
        # One user streams in all the sessions: lift the per-user and per-project limits (docs/trust.md),
        # which would otherwise refuse all but a few of the turns; this measures streaming.
        many = str(10 * (args.sessions + 1))
        deployment.env |= {
            "BALLET_LIMIT_MESSAGES_PER_MINUTE": many,
            "BALLET_LIMIT_RUNNING_TURNS_PER_USER": many,
            "BALLET_LIMIT_RUNNING_TURNS_PER_PROJECT": many,
        }
        if args.settings:
            deployment.env["DJANGO_SETTINGS_MODULE"] = args.settings
            print(f"  (daphne runs with the settings module {args.settings})")
        server = Server(deployment, log=logs / "daphne-stream.log")
        servers.append(server)  # stopped in the end even if it never became healthy
        server.start()
        cookie = login_cookie(server.url, "demo", PASSWORD)
        token = api_token(server.url, "demo", PASSWORD)
        sessions = create_sessions(server.url, token, args.sessions + 1)
        profile = (args.py_spy, logs / "daphne-stream.pyspy.txt") if args.py_spy else None
        stream = asyncio.run(
            stream_phase(
                server,
                fake,
                cookie,
                sessions[1:],
                warm_session=sessions[0],
                turn_seconds=turn_seconds,
                profile=profile,
            )
        )
        if profile is not None:
            print(f"  (profile of daphne while streaming: {profile[1]})")
        server.stop()
        report_stream(mode, args, stream)
        if args.timeline:
            report_timeline(stream)
        idle_kb = None
        if args.idle:
            server = Server(deployment, log=logs / "daphne-idle.log")
            servers.append(server)
            server.start()
            idle = asyncio.run(idle_phase(server, cookie, sessions, args.idle))
            server.stop()
            idle_kb = report_idle(idle)
    finally:
        for server in servers:
            server.stop()
        if deployment is not None:
            deployment.drop()
    latencies = [ms for w in stream.watches for ms in w.latencies_ms]
    return Figures(
        cpu_per_delta_us=1e6 * stream.daphne_cpu_s / (args.sessions * args.deltas),
        deltas_a_frame=args.sessions * args.deltas / max(1, sum(w.text_deltas for w in stream.watches)),
        p99_ms=percentile(latencies, 0.99) if latencies else float("nan"),
        idle_kb=idle_kb,
    )


def report_sides(figures: dict[str, list[Figures]]) -> None:
    """Each side's runs, and this tree's CPU per delta against the baseline's."""
    print(
        "side by side, run by run (daphne's CPU per delta, turn starts and titles included; deltas a frame, "
        "more where daphne fell behind; p99; idle KB):"
    )
    for name, runs in figures.items():
        cpu = ", ".join(f"{f.cpu_per_delta_us:.0f}" for f in runs)
        joined = ", ".join(f"{f.deltas_a_frame:.2f}" for f in runs)
        p99 = ", ".join(f"{f.p99_ms:.1f}" for f in runs)
        idle = ", ".join(f"{f.idle_kb:.1f}" for f in runs if f.idle_kb is not None) or "-"
        print(f"  {name}: {cpu} µs a delta; {joined} deltas a frame; p99 {p99} ms; idle {idle} KB")
    sides = list(figures.values())
    if len(sides) == 2:
        mine, theirs = (statistics.median(f.cpu_per_delta_us for f in runs) for runs in sides)
        change = 100 * (mine / theirs - 1)
        print(f"  CPU per delta, medians: {mine:.0f} against {theirs:.0f} µs: {change:+.0f} %")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--deltas", type=int, default=500)
    parser.add_argument("--delay", type=float, default=0.02, help="seconds between a stream's deltas")
    parser.add_argument("--idle", type=int, default=1000, help="idle connections (0: skip)")
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds a turn may take (default: ample)"
    )
    parser.add_argument("--log-dir", type=Path, default=None, help="keep daphne's logs (and profile) here")
    parser.add_argument(
        "--settings",
        default=None,
        help="run daphne with this Django settings module (to try a configuration; PYTHONPATH is passed on)",
    )
    parser.add_argument("--timeline", action="store_true", help="print latency per second of the run")
    parser.add_argument("--py-spy", default=None, help="a py-spy binary: profile daphne while the turns run")
    parser.add_argument(
        "--baseline", default=None, help="a commit to run too, in a git worktree, alternating with this tree"
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs of each side (alternating)")
    args = parser.parse_args()
    fd_limit = raise_fd_limit()
    if fd_limit < 2 * max(args.sessions, args.idle) + 200:
        raise SystemExit(f"the open-file limit ({fd_limit}) is too low for {args.idle} connections")
    tmp = Path(tempfile.mkdtemp(prefix="ballet-ws-bench-"))
    logs = args.log_dir or tmp
    fake = FakeProcess(__file__, "--serve-fake", str(args.deltas), str(args.delay))
    try:
        with contextlib.ExitStack() as stack:
            sides = {"Ballet": ROOT}
            if args.baseline:
                root, commit = stack.enter_context(checkout(args.baseline, tmp))
                sides[f"Ballet {args.baseline} ({commit})"] = root
            figures: dict[str, list[Figures]] = {name: [] for name in sides}
            several = len(sides) > 1 or args.repeats > 1
            for repeat in range(args.repeats):
                order = list(sides.items())
                for name, root in order if repeat % 2 == 0 else reversed(order):
                    where = f"{'baseline' if root != ROOT else 'this'}-{repeat + 1}"
                    if several:
                        print(f"== {name}, run {repeat + 1}", flush=True)
                    (tmp / where).mkdir()
                    figures[name].append(run(args, fake, root, tmp / where, logs / where))
            if several:
                report_sides(figures)
    finally:
        fake.stop()
        if args.log_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)


def serve_fake(deltas: int, delay: float) -> None:
    """The fake's process: each daphne's warm-up turn answered short, every other turn the stamped text."""
    from tests.fakes.messages_api import TextReply

    warm = TextReply(chunks=["warm "] * 20)
    reply = TextReply(chunks=[f"<{MARKER}> "] * deltas, delay_between_deltas=delay, stamp_marker=MARKER)

    def respond(body: dict[str, object]) -> TextReply:
        messages = body["messages"]
        assert isinstance(messages, list)
        return warm if WARM_UP in json.dumps(messages[-1]) else reply

    serve(respond)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--serve-fake":
        serve_fake(int(sys.argv[2]), float(sys.argv[3]))
    else:
        main()
