"""Changesets: validation with field paths, all-or-nothing apply, conflicts, decisions."""

from __future__ import annotations

import uuid

import pytest

from tracker.errors import InvalidStateError, NotFoundError, PermissionDeniedError, ValidationError
from tracker.models import ActivityEvent, Changeset, ChangesetStatus, Dependency, Item
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_apply, changeset_propose, changeset_reject
from tracker.services.items import item_update


def propose(project, user, operations, **kwargs):
    return changeset_propose(
        actor=Actor(user=user, **kwargs), project=project, title="Plan change", operations=operations
    )


def errors_of(project, user, operations, **kwargs) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as info:
        propose(project, user, operations, **kwargs)
    return info.value.errors


def test_unknown_item_is_a_field_error(project, member):
    errors = errors_of(project, member, [{"op": "update", "item": "BAL-99", "base_version": 1, "fields": {}}])
    assert "Unknown item BAL-99" in " ".join(errors["operations[0].item"])


def test_item_of_another_project_is_unknown(project, other_project, member, make_item):
    foreign = make_item(target=other_project)
    errors = errors_of(
        project, member, [{"op": "update", "item": foreign.key, "base_version": 1, "fields": {"title": "x"}}]
    )
    assert "operations[0].item" in errors


def test_wrong_kind_for_epic_field(project, member, make_item):
    milestone = make_item(kind="milestone", title="M1")
    errors = errors_of(
        project,
        member,
        [{"op": "create", "kind": "ticket", "fields": {"title": "T", "epic": milestone.key}}],
    )
    assert errors["operations[0].fields.epic"] == [f"{milestone.key} is a milestone, not an epic."]


def test_bad_state_for_kind(project, member, make_item):
    epic = make_item(kind="epic")
    errors = errors_of(
        project, member, [{"op": "update", "item": epic.key, "base_version": 1, "fields": {"state": "ready"}}]
    )
    assert "open, done, cancelled" in errors["operations[0].fields.state"][0]


def test_cycle_is_refused(project, member, make_item):
    a, b, c = make_item(title="A"), make_item(title="B"), make_item(title="C")
    Dependency.objects.create(blocker=a, blocked=b)
    Dependency.objects.create(blocker=b, blocked=c)
    errors = errors_of(project, member, [{"op": "add_dependency", "blocker": c.key, "blocked": a.key}])
    assert "would make a cycle" in errors["operations[0]"][0]


def test_cycle_through_refs_of_the_same_changeset(project, member, make_item):
    a = make_item(title="A")
    errors = errors_of(
        project,
        member,
        [
            {"op": "create", "ref": "x", "kind": "ticket", "fields": {"title": "X"}},
            {"op": "add_dependency", "blocker": a.key, "blocked": "$x"},
            {"op": "add_dependency", "blocker": "$x", "blocked": a.key},
        ],
    )
    assert list(errors) == ["operations[2]"]


def test_self_dependency_is_refused(project, member, make_item):
    a = make_item()
    errors = errors_of(project, member, [{"op": "add_dependency", "blocker": a.key, "blocked": a.key}])
    assert errors["operations[0].blocked"] == ["An item cannot block itself."]


def test_unknown_ref_is_refused(project, member, make_item):
    a = make_item()
    errors = errors_of(project, member, [{"op": "add_dependency", "blocker": "$nope", "blocked": a.key}])
    assert "Unknown $ref $nope" in errors["operations[0].blocker"][0]


def test_ref_used_before_its_create_is_unknown(project, member, make_item):
    a = make_item()
    errors = errors_of(
        project,
        member,
        [
            {"op": "add_dependency", "blocker": "$later", "blocked": a.key},
            {"op": "create", "ref": "later", "kind": "ticket", "fields": {"title": "Later"}},
        ],
    )
    assert "operations[0].blocker" in errors


def test_unknown_operation_and_unknown_field(project, member, make_item):
    errors = errors_of(
        project,
        member,
        [
            {"op": "delete", "item": "BAL-1"},
            {"op": "create", "kind": "ticket", "fields": {"title": "T", "colour": "red"}},
        ],
    )
    assert "Unknown operation 'delete'" in errors["operations[0].op"][0]
    assert errors["operations[1].fields.colour"] == ["Unknown field 'colour'."]


def test_policy_from_member_without_policy_set_is_refused(project, member):
    errors = errors_of(
        project, member, [{"op": "create", "kind": "ticket", "fields": {"title": "T", "policy": {"x": 1}}}]
    )
    assert "policy.set" in errors["operations[0].fields.policy"][0]


def test_policy_from_the_planner_is_refused_even_for_a_maintainer(project, maintainer):
    errors = errors_of(
        project,
        maintainer,
        [{"op": "create", "kind": "ticket", "fields": {"title": "T", "policy": {"x": 1}}}],
        planner_session=uuid.uuid4(),
    )
    assert "operations[0].fields.policy" in errors


