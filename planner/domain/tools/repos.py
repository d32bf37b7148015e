"""Tools over the project's linked Git repositories, read only (SPEC § 16): repo_tree, repo_read,
repo_search, repo_log.

Offered only in a project that has a repository (``planner/domain/tools/__init__.py``
``definitions``); a call elsewhere is a readable error. The reads are
:mod:`tracker.repos.reads`' over the repository's bare mirror, with the configured deny list
(``[repositories] deny``): a denied file is never read, listed with its content, nor found. Any
reader of the project may call them (``tracker.read``: the project's readers, or in a question's
sub-chat what all its readers may). ``repository`` is a repository's name, needed only when the
project has more than one; ``ref`` is its default branch unless given.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from planner.domain.tools.base import JsonObject, ToolContext, ToolError, ToolSpec
from tracker.models import Repository
from tracker.repos import reads
from tracker.repos.plumbing import TIMEOUT_SECONDS, RepoError
from tracker.repos.selectors import mirror_path, repositories_of
from tracker.trust.permissions import TRACKER_READ


def _repository(ctx: ToolContext, args: JsonObject) -> Repository:
    """The repository the call names, or the project's only one."""
    linked = repositories_of(ctx.project)
    key = ctx.project.key
    if not linked:
        raise ToolError("no_repository", f"{key} has no linked repository: there is no code to read.")
    names = ", ".join(repo.name for repo in linked)
    name = args.get("repository")
    if name is None:
        if len(linked) == 1:
            return linked[0]
        raise ToolError("invalid_input", f"{key} has several repositories: name one in repository ({names}).")
    found = next((repo for repo in linked if repo.name == name), None)
    if found is None:
        raise ToolError("not_found", f"No repository {name[:60]!r} in {key}; there are {names}.")
    return found


def _options() -> dict[str, Any]:
    config = settings.BALLET_REPOSITORIES
    return {"deny": tuple(config.deny), "timeout": min(float(config.timeout_seconds), TIMEOUT_SECONDS)}


def _reading(read: Callable[..., JsonObject]) -> Callable[[ToolContext, JsonObject], JsonObject]:
    """A handler: the repository named, its mirror read with ``read(mirror, ref, args, options)``,
    the answer naming the repository and the ref read."""

    def handler(ctx: ToolContext, args: JsonObject) -> JsonObject:
        repo = _repository(ctx, args)
        ref = args.get("ref") or repo.default_branch
        try:
            answer = read(mirror_path(repo), ref, args, _options())
        except RepoError as exc:
            if exc.code == "no_mirror" and repo.last_error:
                raise RepoError(exc.code, f"{exc.message} The last fetch failed.") from exc
            raise
        return {"repository": repo.name, "ref": ref, **answer}

    return handler


def repo_tree(mirror: Path, ref: str, args: JsonObject, options: dict[str, Any]) -> JsonObject:
    return reads.tree(mirror, ref, args.get("path"), **options)


def repo_read(mirror: Path, ref: str, args: JsonObject, options: dict[str, Any]) -> JsonObject:
    start, lines = args.get("start", 1), args.get("lines", reads.MAX_LINES)
    return reads.read(mirror, ref, args["path"], start, lines, **options)


def repo_search(mirror: Path, ref: str, args: JsonObject, options: dict[str, Any]) -> JsonObject:
    pattern, regex = args["pattern"], args.get("regex", False)
    return reads.search(mirror, ref, pattern, args.get("path_glob"), regex, **options)


def repo_log(mirror: Path, ref: str, args: JsonObject, options: dict[str, Any]) -> JsonObject:
    return reads.log(mirror, ref, args.get("path"), args.get("limit", 20), **options)


def _schema(properties: JsonObject, required: list[str]) -> JsonObject:
    return {
        "type": "object",
        "properties": {"repository": REPOSITORY, **properties, "ref": REF},
        "required": required,
        "additionalProperties": False,
    }


REPOSITORY: JsonObject = {
    "type": "string",
    "minLength": 1,
    "maxLength": Repository._meta.get_field("name").max_length or 50,
    "description": "The repository's name; needed only when the project has more than one.",
}
REF: JsonObject = {
    "type": "string",
    "minLength": 1,
    "maxLength": 256,
    "description": "A branch, a tag or a commit hash; the repository's default branch if left out.",
}
PATH: JsonObject = {"type": "string", "maxLength": 4096, "description": "A path from the repository's root."}
DENY_NOTE = "Files on the repository's deny list (secrets, keys) are never shown."

SPECS = (
    ToolSpec(
        name="repo_tree",
        description="List a directory of the project's repository (the root by default): each entry's "
        "name, type (file, dir, symlink, submodule) and a file's size. A denied entry is marked denied. "
        f"At most {reads.MAX_ENTRIES} entries.",
        input_schema=_schema({"path": PATH}, []),
        permission=TRACKER_READ,
        handler=_reading(repo_tree),
    ),
    ToolSpec(
        name="repo_read",
        description="Read a file of the project's repository, with line numbers: from line start "
        f"(default 1), at most that many lines (default and at most {reads.MAX_LINES}) and about 100 KB; "
        f"cut says where to read on. Binary files are described, not shown. {DENY_NOTE}",
        input_schema=_schema(
            {
                "path": {**PATH, "minLength": 1},
                "start": {"type": "integer", "minimum": 1, "maximum": 100_000_000},
                "lines": {"type": "integer", "minimum": 1, "maximum": reads.MAX_LINES},
            },
            ["path"],
        ),
        permission=TRACKER_READ,
        handler=_reading(repo_read),
    ),
    ToolSpec(
        name="repo_search",
        description="Search the project's repository's files for a pattern, as git grep: a fixed string "
        "(case-sensitive) unless regex is true (an extended regular expression); path_glob narrows to "
        f"matching paths (such as src or *.py). Hits are path, line and text, at most {reads.MAX_HITS}. "
        f"{DENY_NOTE}",
        input_schema=_schema(
            {
                "pattern": {"type": "string", "minLength": 1, "maxLength": reads.MAX_PATTERN_CHARS},
                "path_glob": {"type": "string", "minLength": 1, "maxLength": 1000},
                "regex": {"type": "boolean"},
            },
            ["pattern"],
        ),
        permission=TRACKER_READ,
        handler=_reading(repo_search),
    ),
    ToolSpec(
        name="repo_log",
        description="The latest commits of the project's repository (touching path if given), newest "
        "first: sha, author, date, subject and how many files each changed. limit defaults to 20.",
        input_schema=_schema(
            {"path": PATH, "limit": {"type": "integer", "minimum": 1, "maximum": reads.MAX_LOG}}, []
        ),
        permission=TRACKER_READ,
        handler=_reading(repo_log),
    ),
)
NAMES = frozenset(spec.name for spec in SPECS)
