"""Reads of the tracker: projects, items, the runnable query, changesets, skills, search, activity,
and (from :mod:`tracker.work_selectors`) claims and reports.

The REST API and the planner tools read through these functions, so what a
filter means, the order of a list and who sees what are defined here once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Case, Exists, OuterRef, Prefetch, Q, QuerySet, Subquery, Value, When
from django.utils import timezone

from ballet.env import PlannerConfig, WorkConfig, with_overrides
from tracker.db import sql
from tracker.errors import NotFoundError, ValidationError
from tracker.inputs import MAX_BIG_ID, ascii_number
from tracker.models import (
    ActivityEvent,
    ApiKey,
    Changeset,
    Claim,
    Dependency,
    Item,
    ItemKind,
    Project,
    Skill,
    SkillPin,
    SkillVersion,
)
from tracker.models.plan import PRIORITY_RANK, RESOLVED_STATES
from tracker.search import ITEM, SKILL, SearchHit, project_search
from tracker.trust.permissions import SKILL_READ, Principal, has_permission, visible_projects

# Claims and reports, re-exported: REST, the MCP tools and the planner read them from here.
from tracker.work_selectors import (  # noqa: F401
    claim_as_read,
    claim_get,
    claim_list,
    claims_active_by_item,
    claims_lapsed,
    final_reports,
    held,
    lapsed,
    lease_ran_out,
    lease_sweep_finished_at,
    lease_sweep_overdue,
    reports_of,
    reports_on,
    utc_minute,
)


def project_planner_config(project: Project) -> PlannerConfig:
    """The planner settings of ``project``: defaults, then the project's overrides."""
    defaults: PlannerConfig = settings.BALLET_PLANNER
    return with_overrides(defaults, _overrides(project), where=f"{project.key} setting ")


def demo_planner_reason(project: Project) -> str | None:
    """Why the demo planner answers ``project``'s chats (docs/architecture.md#the-demo-planner), in
    words for its operator and owners; None when Claude does. Its ``provider`` setting (the
    project's own, else the server's) decides; unset, the demo answers when no credential is set
    anywhere (neither the project's nor ANTHROPIC_API_KEY). The planner's ``project_provider``
    reads it, and so do ``manage.py bootstrap`` (here, in the tracker, which may not import the
    planner) and ``check --deploy`` (``ballet/checks.py``)."""
    match project_planner_config(project).provider:
        case "demo":
            return "its provider setting (the project's, or the server's BALLET_PLANNER_PROVIDER) is demo"
        case "anthropic":
            return None
    if project.credential_encrypted or settings.SERVER.anthropic_api_key:
        return None
    return "it has no Anthropic credential and the server sets no ANTHROPIC_API_KEY"


def project_work_config(project: Project) -> WorkConfig:
    """The work settings of ``project`` (claim lease, answer reuse): defaults, then its overrides."""
    defaults: WorkConfig = settings.BALLET_WORK
    return with_overrides(defaults, _overrides(project), where=f"{project.key} setting ")


def _overrides(project: Project) -> dict[str, Any]:
    return project.settings if isinstance(project.settings, dict) else {}


def project_by_id(project_id: int) -> Project:
    """The project ``project_id`` (a caller that held its id alone, such as a wait on the event loop)."""
    try:
        return Project.objects.select_related("organization").get(pk=project_id)
    except Project.DoesNotExist as exc:
        raise NotFoundError("Project not found.") from exc


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
    epic: str | None = None,
    milestone: str | None = None,
    priority: str | None = None,
    label: str | None = None,
) -> QuerySet[Item]:
    """The project's items by number; ``epic`` and ``milestone`` are keys of the parent to filter by,
    ``label`` a name the item carries.

    A parent filter that names no epic (milestone) of the project is a ValidationError on that filter.
    """
    qs = Item.objects.filter(project=project)
    if kind:
        qs = qs.filter(kind=kind)
    if state:
        qs = qs.filter(state=state)
    if priority:
        qs = qs.filter(priority=priority)
    if label:
        qs = qs.filter(label_carried(label))
    for parent, parent_id in parent_ids(
        project, {ItemKind.EPIC: epic, ItemKind.MILESTONE: milestone}
    ).items():
        qs = qs.filter(**{f"{parent}_id": parent_id})
    return qs.select_related("project", "epic__project", "milestone__project").order_by("number")


