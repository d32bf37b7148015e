"""PostgreSQL connections of one daphne under REST load, and what a simple GET costs.

A production deployment (a fresh PostgreSQL database, the shared Redis), one daphne. The
``agent`` token reads ``/api/v1/projects/DEMO/items/?limit=5``: ``--requests`` one after
another, then as many again from ``--clients`` threads at once; then the run waits
``--idle`` seconds. A thread samples ``pg_stat_activity`` for the deployment's database
every 20 ms throughout.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet_bench REDIS_URL=redis://127.0.0.1:6379/4 \\
        .venv/bin/python bench/db_connections.py --requests 300 --clients 8

Figures: sequential p50/p95 latency and requests/s, concurrent requests/s, the peak
connection count while requests ran and the count after the idle wait. Production mode only.
The pool (``BALLET_DATABASE_POOL_SIZE``, 20) against a connection per request (``CONN_MAX_AGE``
0), 300 requests, 32 clients, on a busy 2-core machine: p50 24-41 ms against 39-57 ms, 38-47
against 33-34 requests/s at once, at most 20 connections against 30-32 (as many as clients).
Connections kept per thread (``CONN_MAX_AGE`` 60, before) reached the server's limit: 503.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.servers import Deployment, Server, production_mode

PATH = "/api/v1/projects/DEMO/items/?limit=5"


def connections(database: str) -> int:
    sql = f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}'"
    result = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-tAc", sql], capture_output=True, text=True, check=True
    )
    return int(result.stdout.strip())


def get(url: str, token: str) -> float:
    started = time.perf_counter()
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        response.read()
        assert response.status == 200
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--idle", type=float, default=5.0)
    args = parser.parse_args()
    assert production_mode(), "set DATABASE_URL and REDIS_URL"
    home = Path(tempfile.mkdtemp(prefix="ballet-bench-db-"))
    deployment = Deployment.create(home, "http://127.0.0.1:9")
    server = Server(deployment, log=home / "daphne.log").start()
    assert deployment.database
    database = deployment.database
    peak, sampling = [0], threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak[0] = max(peak[0], connections(database))
            time.sleep(0.02)

    try:
        token = deployment.manage(
            "shell",
            "-c",
            "from rest_framework.authtoken.models import Token; "
            "print(Token.objects.get(user__username='agent').key)",
        ).split()[-1]
        url = server.url + PATH
        for _ in range(10):
            get(url, token)  # warm up
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.perf_counter()
        latencies = sorted(get(url, token) for _ in range(args.requests))
        sequential = time.perf_counter() - started
        started = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as clients:
            list(clients.map(lambda _: get(url, token), range(args.requests)))
        concurrent = time.perf_counter() - started
        time.sleep(args.idle)
        after = connections(database)
        sampling.set()
        sampler.join()
        print(
            f"sequential: p50 {statistics.median(latencies) * 1000:.1f} ms, "
            f"p95 {latencies[int(len(latencies) * 0.95)] * 1000:.1f} ms, "
            f"{args.requests / sequential:.0f} requests/s"
        )
        print(f"{args.clients} clients at once: {args.requests / concurrent:.0f} requests/s")
        print(f"connections: peak {peak[0]} while requests ran, {after} after {args.idle:.0f} s idle")
    finally:
        server.stop()
        deployment.drop()


if __name__ == "__main__":
    main()
