"""REST representations of the tracker, and the strict input shapes its endpoints accept.

Input serializers only parse: types, lengths, unknown fields. Everything the
domain decides (references, states, permissions) is left to the services, so
the REST API and the planner tools cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from tracker.models import (
    ChangesetStatus,
    Item,
    ItemKind,
    Membership,
    Project,
    Role,
    SkillScope,
)
from tracker.models.plan import ALL_STATES as ITEM_STATES
from tracker.models.plan import MAX_LABELS, Priority
from tracker.operations import LIST as OPERATIONS_LIST
from tracker.operations import (
    MAX_CRITERIA,
    MAX_CRITERION,
    MAX_LABEL,
    OPERATION_SCHEMA,
    OPERATIONS,
    openapi_dialect,
    operation_schema,
)
from tracker.selectors import EffectiveSkill, ItemDependencies
from tracker.services.changeset_validation import MAX_RATIONALE, MAX_TITLE
from tracker.services.changesets import MAX_NOTE
from tracker.services.projects import MAX_CREDENTIAL
from tracker.services.skills import MAX_BODY as MAX_SKILL_BODY
from tracker.trust.permissions import permissions_for

MAX_INT = 2**31 - 1
MAX_DESCRIPTION = 20_000


# --- strict input building blocks -------------------------------------------------------------


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and other non-strings instead of coercing them."""

    default_error_messages = {"not_a_string": "Expected a string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """An IntegerField that refuses strings, floats and booleans."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


def _has_nul(value: Any) -> bool:
    # Recursion is bounded: the API's JSON parser refuses documents nested deeper than 64.
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def no_nul_characters(value: Any) -> None:
    """PostgreSQL cannot store NUL in text or JSON; refuse it as input instead of failing later."""
    if _has_nul(value):
        raise serializers.ValidationError("NUL characters are not allowed.")


class StrictSerializer(serializers.Serializer[Any]):
    """Input whose unknown fields are errors, reported next to the errors of the known ones."""

    def to_internal_value(self, data: Any) -> Any:
        unknown: dict[str, list[str]] = {}
        if isinstance(data, Mapping):
            known = {name for name, field in self.fields.items() if not field.read_only}
            unknown = {str(name): ["Unknown field."] for name in data if name not in known}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if isinstance(exc.detail, dict):
                raise serializers.ValidationError({**exc.detail, **unknown}) from exc
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


ErrorSerializer = inline_serializer(
    name="Error",
    fields={
        "error": inline_serializer(
            name="ErrorDetail",
            fields={
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "fields": serializers.DictField(
                    child=serializers.ListField(child=serializers.CharField()),
                    required=False,
                    help_text="Messages by field path, such as operations[2].fields.state.",
                ),
                "current": serializers.DictField(
                    required=False, help_text="The object as it is now (conflicts)."
                ),
            },
        )
    },
)
"""The shape of every error answer (see tracker.web.api_errors), for the OpenAPI document."""


# --- projects and members -------------------------------------------------------------------


class ProjectSerializer(serializers.Serializer[Project]):
    key = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    organization = serializers.CharField(source="organization.slug")
    settings = serializers.DictField()
    has_credential = serializers.BooleanField()
    permissions = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    def get_permissions(self, project: Project) -> list[str]:
        """The permissions the caller holds in the project."""
        return sorted(permissions_for(self.context["request"].user, project.pk))


class ProjectUpdateSerializer(StrictSerializer):
    name = StrictCharField(max_length=200, required=False)
    description = StrictCharField(
        max_length=MAX_DESCRIPTION, required=False, allow_blank=True, trim_whitespace=False
    )
    settings = serializers.DictField(
        required=False,
        validators=[no_nul_characters],
        help_text="Planner overrides to change; a null value removes an override.",
    )
    credential = StrictCharField(
        max_length=MAX_CREDENTIAL,
        required=False,
        allow_blank=True,
        write_only=True,
        help_text="The LLM credential; write-only, an empty string removes it.",
    )


class MembershipSerializer(serializers.Serializer[Membership]):
    username = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(choices=Role.choices)
    created_at = serializers.DateTimeField()


class MembershipSetSerializer(StrictSerializer):
    username = StrictCharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices)


# --- items ------------------------------------------------------------------------------------