def test_policy_from_a_maintainer_is_accepted_and_applied(project, maintainer, owner):
    changeset = propose(
        project,
        maintainer,
        [{"op": "create", "kind": "ticket", "fields": {"title": "T", "policy": {"x": 1}}}],
    )
    changeset_apply(actor=Actor(user=owner), changeset=changeset)
    assert Item.objects.get(project=project, title="T").policy == {"x": 1}


def test_viewer_cannot_propose_and_stranger_sees_nothing(project, viewer, users):
    ops = [{"op": "create", "kind": "ticket", "fields": {"title": "T"}}]
    with pytest.raises(PermissionDeniedError):
        propose(project, viewer, ops)
    with pytest.raises(NotFoundError):
        propose(project, users["stranger"], ops)


def test_stale_base_version_at_proposal_names_the_current_version(project, member, make_item):
    item = make_item()
    item_update(actor=Actor(user=member), item=item, fields={"title": "Renamed"})
    errors = errors_of(
        project, member, [{"op": "update", "item": item.key, "base_version": 1, "fields": {"state": "ready"}}]
    )
    assert "now at version 2" in errors["operations[0].base_version"][0]


def test_apply_runs_every_operation(project, member, maintainer, make_item):
    epic = make_item(kind="epic", title="Auth")
    existing = make_item(title="Existing")
    changeset = propose(
        project,
        member,
        [
            {
                "op": "create",
                "ref": "login",
                "kind": "ticket",
                "fields": {"title": "Login", "epic": epic.key},
            },
            {"op": "update", "item": existing.key, "base_version": 1, "fields": {"state": "ready"}},
            {"op": "add_dependency", "blocker": "$login", "blocked": existing.key},
        ],
    )
    applied = changeset_apply(actor=Actor(user=maintainer), changeset=changeset)
    assert applied.status == ChangesetStatus.APPLIED
    login = Item.objects.get(project=project, title="Login")
    assert login.epic == epic
    assert applied.created_items == {"login": login.key}
    existing.refresh_from_db()
    assert (existing.state, existing.version) == ("ready", 2)
    assert Dependency.objects.filter(blocker=login, blocked=existing).exists()
    assert applied.decided_by == maintainer


def test_apply_is_all_or_nothing_when_the_third_operation_fails(project, member, maintainer, make_item):
    target = make_item(title="Target")
    changeset = propose(
        project,
        member,
        [
            {"op": "create", "ref": "one", "kind": "ticket", "fields": {"title": "One"}},
            {"op": "create", "ref": "two", "kind": "ticket", "fields": {"title": "Two"}},
            {"op": "update", "item": target.key, "base_version": 1, "fields": {"state": "ready"}},
        ],
    )
    item_update(actor=Actor(user=maintainer), item=target, fields={"title": "Changed meanwhile"})
    before_events = ActivityEvent.objects.count()
    result = changeset_apply(actor=Actor(user=maintainer), changeset=changeset)
    assert result.status == ChangesetStatus.CONFLICTED
    assert not Item.objects.filter(title__in=["One", "Two"]).exists()
    target.refresh_from_db()
    assert (target.state, target.version) == ("draft", 2)
    assert "base_version 1 is stale" in result.conflict_reason
    assert "now at version 2" in result.conflict_reason
    # Only the conflict itself is logged: none of the undone operations.
    assert list(ActivityEvent.objects.order_by("seq").values_list("verb", flat=True)[before_events:]) == [
        "changeset.conflicted"
    ]


def test_apply_revalidates_a_cycle_made_meanwhile(project, member, maintainer, make_item):
    a, b = make_item(title="A"), make_item(title="B")
    first = propose(project, member, [{"op": "add_dependency", "blocker": a.key, "blocked": b.key}])
    second = propose(project, member, [{"op": "add_dependency", "blocker": b.key, "blocked": a.key}])
    assert changeset_apply(actor=Actor(user=maintainer), changeset=first).status == "applied"
    result = changeset_apply(actor=Actor(user=maintainer), changeset=second)
    assert result.status == ChangesetStatus.CONFLICTED
    assert "cycle" in result.conflict_reason
    assert Dependency.objects.count() == 1


def test_remove_dependency(project, member, maintainer, make_item):
    a, b = make_item(title="A"), make_item(title="B")
    Dependency.objects.create(blocker=a, blocked=b)
    changeset = propose(project, member, [{"op": "remove_dependency", "blocker": a.key, "blocked": b.key}])
    changeset_apply(actor=Actor(user=maintainer), changeset=changeset)
    assert not Dependency.objects.exists()


def test_remove_missing_dependency_is_refused(project, member, make_item):
    a, b = make_item(title="A"), make_item(title="B")
    errors = errors_of(project, member, [{"op": "remove_dependency", "blocker": a.key, "blocked": b.key}])
    assert "no dependency" in errors["operations[0]"][0]


