"""The activity log: one event per change, with the right actor and a monotonic seq."""

from __future__ import annotations

import uuid

import pytest

from knowledge.services import knowledge_create, knowledge_update
from tests.factories import ProjectFactory
from tracker.errors import ValidationError
from tracker.models import ActivityEvent
from tracker.selectors import activity_since
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_apply, changeset_propose, changeset_reject
from tracker.services.items import item_update
from tracker.services.projects import membership_remove, membership_set, project_update
from tracker.services.skills import skill_pin_set, skill_version_create


def events() -> list[tuple[str, str, str, str]]:
    return [
        (e.verb, e.actor, e.on_behalf_of.username, e.target)
        for e in ActivityEvent.objects.select_related("on_behalf_of").order_by("seq")
    ]


def test_every_kind_of_change_is_logged_with_its_actor(project, member, maintainer, owner, users):
    session = uuid.uuid4()
    planner = Actor(user=member, planner_session=session)
    changeset = changeset_propose(
        actor=planner,
        project=project,
        title="Start",
        operations=[
            {"op": "create", "ref": "a", "kind": "ticket", "fields": {"title": "A"}},
            {"op": "create", "ref": "b", "kind": "ticket", "fields": {"title": "B"}},
            {"op": "add_dependency", "blocker": "$a", "blocked": "$b"},
        ],
    )
    changeset_apply(actor=Actor(user=maintainer), changeset=changeset)
    removal = changeset_propose(
        actor=Actor(user=member),
        project=project,
        title="Undo",
        operations=[{"op": "remove_dependency", "blocker": "BAL-1", "blocked": "BAL-2"}],
    )
    changeset_reject(actor=Actor(user=maintainer), changeset=removal, note="keep it")
    entry = knowledge_create(actor=planner, kind="note", title="N", projects=[project])
    knowledge_update(actor=Actor(user=member), entry=entry, version=1, fields={"body": "more"})
    version = skill_version_create(
        actor=Actor(user=maintainer), project=project, name="planner", body="rules"
    )
    skill_pin_set(actor=Actor(user=maintainer), project=project, skill=version.skill, version=1)
    project_update(actor=Actor(user=owner), project=project, credential="sk-secret")
    # A role change: a non-member joins only by accepting an invitation (issue 41).
    membership_set(actor=Actor(user=owner), project=project, username="viewer", role="member")
    planner_label = f"planner:{session}"
    assert events() == [
        ("changeset.proposed", planner_label, "member", "changeset:1"),
        ("item.created", "user:maintainer", "maintainer", "BAL-1"),
        ("item.created", "user:maintainer", "maintainer", "BAL-2"),
        ("dependency.added", "user:maintainer", "maintainer", "BAL-2"),
        ("changeset.applied", "user:maintainer", "maintainer", "changeset:1"),
        ("changeset.proposed", "user:member", "member", "changeset:2"),
        ("changeset.rejected", "user:maintainer", "maintainer", "changeset:2"),
        ("knowledge.created", planner_label, "member", f"knowledge:{entry.pk}"),
        ("knowledge.updated", "user:member", "member", f"knowledge:{entry.pk}"),
        ("skill.created", "user:maintainer", "maintainer", "skill:planner"),
        ("skill.pinned", "user:maintainer", "maintainer", "skill:planner"),
        ("project.updated", "user:owner", "owner", "BAL"),
        ("membership.set", "user:owner", "owner", "user:viewer"),
    ]
    applied = ActivityEvent.objects.get(verb="changeset.applied")
    assert applied.data["planner_session"] == str(session)
    assert "sk-secret" not in str(list(ActivityEvent.objects.values_list("data", flat=True)))


def test_item_update_logs_before_and_after(project, member, make_item):
    item = make_item(title="Old")
    item_update(actor=Actor(user=member), item=item, fields={"title": "New", "state": "ready"})
    event = ActivityEvent.objects.get(verb="item.updated")
    assert event.data == {"changes": {"title": ["Old", "New"], "state": ["draft", "ready"]}, "version": 2}


def test_seq_is_monotonic_per_organization_and_activity_since_reads_after_it(project, org, make_item):
    sibling = ProjectFactory(organization=org, key="SIB")
    make_item(title="one")
    make_item(title="two", target=sibling)
    make_item(title="three")
    seqs = list(ActivityEvent.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == [1, 2, 3]
    assert [e.target for e in activity_since(organization_id=org.pk, after_seq=1)] == ["SIB-1", "BAL-2"]


def test_other_organizations_count_their_own_seq(project, other_project, make_item):
    make_item(title="here")
    make_item(title="there", target=other_project)
    assert sorted(ActivityEvent.objects.values_list("seq", flat=True)) == [1, 1]


def test_the_last_owner_cannot_leave_or_be_demoted(project, owner, users):
    with pytest.raises(ValidationError, match="last owner"):
        membership_set(actor=Actor(user=owner), project=project, username="owner", role="member")
    with pytest.raises(ValidationError, match="last owner"):
        membership_remove(actor=Actor(user=owner), project=project, username="owner")
    membership_set(actor=Actor(user=owner), project=project, username="maintainer", role="owner")
    membership_set(actor=Actor(user=owner), project=project, username="owner", role="member")