class ItemSerializer(serializers.Serializer[Item]):
    key = serializers.CharField()
    kind = serializers.ChoiceField(choices=ItemKind.choices)
    title = serializers.CharField()
    state = serializers.CharField()
    epic = serializers.CharField(source="epic.key", allow_null=True)
    milestone = serializers.CharField(source="milestone.key", allow_null=True)
    priority = serializers.ChoiceField(choices=Priority.choices)
    labels = serializers.ListField(child=serializers.CharField(), help_text="Names, sorted.")
    version = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class LinkedItemSerializer(serializers.Serializer[Any]):
    key = serializers.CharField()
    title = serializers.CharField()
    state = serializers.CharField()


class DependenciesSerializer(serializers.Serializer[Any]):
    blockers = LinkedItemSerializer(many=True, help_text="Items that must be resolved first.")
    blocking = LinkedItemSerializer(many=True, help_text="Items waiting for this one.")


class LinkedItem(TypedDict):
    key: str
    title: str
    state: str


class Dependencies(TypedDict):
    blockers: list[LinkedItem]
    blocking: list[LinkedItem]


def linked_item(item: Item) -> LinkedItem:
    """An item as a dependency names it."""
    return {"key": item.key, "title": item.title, "state": item.state}


class ItemDetailSerializer(ItemSerializer):
    """An item with its dependencies (:func:`tracker.selectors.item_dependencies`, in the context)."""

    description = serializers.CharField()
    acceptance_criteria = serializers.ListField(child=serializers.CharField())
    policy = serializers.DictField()
    dependencies = serializers.SerializerMethodField()

    @extend_schema_field(DependenciesSerializer)
    def get_dependencies(self, item: Item) -> Dependencies:
        dependencies: ItemDependencies = self.context["dependencies"]
        return {
            "blockers": [linked_item(blocker) for blocker in dependencies.blockers],
            "blocking": [linked_item(blocked) for blocked in dependencies.blocking],
        }


class ItemFilterSerializer(serializers.Serializer[Any]):
    # An empty filter (``?kind=``) filters nothing, as DRF reads it: the schema says so.
    kind = serializers.ChoiceField(choices=ItemKind.choices, required=False, allow_blank=True)
    state = serializers.ChoiceField(choices=[(s, s) for s in ITEM_STATES], required=False, allow_blank=True)
    epic = serializers.CharField(
        max_length=30, required=False, allow_blank=True, help_text="An epic's key, e.g. BAL-3."
    )
    milestone = serializers.CharField(
        max_length=30, required=False, allow_blank=True, help_text="A milestone's key."
    )
    priority = serializers.ChoiceField(choices=Priority.choices, required=False, allow_blank=True)
    # DRF's metaclass takes declared fields off the class, so this does not shadow Field.label.
    label = serializers.CharField(  # type: ignore[assignment]
        max_length=MAX_LABEL, required=False, allow_blank=True, help_text="Items carrying this label."
    )


class ItemPatchSerializer(StrictSerializer):
    """``PATCH`` of an item: the version read, and the fields to change (the service checks what
    needs the plan: states and moves, parents, labels, policy)."""

    version = StrictIntegerField(
        min_value=1, max_value=MAX_INT, help_text="The item's version as you read it."
    )
    title = StrictCharField(max_length=MAX_TITLE, required=False)
    description = StrictCharField(
        max_length=MAX_DESCRIPTION, required=False, allow_blank=True, trim_whitespace=False
    )
    acceptance_criteria = serializers.ListField(
        child=StrictCharField(max_length=MAX_CRITERION), max_length=MAX_CRITERIA, required=False
    )
    state = serializers.ChoiceField(choices=[(s, s) for s in ITEM_STATES], required=False)
    epic = StrictCharField(
        max_length=30, required=False, allow_null=True, help_text="An epic's key, or null."
    )
    milestone = StrictCharField(
        max_length=30, required=False, allow_null=True, help_text="A milestone's key, or null."
    )
    priority = serializers.ChoiceField(choices=Priority.choices, required=False)
    labels = serializers.ListField(
        child=StrictCharField(max_length=MAX_LABEL),
        max_length=MAX_LABELS,
        required=False,
        help_text="The project's label names; they replace the item's labels.",
    )
    policy = serializers.DictField(required=False, help_text="Needs policy.set.")
    add_blockers = serializers.ListField(
        child=StrictCharField(max_length=30), max_length=50, required=False, help_text="Keys of new blockers."
    )
    remove_blockers = serializers.ListField(
        child=StrictCharField(max_length=30),
        max_length=50,
        required=False,
        help_text="Keys of blockers to drop.",
    )


