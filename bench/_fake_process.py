"""The fake Messages API (``tests/fakes/messages_api.py``) in a process of its own, for the
benchmarks that drive real servers: the benchmark's script starts itself again with
``--serve-fake``, which calls :func:`serve` with its responder; :class:`FakeProcess` is that
process, seen from the benchmark. Its own process keeps the fake's work off the benchmark's
event loop and interpreter."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any


def serve(responder: Callable[[dict[str, Any]], Any]) -> None:
    """Run the fake Messages API until stdin closes; print its base URL first."""
    from tests.fakes.messages_api import FakeMessagesAPI

    fake = FakeMessagesAPI(responder=responder, keep_requests=False)
    print(fake.base_url, flush=True)
    try:
        sys.stdin.read()  # the bench closes it (or dies)
    finally:
        fake.close()


class FakeProcess:
    """``script`` started with ``arguments`` (``--serve-fake``); ``base_url`` is the fake's."""

    def __init__(self, script: str, *arguments: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, script, *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError("the fake Messages API did not start")

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)
