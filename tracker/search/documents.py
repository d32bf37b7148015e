"""The tracker's search sources: items and skills as search documents."""

from __future__ import annotations

from django.db.models import Max

from tracker.models import Item, Skill, SkillVersion
from tracker.search.types import ITEM, SKILL, DocumentSpec, SearchSource


def _item_body(item: Item) -> str:
    criteria = "\n".join(f"- {c}" for c in item.acceptance_criteria if isinstance(c, str))
    return f"{item.description}\n\n{criteria}".strip()


def item_documents(ids: list[int]) -> list[DocumentSpec]:
    items = Item.objects.filter(pk__in=ids).select_related("project")
    return [
        DocumentSpec(
            kind=ITEM,
            object_id=item.pk,
            organization_id=item.project.organization_id,
            project_id=item.project_id,
            key=item.key,
            title=item.title,
            body=_item_body(item),
            subkind=item.kind,
            state=item.state,
            source_version=item.version,
        )
        for item in items
    ]


def skill_documents(ids: list[int]) -> list[DocumentSpec]:
    """Each skill with the text of its latest version (the one a project without a pin uses)."""
    skills = Skill.objects.filter(pk__in=ids).annotate(latest=Max("versions__version"))
    bodies = {
        (v.skill_id, v.version): v.body
        for v in SkillVersion.objects.filter(skill__in=skills).only("skill_id", "version", "body")
    }
    return [
        DocumentSpec(
            kind=SKILL,
            object_id=skill.pk,
            organization_id=skill.organization_id,
            project_id=skill.project_id,
            key=skill.name,
            title=skill.name,
            body=bodies.get((skill.pk, skill.latest), ""),
            source_version=skill.latest or 0,
        )
        for skill in skills
    ]


ITEM_SOURCE = SearchSource(
    kind=ITEM,
    load=item_documents,
    ids_of_organization=lambda org: list(
        Item.objects.filter(project__organization_id=org).order_by("pk").values_list("pk", flat=True)
    ),
)
SKILL_SOURCE = SearchSource(
    kind=SKILL,
    load=skill_documents,
    ids_of_organization=lambda org: list(
        Skill.objects.filter(organization_id=org).order_by("pk").values_list("pk", flat=True)
    ),
)