class ItemEditedSerializer(ItemDetailSerializer):
    """The item after an edit applied at once, with the changeset it was applied as."""

    changeset = serializers.IntegerField(help_text="The number of the changeset the edit became.")
    applied = serializers.BooleanField()


class ItemEditProposedSerializer(serializers.Serializer[Any]):
    """An edit the project's direct_edits (or four eyes) leaves for review."""

    changeset = serializers.IntegerField()
    applied = serializers.BooleanField()
    review_url = serializers.CharField()


# --- changesets -------------------------------------------------------------------------------


class OperationsField(serializers.JSONField):
    """A changeset's operations: parsed as any JSON here, checked by the changeset service, and
    documented by the one description of :mod:`tracker.operations` (the extension below)."""


class OperationsFieldExtension(OpenApiSerializerFieldExtension):
    """Documents :class:`OperationsField` as an array of ``ChangesetOperation``: one component per
    operation (so that each keeps its own ``op``), told apart by ``op``."""

    target_class = OperationsField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        mapping = {}
        for operation in OPERATIONS:
            name = f"Changeset{operation.op.title().replace('_', '')}Operation"
            schema = openapi_dialect(operation_schema(operation))
            mapping[operation.op] = _component(auto_schema, name, schema)["$ref"]
        union = {
            "description": OPERATION_SCHEMA["description"],
            "anyOf": [{"$ref": ref} for ref in mapping.values()],
            "discriminator": {"propertyName": "op", "mapping": mapping},
        }
        return {**OPERATIONS_LIST.schema, "items": _component(auto_schema, "ChangesetOperation", union)}


def _component(auto_schema: Any, name: str, schema: dict[str, Any]) -> dict[str, str]:
    """Register ``schema`` as the component ``name``; a reference to it."""
    component = ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, schema=schema, object=name)
    auto_schema.registry.register_on_missing(component)
    ref: dict[str, str] = component.ref
    return ref


class ChangesetSerializer(serializers.Serializer[Any]):
    number = serializers.IntegerField()
    title = serializers.CharField()
    rationale = serializers.CharField()
    status = serializers.ChoiceField(choices=ChangesetStatus.choices)
    operations = OperationsField()
    proposed_by = serializers.CharField(source="proposed_by.username")
    planner_session = serializers.UUIDField(allow_null=True)
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    decision_note = serializers.CharField()
    conflict_reason = serializers.CharField()
    created_items = serializers.DictField(
        child=serializers.CharField(), help_text="Keys of the items created, by ref, once applied."
    )
    created_at = serializers.DateTimeField()


class ImpactTicketSerializer(serializers.Serializer[Any]):
    key = serializers.CharField(help_text="The ticket's key; for one the changeset creates, its $ref.")
    title = serializers.CharField()
    new = serializers.BooleanField(help_text="The changeset would create it.")


class TicketKeysField(serializers.ListField):
    """Tickets (``tracker.graph.impact.ImpactTicket``) by key."""

    child = serializers.CharField()

    def to_representation(self, data: Any) -> list[str]:
        return [ticket.key for ticket in data]


class ImpactChainSerializer(serializers.Serializer[Any]):
    before = TicketKeysField(source="chain_before", help_text="The longest remaining chain now, first first.")
    after = TicketKeysField(source="chain_after", help_text="The same once the changeset is applied.")


class GraphNodeSerializer(serializers.Serializer[Any]):
    key = serializers.CharField()
    title = serializers.CharField()
    state = serializers.CharField()
    runnable = serializers.BooleanField()
    claimed_by = serializers.CharField(help_text="Who holds its active claim; empty if no one.")
    new = serializers.BooleanField()


class PlanGraphSerializer(serializers.Serializer[Any]):
    nodes = GraphNodeSerializer(many=True)
    edges = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField(), min_length=2, max_length=2),
        help_text="Dependencies as [blocker, blocked] keys.",
    )


class ImpactGraphsSerializer(serializers.Serializer[Any]):
    before = PlanGraphSerializer(source="graph_before")
    after = PlanGraphSerializer(source="graph_after")


class ChangesetImpactSerializer(serializers.Serializer[Any]):
    """``{"changeset": Changeset, "impact": tracker.graph.impact.Impact}``: what applying would change."""

    number = serializers.IntegerField(source="changeset.number")
    status = serializers.ChoiceField(source="changeset.status", choices=ChangesetStatus.choices)
    becomes_runnable = ImpactTicketSerializer(source="impact.becomes_runnable", many=True)
    stops_runnable = ImpactTicketSerializer(source="impact.stops_runnable", many=True)
    becomes_blocked = ImpactTicketSerializer(
        source="impact.becomes_blocked", many=True, help_text="Tickets that gain an unresolved blocker."
    )
    unblocked = ImpactTicketSerializer(
        source="impact.unblocked", many=True, help_text="Open tickets left with no unresolved blocker."
    )
    longest_chain = ImpactChainSerializer(source="impact")
    graph = ImpactGraphsSerializer(source="impact")


class ChangesetFilterSerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=ChangesetStatus.choices, required=False, allow_blank=True)


class ChangesetProposeSerializer(StrictSerializer):
    title = StrictCharField(max_length=MAX_TITLE)
    rationale = StrictCharField(
        max_length=MAX_RATIONALE, required=False, allow_blank=True, trim_whitespace=False, default=""
    )
    operations = OperationsField(
        validators=[no_nul_characters],
        help_text=(
            "Ordered operations: create, update, add_dependency, remove_dependency "
            "(validated by the changeset service, errors keyed like operations[2].fields.state)."
        ),
    )


class ChangesetApplySerializer(StrictSerializer):
    """Apply takes an optional note, kept with the decision."""

    note = StrictCharField(max_length=MAX_NOTE, required=False, allow_blank=True, default="")


class ChangesetRejectSerializer(StrictSerializer):
    note = StrictCharField(max_length=MAX_NOTE, required=False, allow_blank=True, default="")


# --- skills ---------------------------------------------------------------------------------


class SkillSerializer(serializers.Serializer[EffectiveSkill]):
    name = serializers.CharField()
    scope = serializers.ChoiceField(choices=SkillScope.choices)
    version = serializers.IntegerField(source="version.version", help_text="The version the project uses.")
    latest_version = serializers.IntegerField()
    pinned = serializers.BooleanField()


class SkillDetailSerializer(SkillSerializer):
    body = serializers.CharField(source="version.body")
    author = serializers.CharField(source="version.author.username")
    created_at = serializers.DateTimeField(source="version.created_at")


class SkillVersionSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(source="skill.name")
    scope = serializers.ChoiceField(source="skill.scope", choices=SkillScope.choices)
    version = serializers.IntegerField()
    author = serializers.CharField(source="author.username")
    created_at = serializers.DateTimeField()


class SkillVersionCreateSerializer(StrictSerializer):
    name = StrictCharField(max_length=100)
    body = StrictCharField(max_length=MAX_SKILL_BODY, trim_whitespace=False)
    scope = serializers.ChoiceField(choices=SkillScope.choices, default=SkillScope.PROJECT)


class SkillPinSerializer(StrictSerializer):
    pin = StrictIntegerField(
        min_value=1, max_value=MAX_INT, allow_null=True, help_text="A version to pin, or null to unpin."
    )


# --- search -----------------------------------------------------------------------------------

SEARCH_KINDS = ("item", "skill", *ItemKind.values)


class SearchFilterSerializer(serializers.Serializer[Any]):
    q = serializers.CharField(
        max_length=500,
        help_text='What to find, in web-search syntax: words, "a phrase", or, -word. An item key '
        "(BAL-12) finds that item first.",
    )
    kind = serializers.MultipleChoiceField(
        choices=SEARCH_KINDS,
        required=False,
        help_text="Repeat to combine: item, skill, or an item kind (milestone, epic, ticket). "
        "Default: items and skills.",
    )
    state = serializers.MultipleChoiceField(
        choices=ITEM_STATES, required=False, help_text="Item states; repeat to combine. Skills have none."
    )
    limit = serializers.IntegerField(min_value=1, max_value=50, default=10)


class SearchHitSerializer(serializers.Serializer[Any]):
    kind = serializers.CharField(help_text="item or skill")
    key = serializers.CharField(help_text="The item's key or the skill's name.")
    title = serializers.CharField()
    snippet = serializers.CharField(help_text="A window of the text with the matched words in **bold**.")
    score = serializers.FloatField(help_text="1.0 for an exact key; else the fused rank, 1.0 at best.")
    state = serializers.CharField(allow_null=True)
    subkind = serializers.CharField(allow_null=True, help_text="The item's kind.")
    related = serializers.BooleanField(
        help_text="Not a match: near the query without its words or the model's agreement; related hits "
        "come after every match."
    )


class SearchResultsSerializer(serializers.Serializer[Any]):
    results = SearchHitSerializer(many=True)


class NoInputSerializer(StrictSerializer):
    """The endpoint takes no input (an empty body or ``{}``); any field sent is unknown."""