def label_carried(label: str) -> Q:
    """Items whose labels hold ``label``: its quoted name inside the JSON list's text (SQLite has no
    JSON containment lookup; a label name holds no quote, so ``"bug"`` matches only the name bug)."""
    return Q(labels__icontains=f'"{label.strip().lower()}"')


def priority_rank() -> Case:
    """An item's priority as its rank, urgent first: what runnable lists sort by."""
    return Case(
        *(When(priority=name, then=Value(rank)) for name, rank in PRIORITY_RANK.items()),
        default=Value(len(PRIORITY_RANK)),
    )


def with_article(word: str) -> str:
    """``word`` after "a" or "an": "an epic", "a ticket"."""
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def parent_ids(project: Project, keys: dict[str, str | None]) -> dict[str, int]:
    """The ids of the parents ``keys`` names by kind (epic, milestone), in one query."""
    wanted = {kind: key for kind, key in keys.items() if key}
    if not wanted:
        return {}
    numbers = {kind: item_number(project, key) for kind, key in wanted.items()}
    rows = Item.objects.filter(project=project, number__in=[n for n in numbers.values() if n])
    found = {number: (pk, kind) for number, pk, kind in rows.values_list("number", "pk", "kind")}
    ids: dict[str, int] = {}
    errors: dict[str, list[str]] = {}
    for kind, key in wanted.items():
        row = found.get(numbers[kind] or 0)
        if row is None:
            errors[kind] = [f"Item {key} not found in project {project.key}."]
        elif row[1] != kind:
            errors[kind] = [f"{key} is {with_article(row[1])}, not {with_article(kind)}."]
        else:
            ids[kind] = row[0]
    if errors:
        raise ValidationError(errors)
    return ids


def item_number(project: Project, key: str) -> int | None:
    """The number in ``key`` if it is a key of ``project`` (``BAL-12`` → 12)."""
    prefix = f"{project.key}-"
    # Only ASCII digits within the column's range: ``BAL-²`` and ``BAL-99…9`` name no item.
    return ascii_number(key[len(prefix) :]) if key.startswith(prefix) else None


def item_get(*, project: Project, key: str) -> Item:
    """One item, in one query; NotFoundError for an unknown key."""
    number = item_number(project, key)
    try:
        return Item.objects.select_related("project", "epic__project", "milestone__project").get(
            project=project, number=number or 0
        )
    except Item.DoesNotExist as exc:
        raise NotFoundError(f"Item {key} not found in project {project.key}.") from exc


@dataclass(frozen=True)
class ItemDependencies:
    """The items blocking an item and those it blocks, each list by number."""

    blockers: list[Item]
    blocking: list[Item]


def item_dependencies(*, item: Item) -> ItemDependencies:
    """What blocks ``item`` and what it blocks, in one query."""
    rows = Dependency.objects.filter(Q(blocked=item) | Q(blocker=item)).select_related(
        "blocker__project", "blocked__project"
    )
    blockers: list[Item] = []
    blocking: list[Item] = []
    for dependency in rows:
        if dependency.blocked_id == item.pk:
            blockers.append(dependency.blocker)
        else:
            blocking.append(dependency.blocked)
    return ItemDependencies(
        blockers=sorted(blockers, key=lambda i: i.number), blocking=sorted(blocking, key=lambda i: i.number)
    )


