"""/metrics adds up the counts of every process of the host (ballet/metrics.py).

Each process here is a real Python process counting with prometheus_client in
multiprocess mode, as daphne and Celery do with ``BALLET_METRICS_DIR`` set.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from prometheus_client import CollectorRegistry

from ballet.metrics import ARCHIVE, FOLDING, HostCollector, fold_dead
from tests.fakes.servers import free_port

ROOT = Path(__file__).resolve().parent.parent

COUNT = """
import sys
from prometheus_client import Counter, Gauge, Histogram

turns = Counter("ballet_planner_turns_total", "Planner turns by how they ended.", ["reason"])
seconds = Histogram("ballet_llm_request_seconds", "Latency of model calls.", buckets=(0.1, 1))
Gauge("ballet_test_alive", "Set while the process lives.", multiprocess_mode="all").set(1)
turns.labels("completed").inc(int(sys.argv[1]))
for value in sys.argv[2:]:
    seconds.observe(float(value))
print("counted", flush=True)
if sys.stdin.readline():  # a process that lives on until told
    pass
"""


class Host:
    """A metrics directory and the processes that count in it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.living: list[subprocess.Popen[str]] = []

    def _start(self, turns: int, observations: tuple[float, ...]) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", COUNT, str(turns), *map(str, observations)],
            env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(self.directory)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "counted"
        return process

    def dead(self, turns: int, *observations: float) -> int:
        """A process that counted, then exited."""
        process = self._start(turns, observations)
        process.communicate("")
        return process.pid

    def alive(self, turns: int, *observations: float) -> int:
        process = self._start(turns, observations)
        self.living.append(process)
        return process.pid

    def value(self, name: str, **labels: str) -> float | None:
        registry = CollectorRegistry()
        registry.register(HostCollector(self.directory))
        return registry.get_sample_value(name, labels)

    def turns(self) -> float | None:
        return self.value("ballet_planner_turns_total", reason="completed")

    def names(self) -> set[str]:
        return {path.name for path in self.directory.iterdir() if path.name != ".lock"}


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    host = Host(tmp_path)
    yield host
    for process in host.living:
        process.communicate("stop\n")


def test_one_scrape_adds_up_the_processes_alive_and_dead(host):
    host.dead(2, 0.05, 0.5)
    host.dead(3, 2.0)
    host.alive(1)
    assert host.turns() == 6
    assert host.value("ballet_llm_request_seconds_bucket", le="0.1") == 1
    assert host.value("ballet_llm_request_seconds_bucket", le="1.0") == 2
    assert host.value("ballet_llm_request_seconds_bucket", le="+Inf") == 3
    assert host.value("ballet_llm_request_seconds_count") == 3
    assert host.value("ballet_llm_request_seconds_sum") == pytest.approx(2.55)


def test_dead_processes_fold_into_one_archive_and_every_count_stays(host):
    first, second = host.dead(2, 0.05), host.dead(3, 2.0)
    living = host.alive(1, 0.5)
    fold_dead(host.directory)
    assert host.names() == {
        "counter_archive-1.db",
        "histogram_archive-1.db",
        f"counter_{living}.db",
        f"histogram_{living}.db",
        f"gauge_all_{living}.db",
    }, (first, second)
    assert host.turns() == 6
    assert host.value("ballet_llm_request_seconds_bucket", le="1.0") == 2
    assert host.value("ballet_llm_request_seconds_count") == 3

    host.dead(4)
    fold_dead(host.directory)
    fold_dead(host.directory)  # nothing more to fold
    assert {name for name in host.names() if ARCHIVE.fullmatch(name)} == {
        "counter_archive-2.db",
        "histogram_archive-2.db",
    }
    assert host.turns() == 10
    assert host.value("ballet_llm_request_seconds_sum") == pytest.approx(2.55)


class CrashError(Exception):
    """A fold stopped here, as if its process had been killed."""


