"""The rate limits' clock (``tracker/trust/limits.py``) held still for a test that sets low limits: they
count in windows of a minute, and a test that crossed into the next window would find its earlier
requests counted at a fraction of their weight, and its last request let through."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from tracker.trust import limits


def hold_rate_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    monkeypatch.setattr(limits, "time", SimpleNamespace(time=lambda: now))
