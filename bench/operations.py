"""What the operations layer costs: the static-files middleware per request, a metric update
in prometheus_client's multiprocess mode, and a scrape of a host's metrics directory.

- Middleware: requests to a trivial async view through Django's async handler (as under
  daphne), with no middleware, WhiteNoise's own (sync only) and Ballet's
  (``ballet.static.StaticFilesMiddleware``); CPU and wall microseconds per request, the
  median of interleaved rounds.
- Metric updates: a labelled counter's ``inc()`` and a histogram's ``observe()``, in one
  process's memory and in multiprocess mode (each in a fresh Python process).
- Scrape: ``/metrics``'s collection of a directory where ``--processes`` processes each
  counted ``--series`` label sets of a counter and a histogram.

    .venv/bin/python bench/operations.py
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _setup import ROOT, setup_django

VARIANTS = {
    "no middleware": [],
    "WhiteNoiseMiddleware": ["whitenoise.middleware.WhiteNoiseMiddleware"],
    "ballet StaticFilesMiddleware": ["ballet.static.StaticFilesMiddleware"],
}
UPDATE = """
import sys, time
from prometheus_client import Counter, Histogram
turns = Counter("bench_turns_total", "Turns.", ["reason"])
seconds = Histogram("bench_seconds", "Latency.", ["purpose", "outcome"])
for name, update in (("counter inc", lambda: turns.labels("completed").inc()),
                     ("histogram observe", lambda: seconds.labels("turn", "ok").observe(0.3))):
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(100_000):
            update()
        runs.append((time.perf_counter() - started) * 10)  # µs per update
    print(name, min(runs))
"""
COUNT = """
import sys
from prometheus_client import Counter, Histogram
turns = Counter("bench_turns_total", "Turns.", ["view"])
seconds = Histogram("bench_seconds", "Latency.", ["view"])
for n in range(int(sys.argv[1])):
    turns.labels(f"view-{n}").inc()
    seconds.labels(f"view-{n}").observe(0.3)
"""


async def ok(_request):  # type: ignore[no-untyped-def]
    from django.http import HttpResponse

    return HttpResponse("ok")


async def _per_request(variant: str, requests: int) -> tuple[float, float]:
    from django.conf import settings
    from django.test import AsyncClient

    settings.MIDDLEWARE = VARIANTS[variant]
    client = AsyncClient()  # loads the middleware on its first request
    for _ in range(100):
        await client.get("/ok")
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(requests):
        await client.get("/ok")
    return (time.process_time() - cpu) / requests * 1e6, (time.perf_counter() - wall) / requests * 1e6


def middleware(rounds: int, requests: int) -> None:
    import logging
    import warnings

    from django.conf import settings
    from django.urls import path

    sys.modules[__name__].urlpatterns = [path("ok", ok)]  # type: ignore[attr-defined]
    settings.ROOT_URLCONF = __name__
    # Both warn that STATIC_ROOT was never collected: no matter here.
    warnings.simplefilter("ignore")
    logging.getLogger("ballet.static").setLevel(logging.ERROR)
    results: dict[str, list[tuple[float, float]]] = {variant: [] for variant in VARIANTS}
    for _ in range(rounds):
        for variant in VARIANTS:
            results[variant].append(asyncio.run(_per_request(variant, requests)))
    print(f"static-files middleware · a trivial async view · {rounds} rounds of {requests} requests")
    for variant, runs in results.items():
        cpu = statistics.median(c for c, _ in runs)
        wall = statistics.median(w for _, w in runs)
        print(f"  {variant:30s} {cpu:6.0f} µs CPU, {wall:6.0f} µs wall per request")


def updates() -> None:
    print("metric updates · µs each, best of 5 x 100,000")
    for mode in ("in-process", "multiprocess"):
        env = dict(os.environ)
        with tempfile.TemporaryDirectory() as directory:
            if mode == "multiprocess":
                env["PROMETHEUS_MULTIPROC_DIR"] = directory
            out = subprocess.run(
                [sys.executable, "-c", UPDATE], env=env, capture_output=True, text=True, check=True
            ).stdout
        for line in out.splitlines():
            name, value = line.rsplit(" ", 1)
            print(f"  {mode:13s} {name:18s} {float(value):.2f} µs")


def scrape(processes: int, series: int) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from ballet.metrics import HostCollector, fold_dead

    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": name}
        for _ in range(processes):
            subprocess.run([sys.executable, "-c", COUNT, str(series)], env=env, check=True)
        registry = CollectorRegistry()
        registry.register(HostCollector(directory))
        for label, before in (("before folding", None), ("after folding", fold_dead)):
            if before is not None:
                started = time.perf_counter()
                before(directory)
                took = (time.perf_counter() - started) * 1000
                print(f"  fold of {processes} dead processes' files: {took:.1f} ms")
            files = len([path for path in directory.iterdir() if path.suffix == ".db"])
            started = time.perf_counter()
            for _ in range(20):
                text = generate_latest(registry)
            took = (time.perf_counter() - started) / 20 * 1000
            samples = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
            print(f"  scrape {label}: {files} files, {samples} samples, {took:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--series", type=int, default=100)
    args = parser.parse_args()
    os.chdir(ROOT)
    print(f"mode: {setup_django()}")
    middleware(args.rounds, args.requests)
    updates()
    print(
        f"metrics scrape · {args.processes} processes x {args.series} label sets of a counter and a histogram"
    )
    scrape(args.processes, args.series)


if __name__ == "__main__":
    main()
