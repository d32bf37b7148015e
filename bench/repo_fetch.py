"""A linked repository's fetch (SPEC § 16, ``tracker/repos/mirror.py``): how long the worker's fetch
takes when nothing is new, and when one commit is, on the repository of ``bench/repo_reads.py``
(``--files`` files over ``--commits`` commits) linked as a local path.

Each fetch is the worker's whole one: a scratch copy of the mirror (hard links), ``git fetch`` in it,
the size check, the default branch's commit, the swap. Prints p50, p95 and max; no assertion on
time (docs/benchmarks.md). Issue 45's target: a fetch with nothing new under 1 s.

    .venv/bin/python bench/repo_fetch.py [--files 10000] [--runs 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.repo_reads import build, git, timed
from tracker.repos.mirror import Limits, Source, mirror_fetch

LIMITS = Limits(timeout_seconds=120, max_bytes=500 * 2**20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        build(root, args.files, args.commits)
        work, mirror = root / "work", root / "linked.git"
        source = Source(location=str(work), local=True)
        began = time.perf_counter()
        first = mirror_fetch(source, mirror=mirror, branch="main", limits=LIMITS)
        if not first.ok:
            raise SystemExit(f"the first fetch failed: {first.error}")
        print(f"first fetch (a clone) of {args.files:,} files: {time.perf_counter() - began:.2f} s")

        def unchanged() -> None:
            fetched = mirror_fetch(source, mirror=mirror, branch="main", limits=LIMITS)
            if not fetched.ok or fetched.commit != first.commit:
                raise SystemExit(f"the fetch went wrong: {fetched}")

        timed("fetch, nothing new", args.runs, unchanged)
        numbers = count()

        def one_new_commit() -> None:
            n = next(numbers)
            (work / f"change{n}.md").write_text(f"change {n}\n")
            git(work, "add", "-A")
            git(work, "commit", "-q", "-m", f"Change {n}")
            fetched = mirror_fetch(source, mirror=mirror, branch="main", limits=LIMITS)
            if not fetched.ok or fetched.commit == first.commit:
                raise SystemExit(f"the fetch missed the new commit: {fetched}")

        timed("fetch, one new commit", args.runs, one_new_commit)


if __name__ == "__main__":
    main()
