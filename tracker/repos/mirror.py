"""Bare mirrors of linked repositories (SPEC § 16): clone or fetch one, safely, within bounds.

Through the ``git`` command, run with :mod:`subprocess`, rather than a library: git is on every
server Ballet runs on, speaks ssh, https and local paths with the host's own ssh setup, and
``git grep``/``git log`` are what the read layer (``tracker/repos/reads.py``) needs anyway.
dulwich is pure Python and much slower on large packs; pygit2 needs libgit2 built in.

Nothing a repository holds runs here: no hooks (``core.hooksPath=/dev/null``, no templates), no
submodules (a mirror checks nothing out), no ``ext::`` transport and no protocol but the one the
source needs (``GIT_ALLOW_PROTOCOL``), no system or global configuration, no credential helper, no
prompt. Each git command runs in a process group of its own, killed whole once it passes the time
limit or the mirror being written passes the size cap. A credential reaches git only through
``GIT_ASKPASS`` (a script reading the child's environment): never an argument, a URL or a log, and
every error is scrubbed of it.

A fetch never touches the last good mirror: the new state is built beside it (a fresh clone, or a
copy of the mirror made of hard links: git replaces files, never writes into them) and swapped in
once it is complete and within the cap, in one step where Linux allows; a failure leaves the old
one as it was. Each fetch brings a pack; once there are more than ``MAX_PACKS``, the copy is
repacked into one before the swap.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

SSH_COMMAND: Final = "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new"
POLL_SECONDS: Final = 0.2  # how often a running command's time and size are checked
# A fetch adds a pack (``transfer.unpackLimit=1``); past this many, it repacks them into one, since
# every read looks through each pack in turn.
MAX_PACKS: Final = 16
MAX_ALTERNATES_DEPTH: Final = 5  # as git's own limit on alternates of alternates
ERROR_CHARS: Final = 1000
AT_FDCWD: Final = -100
RENAME_EXCHANGE: Final = 2
ASKPASS: Final = """#!/bin/sh
case "$1" in
  Username*) printf '%s\\n' "$BALLET_GIT_USERNAME" ;;
  *) printf '%s\\n' "$BALLET_GIT_PASSWORD" ;;
