"""What ``bench/soak.py`` counts and prints: calls by surface and outcome, their latencies, MCP call
failures, the processes' memory, and what the logs of the daphnes, the worker and PostgreSQL say.

Every call an agent or a human makes is one :class:`Figures.add`; each minute's window is printed as
it closes (:meth:`Figures.minute`) and the whole run at the end (:meth:`Figures.final`). The RSS of
each process is sampled once a minute from ``/proc/PID/status``; the slope over the run's second
half is a least-squares line through those samples.
"""

from __future__ import annotations

import re
import threading
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _ws import percentile, proc_status_kb

# A REST answer is its status code; an MCP call is "ok", "tool:<error code>" (a refusal in the
# tool's result), "refused:rate_limited" (the server's refusal past the token's requests a minute,
# a JSON-RPC error) or "exception" (the call raised); a chat turn is "ok", "refused:<status>" or
# "error:<frame code>".
SERVER_ERRORS = re.compile(r"^(5\d\d|tool:(internal_error|unavailable)|exception)$")
NUMBERS = re.compile(r"\d+")


def status_class(outcome: str) -> str:
    """``2xx``, ``4xx``, ``5xx`` for a REST status; the outcome's kind otherwise."""
    if outcome.isdigit():
        return f"{outcome[0]}xx"
    return outcome.split(":", 1)[0]


@dataclass
class Window:
    """The calls of one minute (or of the whole run)."""

    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (surface, outcome)
    messages: Counter[str] = field(default_factory=Counter)  # 5xx and server-side tool errors, by message
    refusals: Counter[str] = field(default_factory=Counter)  # the other errors, by message (numbers as N)
    failures: Counter[str] = field(default_factory=Counter)  # MCP exceptions, by type
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def add(self, surface: str, op: str, outcome: str, seconds: float, message: str) -> None:
        self.outcomes[(surface, outcome)] += 1
        if SERVER_ERRORS.match(outcome):
            self.messages[f"{surface} {op} {outcome}: {message[:120]}"] += 1
        elif status_class(outcome) not in ("2xx", "ok"):
            self.refusals[f"{surface} {op} {outcome}: {NUMBERS.sub('N', message)[:100]}"] += 1
        self.latencies[f"{surface} {op}"].append(seconds)

    def server_errors(self) -> int:
        return sum(self.messages.values())


@dataclass
class Memory:
    """RSS samples (minutes since the start, kB) by process name."""

    samples: dict[str, list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))

    def sample(self, minute: float, pids: dict[str, list[int]]) -> dict[str, int]:
        now = {}
        for name, group in pids.items():
            total = 0
            for pid in group:
                try:
                    total += proc_status_kb(pid, "VmRSS")
                except (OSError, KeyError):
                    continue  # gone meanwhile (a pool child replaced)
            self.samples[name].append((minute, total))
            now[name] = total
        return now

    def slope(self, name: str) -> float | None:
        """MB a minute over the second half of the samples (least squares), None with fewer than 3."""
        points = self.samples[name]
        half = [p for p in points if p[0] >= points[-1][0] / 2] if points else []
        if len(half) < 3:
            return None
        n = len(half)
        mean_t = sum(t for t, _ in half) / n
        mean_kb = sum(kb for _, kb in half) / n
        spread = sum((t - mean_t) ** 2 for t, _ in half)
        if not spread:
            return None
        return sum((t - mean_t) * (kb - mean_kb) for t, kb in half) / spread / 1024


