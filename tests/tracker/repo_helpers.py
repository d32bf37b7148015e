"""Local Git repositories for the repository tests: made with the ``git`` command in tmp_path."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ballet.env import RepositoriesTable

# The tests' own git runs no hook: a hook test counts only what the mirror ran.
IDENTITY = [
    *("-c", "user.name=Tester", "-c", "user.email=tester@example.com", "-c", "commit.gpgsign=false"),
    *("-c", "core.hooksPath=/dev/null"),
]


def git(where: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *IDENTITY, *args],
        cwd=where,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def source_repo(where: Path, files: dict[str, str] | None = None) -> Path:
    """A repository at ``where`` on branch main with one commit of ``files``."""
    where.mkdir(parents=True)
    git(where, "init", "-q", "-b", "main")
    commit(where, files or {"README.md": "# Courtside\n"}, "First")
    return where


def commit(where: Path, files: dict[str, str], message: str) -> str:
    """Write ``files`` and commit them; the new commit's sha."""
    for name, text in files.items():
        path = where / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", message)
    return git(where, "rev-parse", "HEAD")


def configured(settings, tmp_path: Path, **changes: object) -> Path:
    """Mirrors under tmp_path/mirrors, local repositories allowed under tmp_path/src."""
    roots = tmp_path / "src"
    roots.mkdir(exist_ok=True)
    settings.REPOSITORIES_PATH = tmp_path / "mirrors"
    settings.BALLET_REPOSITORIES = RepositoriesTable(local_roots=(str(roots),), **changes)  # type: ignore[arg-type]
    return roots
