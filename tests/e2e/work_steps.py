"""An agent's work on one ticket over REST with its API key, step by step (claim, progress, blocked,
failed, release, done), and what each step must leave written: for the tests that fault a
deployment while an agent works (tests/e2e/test_faults.py)."""

from __future__ import annotations

from typing import Any

from tests.fakes.client import rest_call
from tests.fakes.servers import Server

DEMO = "/api/v1/projects/DEMO/"
# An agent's work on one ticket: each step, the claim's status after it, whether it adds a report,
# and the ticket's state after it.
WORK_STEPS = (
    ("claim", "active", False, "in_progress"),
    ("progress", "active", True, "in_progress"),
    ("blocked", "blocked", True, "ready"),
    ("claim", "active", False, "in_progress"),
    ("failed", "failed", True, "ready"),
    ("claim", "active", False, "in_progress"),
    ("release", "released", False, "ready"),
    ("claim", "active", False, "in_progress"),
    ("done", "done", True, "in_review"),
)
Work = tuple[str, int, str | None, int]


def work_of(server: Server, key: str, item: str) -> Work:
    """The ticket's state, how many claims it had, its latest claim's status and that claim's reports."""
    state = rest_call(server.url, f"Bearer {key}", "GET", f"{DEMO}items/{item}/")[1]["state"]
    claims = rest_call(server.url, f"Bearer {key}", "GET", f"{DEMO}claims/")[1]["results"]
    on_item = [c for c in claims if c["item"] == item]
    if not on_item:
        return state, 0, None, 0
    latest = rest_call(server.url, f"Bearer {key}", "GET", f"{DEMO}claims/{on_item[0]['id']}/")[1]
    return state, len(on_item), latest["status"], len(latest["reports"])


def work_step(server: Server, key: str, what: str, item: str, claim: Any) -> tuple[int, Any]:
    """What the agent's step ``what`` on ``item`` (or on its ``claim``) answers: (status, body)."""
    if what == "claim":
        return rest_call(server.url, f"Bearer {key}", "POST", f"{DEMO}items/{item}/claim/")
    if what == "release":
        return rest_call(server.url, f"Bearer {key}", "POST", f"{DEMO}claims/{claim}/release/", {})
    report = {"kind": what, "summary": f"{what} while Redis is down"}
    return rest_call(server.url, f"Bearer {key}", "POST", f"{DEMO}claims/{claim}/reports/", report)


def work_written(step: tuple[str, str, bool, str], before: Work) -> Work:
    """The work once ``step`` wrote what it should, once, on top of ``before``."""
    what, status, adds_report, state = step
    if what == "claim":
        return state, before[1] + 1, status, 0
    return state, before[1], status, before[3] + adds_report


def work_verdict(answer: tuple[int, Any], before: Work, after: Work, written: Work) -> str:
    """``written`` (2xx, the write there once), ``refused`` (a readable 503, nothing written), or
    what was seen instead."""
    error = answer[1].get("error") if isinstance(answer[1], dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    if 200 <= answer[0] < 300 and after == written:
        return "written"
    if (answer[0], code) == (503, "unavailable") and after == before:
        return "refused"
    return f"{answer[0]} {str(answer[1])[:200]}: the work was {before}, is {after}"
