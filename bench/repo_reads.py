"""The planner's repository reads (SPEC § 16): how long ``repo_search``, ``repo_read``, ``repo_tree``
and ``repo_log`` take over a bare mirror, without the tool layer (the read layer alone:
``tracker/repos/reads.py``, which is where the time goes: one to three ``git`` processes a call).

Builds a throwaway repository of ``--files`` files (default 10,000: a hundred folders of a hundred
Python-like files of about 60 lines, over ``--commits`` commits), mirrors it with
``git clone --mirror --no-local`` as the worker does (one pack: a plain local clone hard-links the
source's loose objects, and a search through 10,000 loose objects took three times as long), then
runs each read ``--runs`` times:

- search: a fixed string found in a few files, one found in every file (cut at the hit bound),
  and an extended regex;
- read: a 60-line file, and 2,000 lines of a 20,000-line file;
- tree: the root and a folder of a hundred files; log: the last 20 commits.

Prints p50, p95 and max of each; no assertion on time (docs/benchmarks.md). The targets of issue 45:
search of 10,000 files under 200 ms p50, a read under 20 ms.

    .venv/bin/python bench/repo_reads.py [--files 10000] [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracker.repos import reads

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=True, capture_output=True)


def build(root: Path, files: int, commits: int) -> Path:
    work = root / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    per_commit = max(1, files // commits)
    for start in range(0, files, per_commit):
        for n in range(start, min(files, start + per_commit)):
            path = work / f"pkg{n // 100:03d}" / f"module{n % 100:03d}.py"
            path.parent.mkdir(exist_ok=True)
            body = "".join(f"def handler_{n}_{line}(request):\n    return {line}\n\n" for line in range(20))
            marker = "def book_court(court, slot):\n    return court\n" if n % 997 == 0 else ""
            path.write_text(f'"""Module {n}: common_marker."""\n{marker}{body}')
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", f"Files from {start}")
    (work / "big.py").write_text("".join(f"value_{n} = {n}\n" for n in range(20_000)))
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "A big file")
    mirror = root / "mirror.git"
    git(root, "clone", "-q", "--mirror", "--no-local", str(work), str(mirror))
    return mirror


def timed(name: str, runs: int, call: Callable[[], Any]) -> None:
    call()  # warm the page cache
    seconds = []
    for _ in range(runs):
        began = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - began)
    seconds.sort()
    p50, p95 = statistics.median(seconds), seconds[min(len(seconds) - 1, int(len(seconds) * 0.95))]
    print(
        f"{name:<44} p50 {p50 * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   max {seconds[-1] * 1000:7.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        began = time.perf_counter()
        mirror = build(Path(folder), args.files, args.commits)
        print(f"built and mirrored {args.files:,} files in {time.perf_counter() - began:.1f} s")
        timed("repo_search fixed, a few hits", args.runs, lambda: reads.search(mirror, "main", "book_court"))
        timed(
            "repo_search fixed, hits in every file (cut)",
            args.runs,
            lambda: reads.search(mirror, "main", "common_marker"),
        )
        timed(
            "repo_search regex",
            args.runs,
            lambda: reads.search(mirror, "main", r"def book_\w+\(", regex=True),
        )
        timed("repo_read 60 lines", args.runs, lambda: reads.read(mirror, "main", "pkg001/module042.py"))
        timed("repo_read 2,000 of 20,000 lines", args.runs, lambda: reads.read(mirror, "main", "big.py"))
        timed("repo_tree root", args.runs, lambda: reads.tree(mirror, "main"))
        timed("repo_tree a folder of 100 files", args.runs, lambda: reads.tree(mirror, "main", "pkg007"))
        timed("repo_log 20 commits", args.runs, lambda: reads.log(mirror, "main"))


if __name__ == "__main__":
    main()
