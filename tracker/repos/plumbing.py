"""Running ``git`` on a repository's bare mirror for the read layer (``tracker/repos/reads.py``),
and the checks every read starts with: a path inside the tree, the deny list, a ref.

Never through a shell: a fixed argument list, with no system or global configuration, no hooks, no
replace objects and, unless a caller asks for globs, literal pathspecs (a file named ``-rf`` or
``:(glob)*`` is a path like any other, always after ``--``); a timeout kills the command, and only
as many bytes of its output as the caller asks for are ever read.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from tracker.errors import BalletError

TIMEOUT_SECONDS = 10.0  # of one git command of a read (a fetch has its own, longer)
MAX_PATH_CHARS = 4096

_GIT_OPTIONS = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "grep.patternType=basic",
    "--no-replace-objects",
)
REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/+~^-]*")
SHA = re.compile(r"[0-9a-fA-F]{4,64}")


class RepoError(BalletError):
    """A read refused or failed: ``code`` says which, ``message`` what to do."""

    def __init__(self, code: str, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def denied(path: str, deny: Sequence[str]) -> bool:
    """Whether ``path`` (``a/b/c``) matches the deny list: a glob against any component or the whole."""
    lowered = path.lower()
    names = [lowered, *lowered.split("/")]
    return any(fnmatchcase(name, glob.lower()) for glob in deny for name in names)


def clean_path(path: str | None, *, what: str = "path") -> str:
    """``path`` inside the tree as ``a/b/c`` ("" for the root); refused if it could leave the tree."""
    if path is None:
        return ""
    if "\x00" in path:
        raise RepoError("invalid_path", f"The {what} contains a NUL character.")
    if len(path) > MAX_PATH_CHARS:
        raise RepoError("invalid_path", f"The {what} is longer than {MAX_PATH_CHARS} characters.")
    if path.startswith("/"):
        raise RepoError(
            "invalid_path", f"{path[:200]!r} is an absolute path: give a path inside the repository."
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise RepoError("invalid_path", f"{path[:200]!r} leaves the repository ('..' is not allowed).")
    return "/".join(parts)


# --- running git -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    out: bytes
    code: int
    err: str
    cut: bool  # the output was longer than asked for: the rest was not read
    timed_out: bool


def _environment() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": tempfile.gettempdir(),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_OPTIONAL_LOCKS": "0",
    }


def git(mirror: Path, args: Sequence[str], *, timeout: float, max_bytes: int, literal: bool = True) -> Ran:
    """Run ``git`` on ``mirror`` with ``args``; at most ``max_bytes`` of its output are read."""
    if not (mirror / "HEAD").is_file():
        raise RepoError(
            "no_mirror", "The repository has not been fetched yet: try again after its first fetch."
        )
    command = [
        "git",
        *_GIT_OPTIONS,
        *(["--literal-pathspecs"] if literal else []),
        f"--git-dir={mirror}",
        *args,
    ]
    expired = threading.Event()
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(  # noqa: S603 - a fixed command and arguments, never a shell
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env=_environment(),
            cwd=mirror,
        )

        def expire() -> None:
            expired.set()
            process.kill()

        timer = threading.Timer(timeout, expire)
        timer.start()
        try:
            assert process.stdout is not None
            out = process.stdout.read(max_bytes + 1)
            cut = len(out) > max_bytes
            if cut:
                process.kill()
            process.stdout.close()
            code = process.wait()
        finally:
            timer.cancel()
            if process.poll() is None:  # the read failed: git never outlives its call
                process.kill()
                process.wait()
        err.seek(0)
        message = err.read(4000).decode("utf-8", "replace")
    return Ran(out[:max_bytes], code, message, cut, expired.is_set())


def checked(ran: Ran, timeout: float, what: str) -> Ran:
    if ran.timed_out:
        raise RepoError("timeout", f"Git took longer than {timeout:g} s to {what}; ask for less.")
    if ran.code != 0 and not ran.cut:
        raise RepoError("git_failed", f"Git could not {what}: {first_line(ran.err)}")
    return ran


def first_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else "no reason given."


# --- refs --------------------------------------------------------------------------------------


def resolve(mirror: Path, ref: str | None, *, timeout: float = TIMEOUT_SECONDS) -> str:
    """The commit hash ``ref`` (a branch, a tag, a full or short hash; None: HEAD) names in ``mirror``."""
    name = "HEAD" if ref is None else ref
    if not name or "\x00" in name or name.startswith("-") or ".." in name or "@{" in name:
        raise RepoError("invalid_ref", f"{name[:100]!r} is not a ref: give a branch, a tag or a commit hash.")
    if len(name) > 256 or not REF.fullmatch(name):
        raise RepoError("invalid_ref", f"{name[:100]!r} is not a ref: give a branch, a tag or a commit hash.")
    ran = git(
        mirror,
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}"],
        timeout=timeout,
        max_bytes=200,
    )
    if ran.timed_out:
        raise RepoError("timeout", f"Git took longer than {timeout:g} s to find {name!r}.")
    sha = ran.out.decode("ascii", "replace").strip()
    if ran.code != 0 or not SHA.fullmatch(sha):
        raise RepoError("unknown_ref", f"No branch, tag or commit {name!r} in the repository.", status=404)
    return sha