class LogWatch:
    """New lines of a log since the last look; counts of the lines that matter."""

    PATTERNS = {
        "deadlock detected": re.compile(r"deadlock detected"),
        "lock wait over 1 s": re.compile(r"still waiting for \w+Lock"),
        "database error answered 503": re.compile(r"API request met a database error"),
        "SynchronousOnlyOperation": re.compile(r"SynchronousOnlyOperation"),
        "traceback": re.compile(r"^Traceback \(most recent call last\)"),
        "task failed": re.compile(r"Task \S+ raised unexpected"),
        "ERROR line": re.compile(r"\bERROR\b"),
    }

    def __init__(self, path: Path, *, from_end: bool = False) -> None:
        self.path = path
        self.offset = path.stat().st_size if from_end and path.exists() else 0
        self.counts: Counter[str] = Counter()
        self.firsts: dict[str, list[str]] = {}  # kind: the first few lines around its first match

    def read(self) -> Counter[str]:
        """Counts in the lines added since the last read."""
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                chunk = log.read()
        except OSError:
            return Counter()
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        lines = chunk[:end].decode(errors="replace").splitlines()
        found: Counter[str] = Counter()
        for index, line in enumerate(lines):
            for kind, pattern in self.PATTERNS.items():
                if pattern.search(line):
                    found[kind] += 1
                    self.firsts.setdefault(kind, lines[max(0, index - 2) : index + 14])
        self.counts += found
        return found


class Figures:
    """Thread-safe: the agents' event loop and the sampler thread both add to it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.total = Window()
        self.current = Window()
        self.tracebacks: dict[str, str] = {}  # MCP failure type: its first traceback
        self.memory = Memory()
        self.notes: Counter[str] = Counter()  # what the workload did (claims won, tickets created, ...)

    def add(self, surface: str, op: str, outcome: str, seconds: float, message: str = "") -> None:
        with self.lock:
            for window in (self.total, self.current):
                window.add(surface, op, outcome, seconds, message)

    def failed(self, surface: str, op: str, error: BaseException, seconds: float) -> None:
        """An MCP call that raised: counted by the exception's type and its innermost cause."""
        kind = failure_kind(error)
        with self.lock:
            for window in (self.total, self.current):
                window.add(surface, op, "exception", seconds, kind)
                window.failures[kind] += 1
            if kind not in self.tracebacks:
                self.tracebacks[kind] = "".join(traceback.format_exception(error))[-6000:]

    def note(self, what: str, count: int = 1) -> None:
        with self.lock:
            self.notes[what] += count

    def close_minute(self) -> Window:
        with self.lock:
            window, self.current = self.current, Window()
        return window


def failure_kind(error: BaseException) -> str:
    """``ExceptionGroup > ReadTimeout``: the exception's type and the first leaf inside its groups."""
    names = [type(error).__name__]
    leaf = error
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
        names.append(type(leaf).__name__)
    text = str(leaf).splitlines()[0][:80] if str(leaf) else ""
    return " > ".join(names) + (f": {text}" if text else "")


def _ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1000:.0f}"


def outcome_line(window: Window) -> str:
    """``rest: 2xx 120 (200 100, 201 20), 4xx 3 (409 3); mcp: ok 80, tool 2 (tool:conflict 2)``."""
    classes: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for (surface, outcome), count in window.outcomes.items():
        classes[surface][status_class(outcome)][outcome] += count
    parts = []
    for surface, kinds in sorted(classes.items()):
        said = []
        for kind, outcomes in sorted(kinds.items()):
            detail = ", ".join(f"{o} {n}" for o, n in sorted(outcomes.items()))
            said.append(
                f"{kind} {sum(outcomes.values())}" + (f" ({detail})" if outcomes.keys() != {kind} else "")
            )
        parts.append(f"{surface}: {', '.join(said)}")
    return "; ".join(parts)


def latency_lines(window: Window, *, indent: str = "    ") -> list[str]:
    rows = sorted(window.latencies.items())
    return [
        f"{indent}{name:<28} n {len(values):>6}   p50 {_ms(values, 0.5):>6} ms   "
        f"p99 {_ms(values, 0.99):>6} ms"
        for name, values in rows
    ]


def memory_line(now: dict[str, int]) -> str:
    return ", ".join(f"{name} {kb / 1024:.1f} MB" for name, kb in now.items())