def test_a_fold_stopped_before_its_archive_is_written_counts_everything_once(host, monkeypatch):
    host.dead(2, 0.05)
    fold_dead(host.directory)
    host.dead(3, 2.0)
    with monkeypatch.context() as patched:
        patched.setattr(Path, "replace", lambda *_: (_ for _ in ()).throw(CrashError()))
        with pytest.raises(CrashError):
            fold_dead(host.directory)
    assert any(FOLDING.fullmatch(name) for name in host.names())
    assert host.turns() == 5
    assert host.value("ballet_llm_request_seconds_count") == 2
    fold_dead(host.directory)
    assert not any(FOLDING.fullmatch(name) for name in host.names())
    assert host.turns() == 5


def test_a_fold_stopped_before_its_cleanup_counts_everything_once(host, monkeypatch):
    host.dead(2, 0.05)
    fold_dead(host.directory)
    host.dead(3, 2.0)
    unlink = Path.unlink

    def crash_on_folded(path: Path, missing_ok: bool = False) -> None:
        if ARCHIVE.fullmatch(path.name) or FOLDING.fullmatch(path.name):
            raise CrashError
        unlink(path, missing_ok=missing_ok)

    with monkeypatch.context() as patched:
        patched.setattr(Path, "unlink", crash_on_folded)
        with pytest.raises(CrashError):
            fold_dead(host.directory)
    names = host.names()
    # The fold stopped in its first kind, with the old archive and the folded files still there.
    assert any({f"{kind}_archive-1.db", f"{kind}_archive-2.db"} <= names for kind in ("counter", "histogram"))
    assert host.turns() == 5
    assert host.value("ballet_llm_request_seconds_count") == 2
    fold_dead(host.directory)
    assert {name for name in host.names() if ARCHIVE.fullmatch(name) or FOLDING.fullmatch(name)} == {
        "counter_archive-2.db",
        "histogram_archive-2.db",
    }
    assert host.turns() == 5
    assert host.value("ballet_llm_request_seconds_count") == 2


def test_the_gauges_of_a_dead_process_go_with_it(host):
    gone = host.dead(1)
    living = host.alive(1)
    assert host.value("ballet_test_alive", pid=str(gone)) == 1
    fold_dead(host.directory)
    assert host.value("ballet_test_alive", pid=str(gone)) is None
    assert host.value("ballet_test_alive", pid=str(living)) == 1


@pytest.mark.django_db
def test_the_metrics_page_shows_the_host(host, client, settings):
    host.dead(2)
    host.alive(3)
    settings.METRICS_DIR = host.directory
    response = client.get("/metrics")
    assert response.status_code == 200
    assert 'ballet_planner_turns_total{reason="completed"} 5.0' in response.content.decode()


def test_a_host_without_daphne_serves_its_metrics_with_a_command(host, tmp_path):
    host.dead(2)
    host.alive(3)
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "ballet.settings.base",
        "BALLET_METRICS_DIR": str(host.directory),
        "BALLET_SQLITE_PATH": str(tmp_path / "db.sqlite3"),
        "DATABASE_URL": "",
        "REDIS_URL": "",
        "PYTHONUNBUFFERED": "1",
    }
    command = [sys.executable, "manage.py", "serve_metrics", "--port", str(port)]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        assert "serving the metrics of" in server.stdout.readline()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert 'ballet_planner_turns_total{reason="completed"} 5.0' in text


def test_serving_metrics_needs_the_directory(settings):
    settings.METRICS_DIR = None
    with pytest.raises(CommandError, match="BALLET_METRICS_DIR is not set"):
        call_command("serve_metrics")


def test_a_process_that_imported_prometheus_client_before_the_settings_refuses_to_start(tmp_path):
    script = "import prometheus_client, django; django.setup()"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "ballet.settings.base",
        "BALLET_METRICS_DIR": str(tmp_path),
        "BALLET_SQLITE_PATH": str(tmp_path / "db.sqlite3"),
        "DATABASE_URL": "",
        "REDIS_URL": "",
    }
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode != 0
    assert "prometheus_client was imported before the settings" in result.stderr
