"""What a project's owners do with its linked Git repositories (SPEC § 16): link one, change its
branch or credential, unlink it (its mirror goes too), ask for a fetch; and the fetches themselves,
which the worker runs (``tracker/repo_tasks.py``; in the embedded mode the server,
``ballet/lifespan.py``) for every repository that is due.

Owners only (``project.admin``). Every input is checked here, whichever interface sent it: a name
of 1 to 50 lowercase letters, digits, ``-`` or ``_``, unique in the project; either an ``https://``
or ``ssh://`` URL with a host and no password in it, or a local path that resolves under one of
``[repositories] local_roots``; a branch name git would take; a credential (https only: ssh uses
the server's own keys) of at most 1000 characters; no NUL or other control character anywhere.
One bad field: a ValidationError naming each, nothing stored. The credential is kept encrypted
and never shown again (``has_credential``).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from tracker.commit_hooks import on_commit_robust
from tracker.errors import ValidationError
from tracker.models import Project, Repository
from tracker.repos.mirror import Fetched, Limits, Source, mirror_fetch, mirror_remove, read_folders
from tracker.repos.selectors import mirror_path, repository_get
from tracker.services.activity import Actor, activity_record
from tracker.services.webhooks import DeliveryBell
from tracker.trust import crypto
from tracker.trust.permissions import PROJECT_ADMIN, require

logger = logging.getLogger(__name__)

FETCH_TASK: Final = "tracker.fetch_repositories"
MAX_NAME: Final = 50
MAX_URL: Final = 2000
MAX_PATH: Final = 1000
MAX_BRANCH: Final = 200
MAX_CREDENTIAL: Final = 1000
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
NO_CREDENTIAL: Final = (
    "A credential is for an https URL: an ssh URL uses this server's ssh keys, a local path none."
)
READS_OUTSIDE: Final = (
    "The repository there reads from outside [repositories] local_roots (its .git file, a worktree's "
    "common folder, its objects folder or their alternates point there)."
)
NO_LONGER_ALLOWED: Final = (
    "The local path is no longer under [repositories] local_roots, or its repository now reads from "
    "outside them (its .git file, a worktree's common folder, its objects folder or their alternates)."
)
BAD_BRANCH = re.compile(r"(^[-/.])|([/.]$)|\.\.|//|@\{|[\s~^:?*\[\\]|\.lock$|/\.|^@$")

# Wakes the embedded server's fetch loop (ballet/lifespan.py) when an owner asks for a fetch.
bell = DeliveryBell()


def _text_errors(value: Any, *, limit: int, what: str) -> list[str]:
    if not isinstance(value, str):
        return ["Expected a string."]
    if not value.strip():
        return [f"Give the {what}."]
    if len(value) > limit:
        return [f"At most {limit} characters."]
    if CONTROL.search(value):
        return ["No control characters (NUL, newlines, tabs)."]
    return []


def _name_errors(name: Any) -> list[str]:
    problems = _text_errors(name, limit=MAX_NAME, what="repository a name")
    if not problems and not NAME.match(name.strip()):
        problems = ["Lowercase letters, digits, - and _, starting with a letter or digit."]
    return problems


def _url_errors(url: Any) -> list[str]:
    problems = _text_errors(url, limit=MAX_URL, what="URL")
    if problems:
        return problems
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
    except ValueError:
        return ["Not a URL."]
    if parts.scheme not in ("https", "ssh"):
        return ["An https:// or ssh:// URL (other schemes are refused; a local path goes in local_path)."]
    if not host or host.startswith("-") or " " in url.strip():
        return ["The URL needs a host."]
    if parts.password is not None:
        return ["No credential in the URL: give it as the credential, which is kept encrypted."]
    return []


def _path_errors(path: Any, extra_roots: tuple[str, ...] = ()) -> list[str]:
    problems = _text_errors(path, limit=MAX_PATH, what="path")
    if problems:
        return problems
    roots = (*settings.BALLET_REPOSITORIES.local_roots, *extra_roots)
    if not roots:
        return ["Local repositories are off on this server ([repositories] local_roots is empty)."]
    if not _under_roots(path.strip(), roots):
        return [f"The path must be under one of {', '.join(roots)}."]
    if not Path(path.strip()).is_dir():  # through its links, as its resolved path
        return ["No such folder."]
    if _reads_outside(path.strip(), roots):
        return [READS_OUTSIDE]
    return []


def _branch_errors(branch: Any) -> list[str]:
    problems = _text_errors(branch, limit=MAX_BRANCH, what="branch")
    if not problems and BAD_BRANCH.search(branch.strip()):
        problems = ["Not a branch name git accepts."]
    return problems


def _credential_errors(credential: Any) -> list[str]:
    if not isinstance(credential, str):
        return ["Expected a string."]
    if len(credential) > MAX_CREDENTIAL:
        return [f"At most {MAX_CREDENTIAL} characters."]
    if CONTROL.search(credential):
        return ["No control characters (NUL, newlines, tabs)."]
    return []


CHECKS: dict[str, Callable[[Any], list[str]]] = {
    "name": _name_errors,
    "url": _url_errors,
    "local_path": _path_errors,
    "default_branch": _branch_errors,
    "credential": _credential_errors,
}


def _checked(*, extra_roots: tuple[str, ...] = (), **fields: Any) -> dict[str, Any]:
    """``fields`` cleaned (the ones given: not None); a ValidationError naming every bad one.
    ``extra_roots``: folders a local path may also be under (the operator's seed_demo only)."""
    given = {name: value for name, value in fields.items() if value is not None}
    checks = {**CHECKS, "local_path": lambda path: _path_errors(path, extra_roots)}
    errors = {name: problems for name, value in given.items() if (problems := checks[name](value))}
    if errors:
        first = errors[next(iter(errors))]
        raise ValidationError(errors, "The repository was not saved: " + " ".join(first))
    cleaned = {name: value.strip() if name != "credential" else value for name, value in given.items()}
    if "local_path" in cleaned:
        cleaned["local_path"] = os.path.realpath(cleaned["local_path"])
    return cleaned


def _record(actor: Actor, project: Project, verb: str, repo: Repository, **data: Any) -> None:
    # Name and source only: never the credential.
    activity_record(
        actor=actor,
        organization_id=project.organization_id,
        project=project,
        verb=verb,
        target=f"repository:{repo.pk}",
        data={"name": repo.name, "source": repo.source, **data},
    )


def _source_errors(url: Any, local_path: Any) -> None:
    if (url is None) == (local_path is None):
        raise ValidationError(
            {"url": ["Give either an https:// or ssh:// URL, or a local path."]},
            "The repository was not saved: give either a URL or a local path.",
        )


def repository_link(
    *,
    actor: Actor,
    project: Project,
    name: Any,
    url: Any = None,
    local_path: Any = None,
    default_branch: Any = "main",
    credential: Any = None,
    extra_roots: tuple[str, ...] = (),
) -> Repository:
    """Link a repository to the project; its first fetch is queued. ``extra_roots``: folders a
    local path may be under besides ``[repositories] local_roots``, given only by an operator's
    command (``seed_demo``, for the demo's own repository), never from a request."""
    require(actor.user, project, PROJECT_ADMIN)
    _source_errors(url, local_path)
    cleaned = _checked(
        name=name,
        url=url,
        local_path=local_path,
        default_branch=default_branch,
        credential=credential,
        extra_roots=extra_roots,
    )
    if cleaned.get("credential") and not cleaned.get("url", "").lower().startswith("https:"):
        raise ValidationError({"credential": [NO_CREDENTIAL]}, NO_CREDENTIAL)
    secret = cleaned.pop("credential", "")
    taken = ValidationError({"name": ["Another repository of the project has this name."]})
    if Repository.objects.filter(project=project, name=cleaned["name"]).exists():
        raise taken
    with transaction.atomic():
        try:
            with transaction.atomic():  # a link of the same name at the same moment
                repo = Repository.objects.create(
                    project=project,
                    created_by=actor.user,
                    credential_encrypted=crypto.encrypt(secret) if secret else "",
                    fetch_requested_at=timezone.now(),
                    **cleaned,
                )
        except IntegrityError:
            raise taken from None
        _record(actor, project, "repository.linked", repo)
        on_commit_robust(fetch_kick)
    return repo


def repository_update(
    *, actor: Actor, project: Project, repository_id: int, default_branch: Any = None, credential: Any = None
) -> Repository:
    """Change the default branch or the credential (None: unchanged; "": none any more); a fetch
    is queued."""
    require(actor.user, project, PROJECT_ADMIN)
    repo = repository_get(project=project, repository_id=repository_id)
    cleaned = _checked(default_branch=default_branch, credential=credential)
    if cleaned.get("credential") and not repo.url.lower().startswith("https:"):
        raise ValidationError({"credential": [NO_CREDENTIAL]}, NO_CREDENTIAL)
    changes: dict[str, Any] = {}
    if "default_branch" in cleaned:
        changes["default_branch"] = cleaned["default_branch"]
    if "credential" in cleaned:
        secret = cleaned["credential"]
        changes["credential_encrypted"] = crypto.encrypt(secret) if secret else ""
    with transaction.atomic():
        if changes:
            Repository.objects.filter(pk=repo.pk).update(fetch_requested_at=timezone.now(), **changes)
            on_commit_robust(fetch_kick)
        repo.refresh_from_db()
        if changes:
            _record(actor, project, "repository.updated", repo, changes=sorted(cleaned))
    return repo


def repository_unlink(*, actor: Actor, project: Project, repository_id: int) -> None:
    """Unlink the repository; its mirror is removed once that commits."""
    require(actor.user, project, PROJECT_ADMIN)
    repo = repository_get(project=project, repository_id=repository_id)
    mirror = mirror_path(repo)
    with transaction.atomic():
        _record(actor, project, "repository.unlinked", repo)
        repo.delete()
        on_commit_robust(mirror_remove, mirror)


def repository_fetch_request(*, actor: Actor, project: Project, repository_id: int) -> Repository:
    """Ask for a fetch now (Fetch now): the worker, or the embedded server, runs it shortly."""
    require(actor.user, project, PROJECT_ADMIN)
    repo = repository_get(project=project, repository_id=repository_id)
    with transaction.atomic():
        Repository.objects.filter(pk=repo.pk).update(fetch_requested_at=timezone.now())
        on_commit_robust(fetch_kick)
    repo.refresh_from_db()
    return repo


def fetch_kick() -> None:
    """Wake whoever fetches: the embedded server's loop, or production's worker (a failed publish
    is logged: beat's run every minute fetches it then)."""
    if settings.ONE_PROCESS:
        bell.ring()
        return
    try:
        current_app.send_task(FETCH_TASK)
    except Exception:
        logger.warning("could not queue %s; the fetch waits for beat's next run", FETCH_TASK, exc_info=True)


# --- the fetches --------------------------------------------------------------------------------


def _limits() -> Limits:
    config = settings.BALLET_REPOSITORIES
    return Limits(timeout_seconds=config.timeout_seconds, max_bytes=config.max_mb * 2**20)


def repositories_due() -> list[int]:
    """Ids of the repositories to fetch now: asked for, never fetched, or fetched longer than
    ``fetch_minutes`` ago; none with a fetch on its way (unless that one's time is long up)."""
    now = timezone.now()
    stale = now - timedelta(seconds=3 * settings.BALLET_REPOSITORIES.timeout_seconds)
    idle = Q(fetching_since__isnull=True) | Q(fetching_since__lt=stale)
    due = (
        Q(fetch_requested_at__isnull=False)
        | Q(last_fetch_at__isnull=True)
        | Q(last_fetch_at__lt=now - timedelta(minutes=settings.BALLET_REPOSITORIES.fetch_minutes))
    )
    return list(Repository.objects.filter(idle & due).order_by("pk").values_list("pk", flat=True))


def _claim(repository_id: int) -> bool:
    now = timezone.now()
    stale = now - timedelta(seconds=3 * settings.BALLET_REPOSITORIES.timeout_seconds)
    idle = Q(fetching_since__isnull=True) | Q(fetching_since__lt=stale)
    claimed = Repository.objects.filter(Q(pk=repository_id) & idle).update(
        fetching_since=now, fetch_requested_at=None
    )
    return claimed == 1


def _still_allowed(path: str) -> bool:
    """Whether a linked local path is still under ``local_roots`` (or the demo's folder), and all
    git would read for it: a root the operator has since taken out, a folder since replaced by a
    link out of the roots, or a repository since pointed at one outside them, is fetched no more."""
    roots = (*settings.BALLET_REPOSITORIES.local_roots, str(settings.DEMO_REPOSITORY_ROOT))
    return _under_roots(path, roots) and not _reads_outside(path, roots)


def _under_roots(path: str, roots: tuple[str, ...]) -> bool:
    """Whether ``path``, its links resolved, is under one of ``roots`` (theirs resolved too)."""
    return _is_under(Path(os.path.realpath(path)), roots)


def _is_under(folder: Path, roots: tuple[str, ...]) -> bool:
    return any(folder.is_relative_to(os.path.realpath(root)) for root in roots)


def _reads_outside(path: str, roots: tuple[str, ...]) -> bool:
    """Whether git, asked for the repository at ``path``, would read a folder outside ``roots``:
    where its ``.git`` file points, a worktree's common folder, its objects folder and their
    alternates (``tracker.repos.mirror.read_folders``); an unreadable one counts as outside."""
    try:
        folders = read_folders(Path(os.path.realpath(path)))
    except (OSError, ValueError):  # (a NUL in a .git file's path)
        return True
    return not all(_is_under(folder, roots) for folder in folders)


def repository_fetch(repository_id: int) -> Repository | None:
    """Fetch one repository's mirror now and record how it went; None if it is gone or another
    fetch of it is on its way. A failure keeps the last good mirror, its commit and size."""
    if not _claim(repository_id):
        return None
    repo = Repository.objects.filter(pk=repository_id).first()
    if repo is None:
        return None
    credential = (crypto.decrypt(repo.credential_encrypted) or "") if repo.credential_encrypted else ""
    source = Source(location=repo.source, local=bool(repo.local_path), credential=credential)
    fetched = (
        mirror_fetch(source, mirror=mirror_path(repo), branch=repo.default_branch, limits=_limits())
        if not repo.local_path or _still_allowed(repo.local_path)
        else Fetched(ok=False, error=NO_LONGER_ALLOWED)
    )
    changes: dict[str, Any] = {"last_fetch_at": timezone.now(), "fetching_since": None}
    if fetched.ok:
        missing = (
            "" if fetched.commit else f"The default branch “{repo.default_branch}” is not in the repository."
        )
        changes.update(last_commit=fetched.commit, size_bytes=fetched.size_bytes, last_error=missing)
    else:
        changes["last_error"] = fetched.error
        logger.warning("fetching repository %s failed: %s", repo.pk, fetched.error)
    if not Repository.objects.filter(pk=repo.pk).update(**changes):  # unlinked meanwhile
        mirror_remove(mirror_path(repo))
        return None
    repo.refresh_from_db()
    return repo


def repositories_fetch_due() -> int:
    """Fetch every repository that is due, one after the other; how many were fetched."""
    fetched = 0
    for repository_id in repositories_due():
        try:
            fetched += repository_fetch(repository_id) is not None
        except Exception:
            logger.exception("fetching repository %s failed", repository_id)
            Repository.objects.filter(pk=repository_id).update(fetching_since=None)
    return fetched
