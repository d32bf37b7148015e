"""The release an upgrade starts from: the rolling upgrade's test runs its code, and the migrations
added since must be safe while it serves (docs/operations.md#upgrades)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The last commit before the latest migration (tracker 0010_repositories, added by 6fc4f34). When a
# commit adds a migration, move this to that commit's parent.
PREVIOUS_RELEASE = "21e6d0646a4d35e5d8167d977793694f5c3621cb"
APPS = ("tracker", "knowledge", "planner")


def previous_release_migrations() -> set[str]:
    """The migrations of Ballet's apps in the previous release, as ``app.name``."""
    listed = subprocess.run(
        [
            "git",
            "ls-tree",
            "-r",
            "--name-only",
            PREVIOUS_RELEASE,
            "--",
            *(f"{app}/migrations" for app in APPS),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.split()
    return {f"{Path(path).parts[0]}.{Path(path).stem}" for path in listed if Path(path).stem[:4].isdigit()}