esac
"""


@dataclass(frozen=True)
class Source:
    """Where a mirror comes from: an https or ssh URL (with its credential: ``TOKEN`` or
    ``USERNAME:PASSWORD``), or a local path under ``[repositories] local_roots``."""

    location: str
    local: bool = False
    credential: str = ""


@dataclass(frozen=True)
class Limits:
    timeout_seconds: float
    max_bytes: int


@dataclass(frozen=True)
class Fetched:
    """What a fetch gave: the default branch's commit ("" if it has none) and the mirror's size,
    or why it failed (the last good mirror, if any, is unchanged)."""

    ok: bool
    commit: str = ""
    size_bytes: int = 0
    error: str = ""


class GitError(Exception):
    """A git command failed, ran too long or wrote too much; the message is scrubbed."""


def tree_size(path: Path) -> int:
    """Bytes of the files under ``path`` (links not followed)."""
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def read_folders(path: Path) -> list[Path]:
    """The folders git reads for the local repository at ``path``, resolved: its git folder (``path``
    itself if bare, ``path/.git``, or where a ``.git`` file points), the common folder a worktree's
    ``commondir`` names, its objects' folder, and every folder of objects an
    ``objects/info/alternates`` adds, as git follows them (five deep). Read from the files as git
    reads them, never by running git there."""
    git_dir = path / ".git"
    if git_dir.is_file():
        pointer = git_dir.read_text(errors="replace").strip()
        git_dir = path / pointer.removeprefix("gitdir:").strip()
    elif not git_dir.is_dir():
        git_dir = path
    folders = [git_dir]
    common = git_dir / "commondir"
    if common.is_file():
        folders.append(git_dir / common.read_text(errors="replace").strip())
    objects = [folders[-1] / "objects"]  # (a link out of the roots, as much as an alternate)
    folders += objects
    for _depth in range(MAX_ALTERNATES_DEPTH):
        found = []
        for folder in objects:
            alternates = folder / "info" / "alternates"
            if alternates.is_file():
                lines = alternates.read_text(errors="replace").splitlines()
                found += [
                    folder / line.strip() for line in lines if line.strip() and not line.startswith("#")
                ]
        folders += found
        objects = found
    return [Path(os.path.realpath(folder)) for folder in folders]


def scrub(text: str, credential: str) -> str:
    """``text`` without the credential, any part of it, or a password in a URL; at most 1000 chars."""
    secrets = {credential, *credential.split(":", 1)} if credential else set()
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    text = re.sub(r"(://[^/\s:@]+):[^/\s@]+@", r"\1:***@", text)
    return text.strip()[-ERROR_CHARS:]


def _environment(source: Source, askpass: Path) -> dict[str, str]:
    # USERNAME:PASSWORD, split at the first colon (a password may hold one); a lone token goes with
    # any username (GitHub and GitLab take any).
    username, _, password = (
        source.credential.partition(":") if ":" in source.credential else ("", "", source.credential)
    )
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/nonexistent"),  # ssh's known_hosts and keys
        "LANG": "C",
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": str(askpass),
        "SSH_ASKPASS": str(askpass),
        "GIT_SSH_COMMAND": SSH_COMMAND,
        "GIT_ALLOW_PROTOCOL": "file" if source.local else "https:ssh",
        "BALLET_GIT_USERNAME": username or "git",
        "BALLET_GIT_PASSWORD": password,
    }


def _options(source: Source) -> list[str]:
    file_allow = "always" if source.local else "never"
    pairs = [
        "core.hooksPath=/dev/null",
        "core.fsmonitor=false",
        "credential.helper=",
        "protocol.ext.allow=never",
        f"protocol.file.allow={file_allow}",
        "submodule.recurse=false",
        "fetch.recurseSubmodules=false",
        "gc.auto=0",  # no gc detached from the process group (it would outlive a kill)
        "transfer.unpackLimit=1",  # what a fetch brings stays one pack: no walk through loose objects
    ]
    return [part for pair in pairs for part in ("-c", pair)]


def _run(args: list[str], *, env: dict[str, str], limits: Limits, watch: Path, started: float) -> str:
    """Run ``git args``; its output, or GitError once it fails, passes the deadline (measured from
    ``started``) or ``watch`` passes the size cap; the whole process group is killed then."""
    git = shutil.which("git", path=env["PATH"])
    if git is None:
        raise GitError("git is not installed on this server.")
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(  # noqa: S603 - git, its arguments never parsed by a shell
            [git, *args], stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, start_new_session=True
        )
        problem = _watch(process, limits=limits, watch=watch, started=started)
        out.seek(0)
        output = out.read(64_000).decode(errors="replace")
    if problem:
        raise GitError(problem)
    if process.returncode != 0:
        lines = [line for line in output.splitlines() if line.strip()]
        raise GitError("git failed: " + " ".join(lines[-5:]) if lines else f"git exited {process.returncode}")
    return output


def _watch(process: subprocess.Popen[bytes], *, limits: Limits, watch: Path, started: float) -> str:
    """Wait for ``process``; what went wrong if it had to be killed, else ""."""
    while True:
        try:
            process.wait(timeout=POLL_SECONDS)
            return ""
        except subprocess.TimeoutExpired:
            pass
        problem = ""
        if time.monotonic() - started > limits.timeout_seconds:
            problem = f"Timed out after {limits.timeout_seconds:g} s."
        elif tree_size(watch) > limits.max_bytes:
            problem = f"The repository is larger than the cap of {limits.max_bytes // 2**20} MB."
        if problem:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return problem


def _copy(mirror: Path, into: Path) -> None:
    """``mirror`` copied to ``into`` as hard links (git replaces its files, never writes into
    them), but for the files git does rewrite in place."""
    shutil.copytree(mirror, into, copy_function=os.link, symlinks=True)
    for name in ("FETCH_HEAD", "config"):
        target = into / name
        if target.exists():
            target.unlink()
            shutil.copy2(mirror / name, target)


def _commit(*, mirror: Path, branch: str, env: dict[str, str], limits: Limits, started: float) -> str:
    try:
        out = _run(
            ["--git-dir", str(mirror), "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"],
            env=env,
            limits=limits,
            watch=mirror,
            started=started,
        )
    except GitError:
        return ""
    return out.strip()


def _build(source: Source, *, mirror: Path, work: Path, env: dict[str, str], limits: Limits) -> None:
    """The new state of the mirror, complete, at ``work``."""
    started = time.monotonic()
    if mirror.exists():
        _copy(mirror, work)
        git = ["--git-dir", str(work), *_options(source)]
        _run([*git, "remote", "set-url", "origin", "--", source.location], env=env, limits=limits,
             watch=work, started=started)  # fmt: skip
        _run([*git, "fetch", "--prune", "--no-recurse-submodules", "origin"], env=env, limits=limits,
             watch=work, started=started)  # fmt: skip
        if len(list((work / "objects" / "pack").glob("*.pack"))) > MAX_PACKS:
            _repack(git, work=work, env=env, limits=limits, started=started)
    else:
        clone = ["clone", "--mirror", "--template=", *(["--no-local"] if source.local else [])]
        _run([*_options(source), *clone, "--", source.location, str(work)], env=env, limits=limits,
             watch=work, started=started)  # fmt: skip


def _repack(git: list[str], *, work: Path, env: dict[str, str], limits: Limits, started: float) -> None:
    """The packs of ``work`` made one, within what is left of the fetch's time and the size cap. A
    repack that fails or is cut leaves the packs as they were (git removes the old ones only once the
    new one is whole) less its own unfinished files: the fetch stands, the next one tries again."""
    try:
        _run([*git, "repack", "-a", "-d", "-q"], env=env, limits=limits, watch=work, started=started)
    except GitError:
        packs = work / "objects" / "pack"
        for unfinished in [*packs.glob(".tmp-*"), *packs.glob("tmp_*")]:  # repack's, pack-objects'
            unfinished.unlink(missing_ok=True)


def mirror_fetch(source: Source, *, mirror: Path, branch: str, limits: Limits) -> Fetched:
    """Clone ``source`` into the bare mirror at ``mirror``, or fetch what is new into it; a failure
    keeps the mirror as it was and says why (scrubbed of the credential)."""
    mirror.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{mirror.name}-", dir=mirror.parent))
    try:
        askpass = scratch / "askpass"
        askpass.write_text(ASKPASS)
        askpass.chmod(0o700)
        env = _environment(source, askpass)
        work = scratch / "mirror.git"
        try:
            _build(source, mirror=mirror, work=work, env=env, limits=limits)
            size = tree_size(work)
            if size > limits.max_bytes:
                raise GitError(f"The repository is larger than the cap of {limits.max_bytes // 2**20} MB.")
        except (GitError, OSError) as exc:
            return Fetched(ok=False, error=scrub(str(exc), source.credential))
        commit = _commit(mirror=work, branch=branch, env=env, limits=limits, started=time.monotonic())
        _swap(work, mirror, scratch)
        return Fetched(ok=True, commit=commit, size_bytes=size)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _exchanged(one: Path, other: Path) -> bool:
    """Swap two folders in one step (Linux's ``renameat2`` with ``RENAME_EXCHANGE``), so that a
    reader never finds the mirror missing; False where the system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    return renameat2(AT_FDCWD, os.fsencode(one), AT_FDCWD, os.fsencode(other), RENAME_EXCHANGE) == 0


def _swap(work: Path, mirror: Path, scratch: Path) -> None:
    """``work`` becomes the mirror; the old one ends in ``scratch`` (removed with it)."""
    if mirror.exists():
        if _exchanged(work, mirror):
            return
        mirror.rename(scratch / "old.git")  # elsewhere: a moment without a mirror
    work.rename(mirror)


def mirror_remove(mirror: Path) -> None:
    """The mirror's folder gone, if it was there."""
    shutil.rmtree(mirror, ignore_errors=True)
