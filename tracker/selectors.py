"""Reads of the tracker: projects, items, the runnable query, changesets, skills, activity."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Exists, OuterRef, Prefetch, QuerySet

from ballet.env import PLANNER_KEYS, PlannerConfig, coerce
from tracker.errors import NotFoundError
from tracker.inputs import ascii_number
from tracker.models import (
    ActivityEvent,
    Changeset,
    Dependency,
    Item,
    Project,
    Skill,
    SkillPin,
    SkillVersion,
)
from tracker.models.plan import RESOLVED_STATES


def project_planner_config(project: Project) -> PlannerConfig:
    """The planner settings of ``project``: defaults, then the project's overrides."""
    defaults: PlannerConfig = settings.BALLET_PLANNER
    values = {name: getattr(defaults, name) for name in PLANNER_KEYS}
    overrides = project.settings if isinstance(project.settings, dict) else {}
    for name, (_, kind) in PLANNER_KEYS.items():
        if name in overrides:
            values[name] = coerce(f"{project.key} setting {name}", overrides[name], kind)
    return PlannerConfig(**values)


def project_get(*, key: str) -> Project:
    if "\x00" in key:  # PostgreSQL refuses NUL even in a lookup
        raise NotFoundError("Project not found.")
    try:
        return Project.objects.select_related("organization").get(key=key)
    except Project.DoesNotExist as exc:
        raise NotFoundError(f"Project {key} not found.") from exc


def item_list(
    *,
    project: Project,
    kind: str | None = None,
    state: str | None = None,
    epic: Item | None = None,
    milestone: Item | None = None,
) -> QuerySet[Item]:
    qs = Item.objects.filter(project=project).select_related("project", "epic__project", "milestone__project")
    if kind:
        qs = qs.filter(kind=kind)
    if state:
        qs = qs.filter(state=state)
    if epic is not None:
        qs = qs.filter(epic=epic)
    if milestone is not None:
        qs = qs.filter(milestone=milestone)
    return qs.order_by("number")


def item_number(project: Project, key: str) -> int | None:
    """The number in ``key`` if it is a key of ``project`` (``BAL-12`` → 12)."""
    prefix = f"{project.key}-"
    # Only ASCII digits within the column's range: ``BAL-²`` and ``BAL-99…9`` name no item.
    return ascii_number(key[len(prefix) :]) if key.startswith(prefix) else None


def item_get(*, project: Project, key: str) -> Item:
    """One item with its dependencies loaded; NotFoundError for an unknown key."""
    number = item_number(project, key)
    blockers = Prefetch("blocked_by", queryset=Dependency.objects.select_related("blocker__project"))
    blocking = Prefetch("blocking", queryset=Dependency.objects.select_related("blocked__project"))
    try:
        return (
            Item.objects.select_related("project", "epic__project", "milestone__project")
            .prefetch_related(blockers, blocking)
            .get(project=project, number=number or 0)
        )
    except Item.DoesNotExist as exc:
        raise NotFoundError(f"Item {key} not found in project {project.key}.") from exc


def runnable_tickets(*, project: Project) -> QuerySet[Item]:
    """Ready tickets whose blockers are all done or cancelled."""
    unresolved = Dependency.objects.filter(blocked=OuterRef("pk")).exclude(blocker__state__in=RESOLVED_STATES)
    return (
        Item.objects.filter(project=project, kind="ticket", state="ready")
        .exclude(Exists(unresolved))
        .select_related("project", "epic__project", "milestone__project")
        .order_by("number")
    )


def changeset_list(*, project: Project, status: str | None = None) -> QuerySet[Changeset]:
    qs = Changeset.objects.filter(project=project).select_related("project", "proposed_by", "decided_by")
    return qs.filter(status=status) if status else qs


def changeset_get(*, project: Project, number: int) -> Changeset:
    if not 0 < number < 2**31:  # out of the column's range: cannot exist, and must not reach the database
        raise NotFoundError(f"Changeset #{number} not found in project {project.key}.")
    try:
        return changeset_list(project=project).get(number=number)
    except Changeset.DoesNotExist as exc:
        raise NotFoundError(f"Changeset #{number} not found in project {project.key}.") from exc


@dataclass(frozen=True)
class EffectiveSkill:
    """A skill as a project uses it: the pinned version, else the latest."""

    skill: Skill
    version: SkillVersion
    pinned: bool
    latest_version: int

    @property
    def name(self) -> str:
        return self.skill.name

    @property
    def scope(self) -> str:
        return self.skill.scope


def skill_effective_list(*, project: Project) -> list[EffectiveSkill]:
    """The project's skills and its organization's, the project's shadowing by name."""
    return _effective_skills(project)


def _effective_skills(project: Project, only: str | None = None) -> list[EffectiveSkill]:
    """The effective skills of ``project``; with ``only``, just the one of that name (if any)."""
    skills = Skill.objects.filter(organization_id=project.organization_id, project__isnull=True) | (
        Skill.objects.filter(project=project)
    )
    if only is not None:
        skills = skills.filter(name=only)
    skills = skills.prefetch_related(
        Prefetch("versions", queryset=SkillVersion.objects.select_related("author"))
    )
    pins = dict(SkillPin.objects.filter(project=project).values_list("skill_id", "version"))
    chosen: dict[str, Skill] = {}
    for skill in skills:
        current = chosen.get(skill.name)
        if current is None or (skill.project_id and not current.project_id):
            chosen[skill.name] = skill
    result = []
    for name in sorted(chosen):
        effective = _effective(chosen[name], pins.get(chosen[name].pk))
        if effective is not None:
            result.append(effective)
    return result


def _effective(skill: Skill, pin: int | None) -> EffectiveSkill | None:
    versions = {v.version: v for v in skill.versions.all()}
    if not versions:
        return None
    latest = max(versions)
    pinned = pin is not None and pin in versions
    version = versions[pin] if pinned and pin is not None else versions[latest]
    return EffectiveSkill(skill=skill, version=version, pinned=pinned, latest_version=latest)


def skill_resolve(*, project: Project, name: str) -> EffectiveSkill:
    """The skill ``name`` as ``project`` uses it; NotFoundError if it has none."""
    for effective in _effective_skills(project, name):
        if effective.name == name:
            return effective
    raise NotFoundError(f"Skill {name!r} not found for project {project.key}.")


def activity_since(*, organization_id: int, after_seq: int, limit: int = 200) -> list[ActivityEvent]:
    """Events of the organization after ``after_seq``, oldest first, at most ``limit``."""
    return list(
        ActivityEvent.objects.filter(organization_id=organization_id, seq__gt=after_seq)
        .select_related("project", "on_behalf_of")
        .order_by("seq")[:limit]
    )
