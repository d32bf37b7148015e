"""Reads of a repository's bare mirror: its tree, a file, a search, its log, a commit (SPEC § 16).

Pure functions over the mirror's path, each running the ``git`` command through
:mod:`tracker.repos.plumbing` (no shell, no configuration but ours, no hooks, literal pathspecs after
``--``, a timeout, a cap on what is read). A ref is checked as one (``plumbing.resolve``) and then
only its commit hash is passed on. Every answer is bounded (about 2,000 lines or 100 KB) and says
what it cut in ``cut``; a search leaves out files over 8 MB (``git grep`` inflates a file whole in
memory, and a 1 GB file compresses to a few MB under the mirror's size cap) and says so.

The deny list (globs matched, case-insensitively, against every component of a path and against
the whole path) is never shown: a denied file cannot be read, a search never greps it (pathspec
exclusions) and any hit in one is dropped again here, name and all. A tree listing names a denied
entry with ``denied: true`` and nothing else (no size, no hash): that a ``.env`` exists is no
secret, what it holds is. A commit's files name a denied file the same way. Symbolic links are
never followed. Every refusal is a :class:`RepoError` with a code and a message to act on.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from ballet.env import DEFAULT_DENY
from tracker.repos.plumbing import (
    SHA,
    TIMEOUT_SECONDS,
    Ran,
    RepoError,
    checked,
    clean_path,
    denied,
    first_line,
    git,
    resolve,
)

MAX_LINES = 2000  # lines of a file in one read
MAX_BYTES = 100_000  # of any one answer's text
MAX_SCAN_BYTES = 8_000_000  # of a file read to find the lines asked for
MAX_LINE_CHARS = 2000  # of one line of a file; a search hit's text is shorter
MAX_HIT_CHARS = 300
MAX_HITS = 200
MAX_HITS_PER_FILE = 20
MAX_ENTRIES = 1000  # of a tree listing
MAX_LOG = 100
MAX_COMMIT_FILES = 500
MAX_PATTERN_CHARS = 500
MAX_SEARCH_BYTES = MAX_SCAN_BYTES  # of a file a search greps: git grep inflates each blob whole
MAX_LARGE = 1000  # files over it left out of a search by name; more and the search is refused
MAX_TREE_BYTES = 64_000_000  # of a recursive listing (sizes and names, about 700,000 files)
BINARY_PROBE = 8000  # bytes git itself looks at for a NUL to call a file binary

_KINDS = {"040000": "dir", "120000": "symlink", "160000": "submodule"}
_MAGIC = (
    (b"\x89PNG", "PNG image"),
    (b"GIF8", "GIF image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"%PDF", "PDF document"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"\x1f\x8b", "gzip archive"),
    (b"\x7fELF", "ELF executable"),
)


# --- the tree ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    path: str
    kind: str  # file, dir, symlink, submodule
    object: str
    size: int | None


def _entries(
    mirror: Path, sha: str, spec: str, *, timeout: float, max_bytes: int
) -> tuple[list[_Entry], bool]:
    ran = checked(
        git(
            mirror,
            ["ls-tree", "-l", "-z", "--full-tree", sha, "--", *([spec] if spec else [])],
            timeout=timeout,
            max_bytes=max_bytes,
        ),
        timeout,
        "list the tree",
    )
    records = ran.out.split(b"\x00")
    if ran.cut or records[-1]:
        records = records[:-1]  # the last one was cut short
    entries = []
    for record in records:
        if not record:
            continue
        meta, _, raw = record.partition(b"\t")
        mode, _type, obj, size = meta.decode("ascii", "replace").split(maxsplit=3)
        entries.append(
            _Entry(
                path=raw.decode("utf-8", "replace"),
                kind=_KINDS.get(mode, "file"),
                object=obj,
                size=int(size) if size.strip().isdigit() else None,
            )
        )
    return entries, ran.cut


def _entry(mirror: Path, sha: str, path: str, *, timeout: float) -> _Entry | None:
    found, _ = _entries(mirror, sha, path, timeout=timeout, max_bytes=64_000)
    return next((entry for entry in found if entry.path == path), None)


def tree(
    mirror: Path,
    ref: str | None = None,
    path: str | None = None,
    *,
    deny: Sequence[str] = DEFAULT_DENY,
    limit: int = MAX_ENTRIES,
    timeout: float = TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """The entries of the directory ``path`` at ``ref``: name, type (file, dir, symlink,
    submodule), size of a file; a denied entry by name alone."""
    where = clean_path(path)
    if where and denied(where, deny):
        raise _denied(where)
    sha = resolve(mirror, ref, timeout=timeout)
    if where:
        entry = _entry(mirror, sha, where, timeout=timeout)
        if entry is None:
            raise _missing(where, ref)
        if entry.kind != "dir":
            raise RepoError(
                "not_a_directory", f"{where} is a {entry.kind}, not a directory: read it as a file."
            )
    found, cut = _entries(mirror, sha, f"{where}/" if where else "", timeout=timeout, max_bytes=limit * 400)
    prefix = f"{where}/" if where else ""
    entries = []
    for entry in found[:limit]:
        name = entry.path[len(prefix) :]
        if denied(entry.path, deny):
            entries.append({"name": name, "type": entry.kind, "denied": True})
        elif entry.kind == "file":
            entries.append({"name": name, "type": "file", "size": entry.size})
        else:
            entries.append({"name": name, "type": entry.kind})
    answer: dict[str, Any] = {"commit": sha, "path": where, "entries": entries}
    if cut or len(found) > limit:
        answer["cut"] = (
            f"Only the first {len(entries)} entries are shown; the directory has more: list a subdirectory."
        )
    return answer


def _denied(path: str) -> RepoError:
    return RepoError(
        "denied", f"{path} is denied by the repository deny list: it is never shown.", status=403
    )


def _missing(path: str, ref: str | None) -> RepoError:
    at = f" at {ref}" if ref else ""
    return RepoError("not_found", f"No {path!r} in the repository{at}.", status=404)


# --- a file ------------------------------------------------------------------------------------


def read(
    mirror: Path,
    ref: str | None,
    path: str,
    start: int = 1,
    lines: int = MAX_LINES,
    *,
    deny: Sequence[str] = DEFAULT_DENY,
    timeout: float = TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """Lines ``start``… of the file ``path`` at ``ref``, numbered; a binary file described, a symbolic
    link named with its target if that is inside the tree, never followed."""
    where = clean_path(path)
    if not where:
        raise RepoError("invalid_path", "Give the path of a file, not of the root directory.")
    if denied(where, deny):
        raise _denied(where)
    if start < 1 or lines < 1:
        raise RepoError("invalid_range", "start and lines count from 1.")
    sha = resolve(mirror, ref, timeout=timeout)
    entry = _entry(mirror, sha, where, timeout=timeout)
    if entry is None:
        raise _missing(where, ref)
    base: dict[str, Any] = {"commit": sha, "path": where}
    if entry.kind == "dir":
        raise RepoError("is_directory", f"{where} is a directory, not a file: list it instead.")
    if entry.kind == "submodule":
        return {
            **base,
            "type": "submodule",
            "text": f"A submodule at commit {entry.object}; its files are not here.",
        }
    if entry.kind == "symlink":
        return {**base, **_link(mirror, where, entry, deny, timeout=timeout)}
    size = entry.size or 0
    ran = checked(
        git(mirror, ["cat-file", "blob", entry.object], timeout=timeout, max_bytes=MAX_SCAN_BYTES),
        timeout,
        f"read {where}",
    )
    data = ran.out
    if b"\x00" in data[:BINARY_PROBE]:
        return {
            **base,
            "type": "binary",
            "size": size,
            "text": f"A binary file ({_kind(where, data)}, {size:,} bytes): not shown.",
        }
    return {
        **base,
        "type": "file",
        "size": size,
        **_numbered(data, start, min(lines, MAX_LINES), scanned=ran.cut),
    }


def _kind(path: str, data: bytes) -> str:
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    guessed, _ = mimetypes.guess_type(path, strict=False)
    return guessed or "unknown type"


def _numbered(data: bytes, start: int, lines: int, *, scanned: bool) -> dict[str, Any]:
    text = data.decode("utf-8", "replace")
    rows = text.split("\n")
    if rows and rows[-1] == "" and not scanned:
        rows.pop()  # the file's last newline ends its last line
    if scanned:
        rows = rows[:-1]  # the scan stopped inside this one
    total = len(rows)
    if start > max(total, 1):
        raise RepoError("invalid_range", f"The file has {total} lines: start at most at {max(total, 1)}.")
    shown: list[str] = []
    used = 0
    long_lines = 0
    for number in range(start, min(start + lines, total + 1)):
        row = rows[number - 1]
        if len(row) > MAX_LINE_CHARS:
            row = f"{row[:MAX_LINE_CHARS]}…"
            long_lines += 1
        numbered = f"{number:>6}\t{row}"
        size = len(numbered.encode()) + 1
        if shown and used + size > MAX_BYTES:
            break
        shown.append(numbered)
        used += size
    end = start + len(shown) - 1
    answer: dict[str, Any] = {"start": start, "end": end, "total_lines": total, "text": "\n".join(shown)}
    notes = [
        f"Lines {end + 1} to {total} not shown: read on with start {end + 1}." if end < total else "",
        f"Only the file's first {MAX_SCAN_BYTES:,} bytes can be read." if scanned else "",
        f"{long_lines} long line(s) cut at {MAX_LINE_CHARS:,} characters." if long_lines else "",
    ]
    if any(notes):
        answer["cut"] = " ".join(note for note in notes if note)
    return answer


def _link(mirror: Path, where: str, entry: _Entry, deny: Sequence[str], *, timeout: float) -> dict[str, Any]:
    ran = checked(
        git(mirror, ["cat-file", "blob", entry.object], timeout=timeout, max_bytes=4096),
        timeout,
        "read a link",
    )
    target = ran.out.decode("utf-8", "replace")
    outside = RepoError(
        "outside_tree", f"{where} is a symbolic link to a path outside the repository: it is not followed."
    )
    if ran.cut or "\x00" in target or target.startswith("/"):
        raise outside
    parts: list[str] = []
    for part in (*PurePosixPath(where).parent.parts, *target.split("/")):
        if part == "..":
            if not parts:
                raise outside
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    resolved = "/".join(parts)
    if denied(resolved, deny):
        return {"type": "symlink", "text": "A symbolic link to a denied path: it is never shown."}
    return {
        "type": "symlink",
        "target": resolved,
        "text": f"A symbolic link to {resolved} (not followed: read that path).",
    }


# --- search ------------------------------------------------------------------------------------


def _exclusions(deny: Sequence[str]) -> list[str]:
    """Pathspecs that keep ``git grep`` out of every denied path, at any depth."""
    specs = []
    for glob in deny:
        specs.extend([f":(exclude,icase){glob}", f":(exclude,icase)*/{glob}"])
    return specs


def search(
    mirror: Path,
    ref: str | None,
    pattern: str,
    path_glob: str | None = None,
    regex: bool = False,
    *,
    deny: Sequence[str] = DEFAULT_DENY,
    limit: int = MAX_HITS,
    timeout: float = TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """Lines matching ``pattern`` (a fixed string; ``regex``: an extended regular expression) in the
    files at ``ref`` (``path_glob``: those it matches), as ``git grep``; binary and denied files never."""
    if not pattern or "\x00" in pattern or "\n" in pattern:
        raise RepoError("invalid_pattern", "Give a pattern of one line, without NUL characters.")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise RepoError("invalid_pattern", f"The pattern is longer than {MAX_PATTERN_CHARS} characters.")
    specs = []
    if path_glob:
        glob = clean_path(path_glob, what="path_glob")
        if glob.startswith(":"):
            raise RepoError("invalid_path", "path_glob cannot start with ':'.")
        specs.append(glob)
    sha = resolve(mirror, ref, timeout=timeout)
    large = _large(str(mirror), sha, MAX_SEARCH_BYTES, MAX_LARGE, timeout)
    args = ["grep", "-I", "-n", "-z", "--no-color", "--no-textconv", f"--max-count={MAX_HITS_PER_FILE}"]
    args += ["-E" if regex else "-F", "-e", pattern, sha, "--", *specs, *_exclusions(deny)]
    args += [f":(exclude,literal){path}" for path in large]
    ran = git(mirror, args, timeout=timeout, max_bytes=MAX_BYTES * 4, literal=False)
    if ran.code not in (0, 1) and not ran.cut and not ran.timed_out:
        raise RepoError("invalid_pattern", f"Git could not search for that pattern: {first_line(ran.err)}")
    hits, more = _hits(ran, sha, deny, limit)
    answer: dict[str, Any] = {"commit": sha, "hits": hits}
    notes = []
    if ran.timed_out:
        notes.append(f"The search stopped after {timeout:g} s; narrow it with path_glob or a longer pattern.")
    elif more:
        notes.append(
            f"Only the first {len(hits)} hits are shown; narrow the search with path_glob or a pattern."
        )
    shown_large = [path for path in large if not denied(path, deny)]
    if shown_large:
        notes.append(
            f"{len(shown_large)} file(s) over {MAX_SEARCH_BYTES:,} bytes not searched "
            f"(such as {_printable(shown_large[0])[:200]}): read them with repo_read."
        )
    if notes:
        answer["cut"] = " ".join(notes)
    return answer


def _printable(path: str) -> str:
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


@lru_cache(maxsize=64)
def _large(mirror: str, sha: str, threshold: int, most: int, timeout: float) -> tuple[str, ...]:
    """The files at ``sha`` over ``threshold`` bytes (at most ``most``), which a search leaves out:
    ``git grep`` inflates every blob whole in memory (a 1 GB file that packs to 3 MB takes 1 GB a
    search). One ``ls-tree`` a commit (sizes from the objects' headers), remembered: a commit's tree
    never changes."""
    ran = checked(
        git(
            Path(mirror),
            ["ls-tree", "-r", "-l", "-z", "--full-tree", sha],
            timeout=timeout,
            max_bytes=MAX_TREE_BYTES,
        ),
        timeout,
        "list the files to search",
    )
    if ran.cut:
        raise RepoError("too_large", "The repository has too many files to search; read it with repo_tree.")
    large = []
    for record in ran.out.split(b"\x00"):
        meta, _, raw = record.partition(b"\t")
        size = meta.rsplit(b" ", 1)[-1].strip()
        if size.isdigit() and int(size) > threshold:
            large.append(raw.decode("utf-8", "surrogateescape"))
            if len(large) > most:
                raise RepoError(
                    "too_large",
                    f"The repository has more than {most} files over {threshold:,} bytes: it cannot be "
                    "searched; read its files with repo_read.",
                )
    return tuple(large)


def _hits(ran: Ran, sha: str, deny: Sequence[str], limit: int) -> tuple[list[dict[str, Any]], bool]:
    """``git grep -z -n`` output (``path NUL line NUL text LF``, a path may hold a newline and a
    text a NUL) as hits (path, line, text), none in a denied file; whether more were found than
    are shown."""
    hits: list[dict[str, Any]] = []
    more = ran.cut or ran.timed_out
    prefix = f"{sha}:".encode()
    out, at, used = ran.out, 0, 0
    while at < len(out):
        path_end = out.find(b"\x00", at)
        line_end = out.find(b"\x00", path_end + 1) if path_end >= 0 else -1
        text_end = out.find(b"\n", line_end + 1) if line_end >= 0 else -1
        if text_end < 0:
            break  # cut short
        raw, number, raw_text = out[at:path_end], out[path_end + 1 : line_end], out[line_end + 1 : text_end]
        at = text_end + 1
        if not raw.startswith(prefix) or not number.isdigit():
            continue
        path = raw[len(prefix) :].decode("utf-8", "replace")
        if denied(path, deny):  # excluded already; never trusted alone
            continue
        if len(hits) >= limit or used > MAX_BYTES:
            return hits, True
        text = raw_text.decode("utf-8", "replace").replace("\x00", " ")
        if len(text) > MAX_HIT_CHARS:
            text = f"{text[:MAX_HIT_CHARS]}…"
        hits.append({"path": path, "line": int(number), "text": text})
        used += len(path) + len(text) + 10
    return hits, more


# --- history -----------------------------------------------------------------------------------

_FORMAT = "%x1e%H%x1f%an%x1f%aI%x1f%s"
MAX_LOG_BYTES = 4_000_000  # the names of the files each commit changed, counted and never shown


def log(
    mirror: Path,
    ref: str | None = None,
    path: str | None = None,
    limit: int = 20,
    *,
    deny: Sequence[str] = DEFAULT_DENY,
    timeout: float = TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """The last ``limit`` commits of ``ref`` (touching ``path``): sha, author, date, subject and how
    many files each changed."""
    where = clean_path(path)
    if where and denied(where, deny):
        raise _denied(where)
    count = max(1, min(limit, MAX_LOG))
    sha = resolve(mirror, ref, timeout=timeout)
    args = ["log", "--no-color", "--no-ext-diff", "--no-textconv", "--no-mailmap", f"--format={_FORMAT}"]
    # The names alone (a tree diff, quoted one a line): a line count (--shortstat) reads every blob.
    args += ["--name-only", f"--max-count={count + 1}", sha, "--", *([where] if where else [])]
    ran = checked(git(mirror, args, timeout=timeout, max_bytes=MAX_LOG_BYTES), timeout, "read the log")
    records = ran.out.decode("utf-8", "replace").split("\x1e")[1:]
    if ran.cut:
        records = records[:-1]  # its files were cut short
    commits = []
    for record in records:
        head, _, names = record.partition("\n")
        fields = head.split("\x1f")
        if len(fields) != 4:
            continue
        commits.append(
            {
                "sha": fields[0],
                "author": fields[1][:200],
                "date": fields[2],
                "subject": fields[3][:300],
                "files_changed": sum(1 for name in names.split("\n") if name),
            }
        )
    answer: dict[str, Any] = {"commit": sha, "path": where, "commits": commits[:count]}
    if len(commits) > count or ran.cut:
        shown = len(answer["commits"])
        answer["cut"] = (
            f"Only the latest {shown} commits are shown: ask for more with limit (at most {MAX_LOG})."
        )
    if where and not commits and _entry(mirror, sha, where, timeout=timeout) is None:
        raise _missing(where, ref)
    return answer


def commit(
    mirror: Path, sha: str, *, deny: Sequence[str] = DEFAULT_DENY, timeout: float = TIMEOUT_SECONDS
) -> dict[str, Any]:
    """The commit ``sha`` (full or short): its message, author, date and the files it changed."""
    if not isinstance(sha, str) or not SHA.fullmatch(sha):
        raise RepoError("invalid_ref", f"{str(sha)[:100]!r} is not a commit hash.")
    full = resolve(mirror, sha, timeout=timeout)
    head = checked(
        git(
            mirror,
            ["log", "-1", "--no-color", "--no-mailmap", "--format=%H%x1f%an%x1f%aI%x1f%P%x1f%B", full, "--"],
            timeout=timeout,
            max_bytes=MAX_BYTES,
        ),
        timeout,
        "read the commit",
    )
    fields = head.out.decode("utf-8", "replace").split("\x1f", 4)
    if len(fields) != 5:
        raise RepoError("git_failed", "Git answered the commit in a shape not understood.")
    changes = checked(
        git(
            mirror,
            [
                "diff-tree",
                "--root",
                "-r",
                "-z",
                "--no-commit-id",
                "--name-status",
                "--no-renames",
                "--no-ext-diff",
                full,
                "--",
            ],
            timeout=timeout,
            max_bytes=MAX_BYTES * 4,
        ),
        timeout,
        "list the commit's files",
    )
    parts = changes.out.split(b"\x00")
    files = []
    for status, raw in zip(parts[0::2], parts[1::2], strict=False):
        if not status:
            continue
        path = raw.decode("utf-8", "replace")
        change: dict[str, Any] = {"status": status.decode("ascii", "replace"), "path": path}
        if denied(path, deny):
            change["denied"] = True
        files.append(change)
    answer: dict[str, Any] = {
        "sha": fields[0],
        "author": fields[1],
        "date": fields[2],
        "parents": fields[3].split(),
        "message": fields[4].strip()[:MAX_BYTES],
        "files": files[:MAX_COMMIT_FILES],
    }
    if len(files) > MAX_COMMIT_FILES or changes.cut:
        answer["cut"] = f"Only the first {len(answer['files'])} files are shown."
    return answer
