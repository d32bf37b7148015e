"""Skills: create, add versions, pin a project to a version."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction
from django.db.models import Max

from tracker.db.locks import locked as row_locked
from tracker.errors import PermissionDeniedError, ValidationError
from tracker.models import Project, Skill, SkillPin, SkillVersion
from tracker.search.types import SKILL
from tracker.services.activity import Actor, activity_record
from tracker.tasks import search_index_on_commit
from tracker.trust.permissions import SKILL_WRITE, AnyUser, has_permission, require

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,99}$")
MAX_BODY = 100_000


def _check(name: Any, body: Any) -> None:
    errors: dict[str, list[str]] = {}
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        errors["name"] = ["A skill name is a slug: lowercase letters, digits and '-', at most 100."]
    if not isinstance(body, str) or not body.strip():
        errors["body"] = ["Expected the SKILL.md text."]
    elif len(body) > MAX_BODY:
        errors["body"] = [f"At most {MAX_BODY} characters."]
    if errors:
        raise ValidationError(errors)


def skill_organization_writable(*, user: AnyUser | None, organization_id: int) -> bool:
    """May ``user`` write the organization's skills: skill.write in every one of its projects?"""
    projects = list(Project.objects.filter(organization_id=organization_id).values_list("pk", flat=True))
    return bool(projects) and all(has_permission(user, pk, SKILL_WRITE) for pk in projects)


def _require_everywhere(actor: Actor, project: Project) -> None:
    """Refuse unless ``actor`` holds skill.write in every project of ``project``'s organization."""
    if not skill_organization_writable(user=actor.user, organization_id=project.organization_id):
        # Projects the actor cannot read stay unnamed: only that some project is missing is said.
        raise PermissionDeniedError(
            "You need skill.write in every project of the organization to write an organization skill."
        )


@transaction.atomic
def skill_version_create(
    *, actor: Actor, project: Project, name: Any, body: Any, organization_scope: bool = False
) -> SkillVersion:
    """Add a version of skill ``name`` (creating the skill at version 1).

    An organization-scoped skill is written from one of the organization's
    projects, by someone who holds ``skill.write`` in every project of the
    organization: it reaches all their planners (docs/domain.md#skills).
    """
    require(actor.user, project, SKILL_WRITE)
    if organization_scope:
        _require_everywhere(actor, project)
    _check(name, body)
    skill, created = row_locked(Skill.objects.all()).get_or_create(
        organization_id=project.organization_id,
        project=None if organization_scope else project,
        name=name,
    )
    latest = skill.versions.aggregate(latest=Max("version"))["latest"] or 0
    version = SkillVersion.objects.create(skill=skill, version=latest + 1, body=body, author=actor.user)
    activity_record(
        actor=actor,
        organization_id=project.organization_id,
        project=None if organization_scope else project,
        verb="skill.created" if created else "skill.version_created",
        target=f"skill:{name}",
        data={"version": version.version, "scope": skill.scope},
    )
    search_index_on_commit(SKILL, [skill.pk])
    return version


@transaction.atomic
def skill_pin_set(*, actor: Actor, project: Project, skill: Skill, version: int | None) -> None:
    """Pin ``project`` to ``version`` of ``skill``, or unpin it with None."""
    require(actor.user, project, SKILL_WRITE)
    if version is None:
        SkillPin.objects.filter(project=project, skill=skill).delete()
    else:
        if not skill.versions.filter(version=version).exists():
            raise ValidationError({"pin": [f"Skill {skill.name} has no version {version}."]})
        SkillPin.objects.update_or_create(project=project, skill=skill, defaults={"version": version})
    activity_record(
        actor=actor,
        organization_id=project.organization_id,
        project=project,
        verb="skill.pinned" if version is not None else "skill.unpinned",
        target=f"skill:{skill.name}",
        data={"version": version},
    )