def print_minute(
    minute: int, window: Window, memory: dict[str, int], logs: dict[str, Counter[str]], *, details: bool
) -> None:
    calls = sum(window.outcomes.values())
    print(f"[minute {minute}] {calls} calls — {outcome_line(window)}")
    deadlocks = {
        name: found["deadlock detected"] for name, found in logs.items() if found["deadlock detected"]
    }
    print(f"  server errors: {window.server_errors()}; deadlocks logged: {deadlocks or 0}")
    print(f"  RSS: {memory_line(memory)}")
    for message, count in window.messages.most_common(8):
        print(f"    {count}x {message}")
    for kind, count in window.failures.most_common(5):
        print(f"  MCP failure {count}x {kind}")
    logged = {f"{name}: {kind}": n for name, found in logs.items() for kind, n in found.items() if n}
    if logged:
        print(f"  logs: {logged}")
    if details:
        print("  latency this minute:")
        print("\n".join(latency_lines(window)))


def print_final(figures: Figures, minutes: float, logs: dict[str, LogWatch], pg_log: LogWatch | None) -> None:
    total = figures.total
    print(f"\nsoak · {minutes:.1f} minutes · {sum(total.outcomes.values())} calls")
    print(f"  by surface and status: {outcome_line(total)}")
    print(f"  what the workload did: {dict(sorted(figures.notes.items()))}")
    print(
        "  server errors (5xx, tool errors internal_error/unavailable, MCP exceptions): "
        f"{total.server_errors()}"
    )
    for message, count in total.messages.most_common(15):
        print(f"    {count}x {message}")
    print(f"  refusals (4xx, tool errors), by message: {sum(total.refusals.values())}")
    for message, count in total.refusals.most_common(12):
        print(f"    {count}x {message}")
    print(f"  MCP call failures: {sum(total.failures.values())}")
    for kind, count in total.failures.most_common():
        print(f"    {count}x {kind}")
        print("      " + figures.tracebacks[kind].replace("\n", "\n      ").rstrip())
    print("  latency per operation:")
    print("\n".join(latency_lines(total)))
    print("  RSS each minute (MB), and the slope over the second half:")
    for name, points in figures.memory.samples.items():
        slope = figures.memory.slope(name)
        said = "n/a" if slope is None else f"{slope:+.2f} MB/min"
        values = " ".join(f"{kb / 1024:.0f}" for _, kb in points)
        print(f"    {name:<14} {said:>14}   {values}")
    for name, watch in logs.items():
        print(f"  {name} log: {dict(watch.counts) or 'nothing of note'}")
        for kind in ("deadlock detected", "SynchronousOnlyOperation", "traceback"):
            if kind in watch.firsts:
                print(f"    first {kind}:\n      " + "\n      ".join(watch.firsts[kind]))
    if pg_log is not None:
        deadlocks = pg_log.counts["deadlock detected"]
        print(f"  PostgreSQL's log (the server's, shared) during the run: {deadlocks} deadlock(s)")
        if "deadlock detected" in pg_log.firsts:
            print("      " + "\n      ".join(pg_log.firsts["deadlock detected"]))


async def rest_call(
    http: Any, figures: Figures, op: str, method: str, path: str, *, body: Any = None
) -> tuple[int, Any]:
    """One REST call on the ``httpx2`` client ``http``, counted as ``op``: its status and body
    (0 and None when the connection broke or timed out, counted as a failure)."""
    started = time.monotonic()
    try:
        response = await http.request(method, path, json=body)
    except Exception as exc:
        figures.failed("rest", op, exc, time.monotonic() - started)
        return 0, None
    seconds = time.monotonic() - started
    try:
        payload = response.json()
    except ValueError:
        payload = response.text[:300]
    message = ""
    if response.status_code >= 400:
        error = payload.get("error") if isinstance(payload, dict) else None
        message = str(error.get("message") if isinstance(error, dict) else payload)
    figures.add("rest", op, str(response.status_code), seconds, message)
    return response.status_code, payload