def items_found_by_keys(*, user: Principal, keys: Iterable[str]) -> dict[str, Item]:
    """The items ``keys`` name in projects ``user`` can read, by key, in two queries; a key naming
    no item, or one in a project the user cannot read, is left out."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return {}
    prefixes = {key.rpartition("-")[0] for key in wanted}
    projects = {p.key: p for p in visible_projects(user).filter(key__in=prefixes)}
    refs: dict[str, tuple[int, int]] = {}
    for key in wanted:
        project = projects.get(key.rpartition("-")[0])
        number = item_number(project, key) if project is not None else None
        if project is not None and number is not None:
            refs[key] = (project.pk, number)
    query = Q(pk__in=[])
    for project_id, number in refs.values():
        query |= Q(project_id=project_id, number=number)
    found = {(i.project_id, i.number): i for i in Item.objects.filter(query).select_related("project")}
    return {key: found[ref] for key, ref in refs.items() if ref in found}


def item_list_by_keys(*, user: Principal, keys: Iterable[str]) -> list[Item]:
    """The items ``keys`` name, in the order named, in projects ``user`` can read, in two queries.

    A key naming no item, or one in a project the user cannot read, is a ValidationError on ``items``.
    """
    wanted = list(dict.fromkeys(keys))
    found = items_found_by_keys(user=user, keys=wanted)
    missing = [key for key in wanted if key not in found]
    if missing:
        raise ValidationError({"items": [f"Unknown item {key}." for key in missing]})
    return [found[key] for key in wanted]


def unresolved_blockers(*, blocked: Any) -> QuerySet[Dependency]:
    """The dependencies of ``blocked`` (an item's id, or ``OuterRef("pk")`` in a subquery) whose
    blocker is neither done nor cancelled: what keeps a ready ticket from being runnable."""
    return Dependency.objects.filter(blocked=blocked).exclude(blocker__state__in=RESOLVED_STATES)


def runnable_tickets(*, project: Project) -> QuerySet[Item]:
    """Ready tickets whose blockers are all done or cancelled, and that no worker holds (a claimed
    ticket is in progress; one a human set back to ready while its claim holds is not free either).

    A claim whose lease ran out holds nothing, swept or not: its ticket is runnable as the sweep
    will leave it, an ``in_progress`` one back to ``ready`` (claiming it expires the claim first).
    Listed by priority, urgent first, then by number."""
    now = timezone.now()
    unresolved = unresolved_blockers(blocked=OuterRef("pk"))
    claimed = Claim.objects.filter(held(now), item=OuterRef("pk"))
    ran_out = Claim.objects.filter(lapsed(now), item=OuterRef("pk"))
    return (
        Item.objects.filter(project=project, kind="ticket")
        .filter(Q(state="ready") | Q(Exists(ran_out), state="in_progress"))
        .exclude(Exists(unresolved))
        .exclude(Exists(claimed))
        .select_related("project", "epic__project", "milestone__project")
        .order_by(priority_rank(), "number")
    )


def changeset_list(*, project: Project, status: str | None = None) -> QuerySet[Changeset]:
    """The project's changesets, newest first, optionally of one status."""
    qs = Changeset.objects.filter(project=project).select_related("project", "proposed_by", "decided_by")
    return (qs.filter(status=status) if status else qs).order_by("-number")


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
    pin = SkillPin.objects.filter(project=project, skill=OuterRef("pk")).values("version")[:1]
    skills = skills.annotate(pin=Subquery(pin)).prefetch_related(
        Prefetch("versions", queryset=SkillVersion.objects.select_related("author"))
    )
    chosen: dict[str, Skill] = {}
    for skill in skills:
        current = chosen.get(skill.name)
        if current is None or (skill.project_id and not current.project_id):
            chosen[skill.name] = skill
    result = []
    for name in sorted(chosen):
        effective = _effective(chosen[name], chosen[name].pin)  # type: ignore[attr-defined]
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


def skill_choice(*, project: Project, name: str) -> tuple[int, int] | None:
    """Which skill and version ``name`` resolves to for ``project`` (as :func:`skill_resolve`
    chooses them), without reading any body. None if it resolves to none.

    The planner asks at the start of every turn, so this is one plain statement, prepared
    (tracker/db/sql.py: the ORM's version of it, with its aggregate and subqueries, cost more to
    compose than to run, and PostgreSQL spent as long planning it)."""
    rows = sql.rows(*skill_choice_statement(project=project, name=name))
    chosen = None
    for row in rows:
        if chosen is None or (row[1] and not chosen[1]):  # the project's own shadows the organization's
            chosen = row
    if chosen is None or chosen[2] is None:
        return None
    pk, _, latest, pinned = chosen
    return pk, pinned or latest


def skill_choice_statement(*, project: Project, name: str) -> sql.Statement:
    """The statement :func:`skill_choice` runs."""
    return _SKILL_CHOICE, [project.pk, name, project.organization_id, project.pk]


_SKILL_CHOICE = f"""
SELECT s.id, s.project_id,
    (SELECT MAX(v.version) FROM {SkillVersion._meta.db_table} v WHERE v.skill_id = s.id),
    (SELECT p.version FROM {SkillPin._meta.db_table} p
        WHERE p.project_id = %s AND p.skill_id = s.id AND EXISTS (SELECT 1
            FROM {SkillVersion._meta.db_table} pv WHERE pv.skill_id = s.id AND pv.version = p.version))
FROM {Skill._meta.db_table} s
WHERE s.name = %s AND s.organization_id = %s AND (s.project_id IS NULL OR s.project_id = %s)
"""  # noqa: S608 - table names from the models, values as parameters


def skill_resolve(*, project: Project, name: str) -> EffectiveSkill:
    """The skill ``name`` as ``project`` uses it; NotFoundError if it has none."""
    for effective in _effective_skills(project, name):
        if effective.name == name:
            return effective
    raise NotFoundError(f"Skill {name!r} not found for project {project.key}.")


def project_find(
    *,
    user: Principal,
    project: Project,
    query: str,
    kinds: Iterable[str] = (ITEM, SKILL),
    item_kinds: Iterable[str] = (),
    states: Iterable[str] = (),
    limit: int = 10,
) -> list[SearchHit]:
    """The project's items and skills (of ``kinds``) that best answer ``query``, as ``user`` may see them.

    Skills need ``skill.read``: without it they are left out, not refused.
    """
    wanted = set(kinds) & {ITEM, SKILL}
    if not has_permission(user, project, SKILL_READ):
        wanted.discard(SKILL)
    return project_search(
        project=project, query=query, kinds=wanted, item_kinds=item_kinds, states=states, limit=limit
    )


def activity_since(*, organization_id: int, after_seq: int, limit: int = 200) -> list[ActivityEvent]:
    """Events of the organization after ``after_seq``, oldest first, at most ``limit``."""
    return list(
        ActivityEvent.objects.filter(organization_id=organization_id, seq__gt=after_seq)
        .select_related("project", "on_behalf_of")
        .order_by("seq")[:limit]
    )


def key_list(*, user: User) -> QuerySet[ApiKey]:
    """``user``'s API keys, newest first, revoked and expired ones included."""
    return ApiKey.objects.filter(user_id=user.pk).select_related("user").prefetch_related("projects")


def key_list_of_project(*, project: Project) -> QuerySet[ApiKey]:
    """The API keys bound to the project, newest first: never a member's other keys, which are
    theirs alone (an owner could once read and revoke those: issue 41)."""
    bound = ApiKey.objects.filter(projects=project).distinct()
    return bound.select_related("user").prefetch_related("projects")


def key_get(*, keys: QuerySet[ApiKey], key_id: int) -> ApiKey:
    """The key ``key_id`` among ``keys`` (one of the lists above); NotFoundError otherwise."""
    found = keys.filter(pk=key_id).first() if 0 < key_id <= MAX_BIG_ID else None
    if found is None:
        raise NotFoundError(f"API key {key_id} not found.")
    return found
