"""``celery -A ballet beat`` as ``make beat`` and the README start it: it runs its schedule and
writes no file where it starts (the default PersistentScheduler leaves ``celerybeat-schedule*``
in the working directory, the checkout)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.fakes.servers import CELERY, ROOT

pytestmark = pytest.mark.e2e


def test_beat_sends_its_tasks_and_leaves_no_schedule_file(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_SETTINGS"))}
    env |= {
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "ballet.settings.base",
        "PYTHONUNBUFFERED": "1",
    }
    env.setdefault("BALLET_SQLITE_PATH", str(tmp_path / "db" / "beat.sqlite3"))
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    log = tmp_path / "beat.log"
    with open(log, "wb") as out:
        beat = subprocess.Popen(
            [CELERY, "-A", "ballet", "beat", "--loglevel=info"],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while "Sending due task recover-dead-planner-turns" not in log.read_text(errors="replace"):
            assert beat.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.2)
    finally:
        beat.terminate()
        beat.wait(timeout=15)
    assert "celery.beat.Scheduler" in log.read_text(errors="replace")
    assert sorted(p.name for p in workdir.iterdir()) == []
    assert not list(ROOT.glob("celerybeat-schedule*"))
