"""``/projects/{key}/code/{repo}/…``: a commit and a file of a project's linked repository, read
from its mirror (SPEC § 16), where a hash or a path written in a ticket, a comment or a report
links to (``tracker.repos.refs``).

Readers of the project (``tracker.read``) see them; anyone else gets 404, as for the project. The
commit page shows its message as text (never Markdown), its author, date and files, a denied file by
name alone; the file page shows the file at a ref with line numbers, bounded like the planner's
reads (``tracker.repos.reads``), a binary file described. A denied file is refused (403) and a
hash, ref or path that names nothing, or that could leave the tree, is a 404 page that says why:
never a traceback, never the content.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET

from tracker.models import Project, Repository
from tracker.repos import reads
from tracker.repos.plumbing import TIMEOUT_SECONDS, RepoError
from tracker.repos.refs import commit_url, file_url
from tracker.repos.selectors import mirror_path, repositories_of
from tracker.web.page_helpers import page_project, page_user, with_csp


def _options() -> dict[str, Any]:
    config = settings.BALLET_REPOSITORIES
    return {"deny": tuple(config.deny), "timeout": min(float(config.timeout_seconds), TIMEOUT_SECONDS)}


def _repository(project: Project, name: str) -> Repository:
    found = next((repo for repo in repositories_of(project) if repo.name == name), None)
    if found is None:
        raise Http404(f"No repository {name[:60]!r} in {project.key}.")
    return found


def _refused(request: HttpRequest, project: Project, repo: Repository, exc: RepoError) -> HttpResponse:
    """The read's refusal as a page: 403 for a denied file, 503 when git took too long, else 404."""
    status = 403 if exc.code == "denied" else 503 if exc.code == "timeout" else 404
    context = {"project": project, "repo": repo, "message": exc.message, "status": status}
    return render(request, "tracker/code_refused.html", context, status=status)


@require_GET
@login_required
@with_csp
def commit_page(request: HttpRequest, key: str, repo: str, sha: str) -> HttpResponse:
    """The commit ``sha`` of the repository ``repo``: message, author, date, files changed."""
    project = page_project(page_user(request), key)
    repository = _repository(project, repo)
    try:
        found = reads.commit(mirror_path(repository), sha, **_options())
    except RepoError as exc:
        return _refused(request, project, repository, exc)
    files = [
        {
            **change,
            "url": None
            if change.get("denied") or change["status"] == "D"
            else file_url(project.key, repository.name, found["sha"], change["path"]),
        }
        for change in found["files"]
    ]
    context = {
        "project": project,
        "repo": repository,
        "commit": found,
        "files": files,
        "when": parse_datetime(found["date"]),
        "parents": [
            (parent, commit_url(project.key, repository.name, parent)) for parent in found["parents"]
        ],
    }
    return render(request, "tracker/code_commit.html", context)


@require_GET
@login_required
@with_csp
def file_page(request: HttpRequest, key: str, repo: str, ref: str, path: str) -> HttpResponse:
    """The file ``path`` of the repository ``repo`` at ``ref``, with line numbers."""
    project = page_project(page_user(request), key)
    repository = _repository(project, repo)
    try:
        found = reads.read(mirror_path(repository), ref, path, **_options())
    except RepoError as exc:
        return _refused(request, project, repository, exc)
    rows = []
    if found["type"] == "file":
        for row in found["text"].split("\n") if found["text"] else []:
            number, _, text = row.partition("\t")
            rows.append((number.strip(), text))
    context = {
        "project": project,
        "repo": repository,
        "ref": ref,
        "file": found,
        "rows": rows,
        "markdown": found["path"].lower().endswith((".md", ".markdown")),
        "commit_url": commit_url(project.key, repository.name, found["commit"]),
        "target_url": found.get("target") and file_url(project.key, repository.name, ref, found["target"]),
    }
    return render(request, "tracker/code_file.html", context)
