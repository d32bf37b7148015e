"""API keys: create one (its secret returned once, kept only as a hash), revoke one, note its use.

A key reads ``ballet_<prefix>.<secret>``: the prefix finds the row and is shown to
tell keys apart; the secret, 40 random letters and digits (about 238 bits), is
kept as its SHA-256, which is enough for a secret that cannot be guessed (a slow
password hash buys nothing there and costs every request). ``docs/api-keys.md``.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.crypto import get_random_string

from tracker.errors import ValidationError
from tracker.models import ApiKey, Notice, Project, Scope
from tracker.services.activity import Actor, activity_record
from tracker.trust.permissions import visible_projects

KEY_PREFIX = "ballet_"
PREFIX_CHARS = 12
SECRET_CHARS = 40
MAX_NAME = ApiKey._meta.get_field("name").max_length or 100
MAX_EXPIRY_DAYS = 3650
MAX_BOUND_PROJECTS = 50
LAST_USED_EVERY = timedelta(minutes=1)  # last_used_at is written at most this often per key


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def key_name_clean(name: object) -> str:
    """The name stripped: 1 to MAX_NAME characters on one line."""
    text = name.strip() if isinstance(name, str) else ""
    if not text or len(text) > MAX_NAME:
        raise ValidationError({"name": [f"A key's name is 1 to {MAX_NAME} characters."]})
    if any(
        unicodedata.category(char)[0] == "C" or unicodedata.category(char) in ("Zl", "Zp") for char in text
    ):
        raise ValidationError({"name": ["A key's name is one line without control characters."]})
    return text


def key_scopes_clean(scopes: Iterable[object]) -> list[str]:
    """The scopes named, in Scope's order; at least one, each known."""
    wanted = list(scopes)
    unknown = [str(scope)[:20] for scope in wanted if scope not in Scope.values]
    if unknown or not wanted:
        expected = ", ".join(Scope.values)
        raise ValidationError({"scopes": [f"Choose one or more of {expected}."]})
    return [scope for scope in Scope.values if scope in wanted]


def key_projects_clean(*, user: User, keys: Iterable[object]) -> list[Project]:
    """The projects ``keys`` name, each one ``user`` may read (an unknown project and one they
    cannot read are the same "No project X.")."""
    wanted = list(keys)
    if len(wanted) > MAX_BOUND_PROJECTS:
        raise ValidationError({"projects": [f"At most {MAX_BOUND_PROJECTS} projects."]})
    readable = {project.key: project for project in visible_projects(user)}
    unknown = [str(key)[:20] for key in wanted if not isinstance(key, str) or key not in readable]
    if unknown:
        raise ValidationError({"projects": [f"No project {', '.join(unknown)} that you can read."]})
    return [readable[key] for key in dict.fromkeys(str(key) for key in wanted)]


def key_create(
    *,
    user: User,
    name: str,
    scopes: Iterable[object],
    expires_in_days: int | None = None,
    projects: Iterable[Project] = (),
    created_by: User | None = None,
) -> tuple[ApiKey, str]:
    """A new key of ``user`` and the key string, which is never shown again. Bound to ``projects``
    (none: unbound), it acts only there (``tracker.trust.permissions.key_bind``); ``created_by``:
    who made it, its user unless named (an owner making an agent's key)."""
    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_EXPIRY_DAYS:
        raise ValidationError({"expires_in_days": [f"From 1 to {MAX_EXPIRY_DAYS} days, or none."]})
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    prefix = get_random_string(PREFIX_CHARS)
    secret = get_random_string(SECRET_CHARS)
    key = ApiKey.objects.create(
        user=user,
        name=key_name_clean(name),
        scopes=key_scopes_clean(scopes),
        prefix=prefix,
        secret_hash=secret_hash(secret),
        expires_at=expires_at,
        created_by=created_by or user,
    )
    bound = list(projects)
    if bound:
        key.projects.set(bound)
    return key, f"{KEY_PREFIX}{prefix}.{secret}"


@transaction.atomic
def key_revoke(*, key: ApiKey, by: User | None = None, project: Project | None = None) -> ApiKey:
    """Revoke ``key`` now; a revoked key stays revoked (and keeps its time). Revoked ``by`` someone
    else (a bound ``project``'s owner), its holder finds an inbox entry saying so."""
    now = timezone.now()
    revoked = ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=now)
    key.refresh_from_db(fields=["revoked_at"])
    if revoked and by is not None and by.pk != key.user_id:
        where = f" of {project.key}" if project is not None else ""
        Notice.objects.create(
            user_id=key.user_id,
            project=project,
            kind="key_revoked",
            title=f"{by.get_username()}, an owner{where}, revoked your API key {key.name} ({key.prefix})"[
                :300
            ],
            url="/keys/",
        )
        if project is not None:
            activity_record(
                actor=Actor(user=by),
                organization_id=project.organization_id,
                project=project,
                verb="key.revoked",
                target=f"user:{key.user.get_username()}",
                data={"key": key.prefix},
            )
    return key


def key_used(*, key: ApiKey, now: datetime | None = None) -> None:
    """Note that ``key`` authenticated a request: at most one write a minute per key, whichever
    process serves it (the row is written only if its time is older)."""
    now = now or timezone.now()
    stale = now - LAST_USED_EVERY
    if key.last_used_at is not None and key.last_used_at > stale:
        return
    older = Q(last_used_at__isnull=True) | Q(last_used_at__lte=stale)
    ApiKey.objects.filter(older, pk=key.pk).update(last_used_at=now)
    key.last_used_at = now
