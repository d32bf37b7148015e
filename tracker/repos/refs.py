"""Commit hashes and repository paths named in text people and agents write, linked to their pages
(SPEC § 16, docs/domain.md#links).

A token is linked only if it names something real in one of the project's repositories, checked
against the mirror; anything else stays plain text:

- a commit: 7 to 40 lowercase hex characters, not all digits (a number is no hash), that
  ``git log --no-walk --ignore-missing`` finds as a commit (one command per repository for every
  token of a page); a hash found in several repositories links to the first by name;
- a file: ``repo:path/to/file`` (the repository by name, any file path) or a bare path with at
  least one slash and an extension (``src/app/models.py``: no false positive on a word), that
  ``git ls-tree`` finds at the repository's default branch (one command per repository).

A denied path (``[repositories] deny``) is never linked. Links go into already sanitized HTML
(:func:`ballet.markdown.render`'s output), in the text between tags outside links, ``pre`` and
``code``; an inline ``<code>`` whose whole text is a hash or a path is wrapped in the link. A page
without such tokens, or a project without repositories, runs no ``git`` and no query.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape, unescape

from django.conf import settings
from django.urls import reverse

from tracker.models import Project, Repository
from tracker.repos.plumbing import RepoError, checked, denied, git, resolve
from tracker.repos.selectors import mirror_path, repositories_of

MAX_TOKENS = 100  # of each kind looked up for one page
TIMEOUT = 5.0

SHA_TOKEN = re.compile(r"(?<![\w/.:-])([0-9a-f]{7,40})(?![\w/-])")
_SEGMENT = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
PATH_TOKEN = re.compile(
    rf"(?<![\w/.:@-])(?:([a-z0-9][a-z0-9_-]{{0,49}}):)?((?:{_SEGMENT}/)*{_SEGMENT}\.[A-Za-z0-9]{{1,10}})"
    r"(?![\w/-]|\.\w)"
)
_TAG = re.compile(r"(<[^>]*>)")
_SKIP = ("a", "pre")
_NAME = re.compile(r"</?([A-Za-z0-9]*)")


def commit_url(project_key: str, repo: str, sha: str) -> str:
    return reverse("code-commit", args=[project_key, repo, sha])


def file_url(project_key: str, repo: str, ref: str, path: str) -> str:
    return reverse("code-file", args=[project_key, repo, ref, path])


@dataclass
class CodeLinks:
    """The commits and files of a page's text that exist, as their pages' addresses, by token."""

    project_key: str = ""
    commits: dict[str, str] = field(default_factory=dict)  # token -> url
    files: dict[str, str] = field(default_factory=dict)  # the token as written -> url

    def __bool__(self) -> bool:
        return bool(self.commits or self.files)


def _candidates(texts: Iterable[str]) -> tuple[list[str], list[tuple[str | None, str]]]:
    shas: dict[str, None] = {}
    paths: dict[tuple[str | None, str], None] = {}
    for text in texts:
        for match in SHA_TOKEN.finditer(text):
            if not match.group(1).isdigit():
                shas[match.group(1)] = None
        for match in PATH_TOKEN.finditer(text):
            repo, path = match.group(1), match.group(2)
            if repo or "/" in path:
                paths[(repo, path)] = None
    return list(shas)[:MAX_TOKENS], list(paths)[:MAX_TOKENS]


def code_token(token: str) -> bool:
    """Whether ``token`` alone is a hash or a path as :func:`code_links` looks them up."""
    sha = SHA_TOKEN.fullmatch(token)
    if sha:
        return not token.isdigit()
    path = PATH_TOKEN.fullmatch(token)
    return bool(path and (path.group(1) or "/" in path.group(2)))


def _commits(repo: Repository, tokens: list[str]) -> dict[str, str]:
    """The tokens that are commits of ``repo``'s mirror, with their full hashes."""
    ran = checked(
        git(
            mirror_path(repo),
            ["log", "--no-walk", "--ignore-missing", "--format=%H", *tokens, "--"],
            timeout=TIMEOUT,
            max_bytes=64_000,
        ),
        TIMEOUT,
        "find the commits",
    )
    found = ran.out.decode("ascii", "replace").split()
    return {token: full for token in tokens for full in found if full.startswith(token)}