def test_applied_and_rejected_changesets_cannot_change(project, member, maintainer):
    ops = [{"op": "create", "kind": "ticket", "fields": {"title": "T"}}]
    applied = changeset_apply(actor=Actor(user=maintainer), changeset=propose(project, member, ops))
    rejected = changeset_reject(
        actor=Actor(user=maintainer), changeset=propose(project, member, ops), note="No"
    )
    for decided in (applied, rejected):
        with pytest.raises(InvalidStateError):
            changeset_apply(actor=Actor(user=maintainer), changeset=decided)
        with pytest.raises(InvalidStateError):
            changeset_reject(actor=Actor(user=maintainer), changeset=decided, note="again")
    assert Item.objects.filter(title="T").count() == 1


def test_reject_keeps_the_note(project, member, maintainer):
    changeset = propose(project, member, [{"op": "create", "kind": "ticket", "fields": {"title": "T"}}])
    result = changeset_reject(actor=Actor(user=maintainer), changeset=changeset, note="  Too big; split it. ")
    assert (result.status, result.decision_note, result.decided_by) == (
        "rejected",
        "Too big; split it.",
        maintainer,
    )
    assert not Item.objects.exists()


def test_member_cannot_apply_or_reject(project, member):
    changeset = propose(project, member, [{"op": "create", "kind": "ticket", "fields": {"title": "T"}}])
    with pytest.raises(PermissionDeniedError):
        changeset_apply(actor=Actor(user=member), changeset=changeset)
    with pytest.raises(PermissionDeniedError):
        changeset_reject(actor=Actor(user=member), changeset=changeset, note="")
    changeset.refresh_from_db()
    assert changeset.status == "proposed"


def test_the_planner_cannot_decide_even_for_a_maintainer(project, maintainer):
    changeset = propose(project, maintainer, [{"op": "create", "kind": "ticket", "fields": {"title": "T"}}])
    planner = Actor(user=maintainer, planner_session=uuid.uuid4())
    with pytest.raises(PermissionDeniedError):
        changeset_apply(actor=planner, changeset=changeset)
    with pytest.raises(PermissionDeniedError):
        changeset_reject(actor=planner, changeset=changeset)


def test_four_eyes_refuses_a_self_apply(project, maintainer, owner):
    project.settings = {"four_eyes": True}
    project.save()
    changeset = propose(project, maintainer, [{"op": "create", "kind": "ticket", "fields": {"title": "T"}}])
    with pytest.raises(PermissionDeniedError, match="four eyes"):
        changeset_apply(actor=Actor(user=maintainer), changeset=changeset)
    assert changeset_apply(actor=Actor(user=owner), changeset=changeset).status == "applied"


def test_without_four_eyes_the_proposer_may_apply(project, maintainer):
    changeset = propose(project, maintainer, [{"op": "create", "kind": "ticket", "fields": {"title": "T"}}])
    assert changeset_apply(actor=Actor(user=maintainer), changeset=changeset).status == "applied"


def test_numbers_are_per_project(project, other_project, member, users):
    first = propose(project, member, [{"op": "create", "kind": "ticket", "fields": {"title": "T"}}])
    second = propose(project, member, [{"op": "create", "kind": "ticket", "fields": {"title": "U"}}])
    assert (first.number, second.number) == (1, 2)


def test_title_and_operations_shape_errors(project, member):
    with pytest.raises(ValidationError) as info:
        changeset_propose(actor=Actor(user=member), project=project, title="", operations="nope")
    assert set(info.value.errors) == {"title", "operations"}
    with pytest.raises(ValidationError) as info:
        changeset_propose(actor=Actor(user=member), project=project, title="x" * 201, operations=[1])
    assert set(info.value.errors) == {"title", "operations[0]"}


@pytest.mark.parametrize(
    ("title", "rationale", "fields", "where"),
    [
        ("T\x00", "", {"title": "x"}, "title"),
        ("T", "why\x00", {"title": "x"}, "rationale"),
        (
            "T",
            "",
            {"title": "x", "acceptance_criteria": ["ok", "no\x00"]},
            "operations[0].fields.acceptance_criteria[1]",
        ),
    ],
)
def test_a_nul_is_refused_by_the_service_itself(project, member, title, rationale, fields, where):
    with pytest.raises(ValidationError) as refused:
        changeset_propose(
            actor=Actor(user=member),
            project=project,
            title=title,
            rationale=rationale,
            operations=[{"op": "create", "kind": "ticket", "fields": fields}],
        )

    assert refused.value.errors == {where: ["NUL characters are not allowed."]}
    assert not Changeset.objects.exists()


def test_items_refuse_a_nul_in_any_field(make_item, owner):
    with pytest.raises(ValidationError) as refused:
        make_item(title="Bad\x00")
    assert refused.value.errors == {"title": ["NUL characters are not allowed."]}

    item = make_item(title="Good")
    with pytest.raises(ValidationError):
        item_update(actor=Actor(user=owner), item=item, fields={"policy": {"k\x00": 1}})
    item.refresh_from_db()
    assert (item.policy, item.version) == ({}, 1)