def _files(repo: Repository, paths: list[str]) -> tuple[str, set[str]]:
    """The ``paths`` that are files (or links) at ``repo``'s default branch, and the ref their
    links name: the branch, or its commit if the branch's name holds a slash (no page address can)."""
    sha = resolve(mirror_path(repo), repo.default_branch, timeout=TIMEOUT)
    ran = checked(
        git(
            mirror_path(repo),
            ["ls-tree", "-z", "--full-tree", sha, "--", *paths],
            timeout=TIMEOUT,
            max_bytes=64_000,
        ),
        TIMEOUT,
        "find the files",
    )
    found = set()
    for record in ran.out.split(b"\x00"):
        meta, _, raw = record.partition(b"\t")
        if raw and not meta.startswith(b"040000"):
            found.add(raw.decode("utf-8", "replace"))
    return (sha if "/" in repo.default_branch else repo.default_branch), found


def code_links(*, project: Project, texts: Iterable[str]) -> CodeLinks:
    """The hashes and paths in ``texts`` that name a commit or a file of ``project``'s repositories
    (checked against their mirrors), as their pages' addresses; a repository not fetched yet, or
    whose git fails, links nothing."""
    shas, paths = _candidates(texts)
    links = CodeLinks(project_key=project.key)
    if not shas and not paths:
        return links
    repos = repositories_of(project)
    deny = tuple(settings.BALLET_REPOSITORIES.deny)
    wanted = [(name, path) for name, path in paths if not denied(path, deny)]
    for repo in repos:
        left = [sha for sha in shas if sha not in links.commits]
        try:
            for token, full in (_commits(repo, left) if left else {}).items():
                links.commits[token] = commit_url(project.key, repo.name, full)
        except RepoError:
            pass  # not fetched yet, or git failed: its commits stay text
        mine = [path for name, path in wanted if name in (None, repo.name)]
        try:
            ref, present = _files(repo, list(dict.fromkeys(mine))) if mine else ("", set())
        except RepoError:
            continue
        for name, path in wanted:
            written = f"{name}:{path}" if name else path
            if path in present and name in (None, repo.name) and written not in links.files:
                links.files[written] = file_url(project.key, repo.name, ref, path)
    return links


def _anchor(url: str, inner: str) -> str:
    return f'<a href="{escape(url)}" class="code-ref">{inner}</a>'


def _in_text(text: str, links: CodeLinks) -> str:
    def sha(match: re.Match[str]) -> str:
        url = links.commits.get(match.group(1))
        return _anchor(url, match.group(0)) if url else match.group(0)

    def path(match: re.Match[str]) -> str:
        url = links.files.get(unescape(match.group(0)))
        return _anchor(url, match.group(0)) if url else match.group(0)

    # Paths first: a hash inside a linked path is left alone (inside the new <a>, split below).
    parts = _TAG.split(PATH_TOKEN.sub(path, text) if links.files else text)
    for index in range(0, len(parts), 2):
        if links.commits and not (index and parts[index - 1].startswith("<a ")):
            parts[index] = SHA_TOKEN.sub(sha, parts[index])
    return "".join(parts)


def linked_html(html: str, links: CodeLinks) -> str:
    """Sanitized ``html`` with the hashes and paths of ``links`` linked: in the text outside links,
    ``pre`` and ``code``; an inline ``<code>`` holding one alone becomes a link around it."""
    if not links:
        return html
    parts = _TAG.split(html)
    depth = code = 0
    for index, part in enumerate(parts):
        if index % 2:
            found = _NAME.match(part)
            name = found.group(1).lower() if found else ""
            step = -1 if part.startswith("</") else 1
            if name in _SKIP:
                depth += step
            elif name == "code":
                code += step
            continue
        if depth or not part:
            continue
        if code:
            opener, closer = parts[index - 1], parts[index + 1] if index + 1 < len(parts) else ""
            token = unescape(part)
            url = links.files.get(token) or links.commits.get(token)
            if url and opener == "<code>" and closer == "</code>":
                parts[index - 1] = f'<a href="{escape(url)}" class="code-ref"><code>'
                parts[index + 1] = "</code></a>"
            continue
        parts[index] = _in_text(part, links)
    return "".join(parts)
