"""Knowledge: versions, revisions, optimistic concurrency, links and visibility."""

from __future__ import annotations

import uuid

import pytest

from knowledge.models import KnowledgeRevision
from knowledge.selectors import knowledge_get, knowledge_list
from knowledge.services import knowledge_create, knowledge_update
from tests.factories import make_membership, make_project, make_user
from tracker.errors import ConflictError, NotFoundError, PermissionDeniedError, ValidationError
from tracker.models import ActivityEvent
from tracker.services.activity import Actor


def create(user, project, **fields):
    values = {
        "kind": "decision",
        "title": "Use Postgres",
        "body": "Because.",
        "projects": [project],
        **fields,
    }
    return knowledge_create(actor=Actor(user=user), **values)


def test_create_records_version_one_and_its_revision(project, member):
    entry = create(member, project)
    assert (entry.version, entry.author, entry.last_editor) == (1, member, member)
    assert list(entry.revisions.values_list("version", "title")) == [(1, "Use Postgres")]


def test_update_with_the_read_version_bumps_and_keeps_revisions(project, member, maintainer):
    entry = create(member, project)
    updated = knowledge_update(
        actor=Actor(user=maintainer), entry=entry, version=1, fields={"body": "Because JSONB."}
    )
    assert (updated.version, updated.last_editor, updated.author) == (2, maintainer, member)
    revisions = KnowledgeRevision.objects.filter(entry=entry).order_by("version")
    assert [(r.version, r.body) for r in revisions] == [(1, "Because."), (2, "Because JSONB.")]


def test_stale_version_is_a_conflict_with_the_current_version(project, member):
    entry = create(member, project)
    knowledge_update(actor=Actor(user=member), entry=entry, version=1, fields={"title": "First edit"})
    with pytest.raises(ConflictError) as info:
        knowledge_update(actor=Actor(user=member), entry=entry, version=1, fields={"title": "Lost edit"})
    assert info.value.current is not None
    assert (info.value.current["version"], info.value.current["title"]) == (2, "First edit")
    entry.refresh_from_db()
    assert (entry.version, entry.title) == (2, "First edit")


def test_planner_writes_are_attributed_to_the_human(project, member):
    session = uuid.uuid4()
    entry = knowledge_create(
        actor=Actor(user=member, planner_session=session),
        kind="note",
        title="Noted",
        projects=[project],
    )
    assert entry.author == member
    event = ActivityEvent.objects.get(verb="knowledge.created")
    assert (event.actor, event.on_behalf_of) == (f"planner:{session}", member)
    assert entry.revisions.get().actor == f"planner:{session}"


def test_viewer_cannot_write(project, viewer, member):
    with pytest.raises(PermissionDeniedError):
        create(viewer, project)
    entry = create(member, project)
    with pytest.raises(PermissionDeniedError):
        knowledge_update(actor=Actor(user=viewer), entry=entry, version=1, fields={"title": "x"})


def test_items_must_belong_to_a_linked_project(project, other_project, member, make_item):
    foreign = make_item(target=other_project)
    with pytest.raises(ValidationError):
        create(member, project, items=[foreign])
    own = make_item()
    entry = create(member, project, items=[own])
    assert list(entry.items.all()) == [own]


def test_invalid_fields(project, member):
    with pytest.raises(ValidationError) as info:
        create(member, project, kind="memo", title="", body=3)
    assert set(info.value.errors) == {"kind", "title", "body"}
    entry = create(member, project)
    with pytest.raises(ValidationError) as info:
        knowledge_update(actor=Actor(user=member), entry=entry, version="1", fields={"colour": "red"})
    assert "version" in info.value.errors


def test_an_entry_linked_to_projects_is_readable_by_who_reads_every_one_of_them(
    project, org, other_project, member, owner, users
):
    sibling = make_project(organization=org, key="SIB")
    make_membership(project=sibling, user=owner, role="owner")
    sibling_reader = users["stranger"]
    make_membership(project=sibling, user=sibling_reader, role="viewer")
    outsider = make_membership(project=other_project, role="owner").user
    root = make_user(username="root", is_superuser=True)
    own = create(member, project, title="BAL only")
    both = create(owner, project, title="BAL and SIB", projects=[project, sibling])
    unlinked = create(member, project, title="Organization-wide")
    unlinked.projects.clear()

    def titles(user):
        return sorted(e.title for e in knowledge_list(user=user))

    assert titles(member) == ["BAL only", "Organization-wide"]
    assert titles(sibling_reader) == ["Organization-wide"]
    assert titles(owner) == titles(root) == ["BAL and SIB", "BAL only", "Organization-wide"]
    assert titles(outsider) == []
    for user, entry in [(sibling_reader, own), (member, both), (outsider, unlinked)]:
        with pytest.raises(NotFoundError):
            knowledge_get(user=user, entry_id=entry.pk)
    assert knowledge_get(user=sibling_reader, entry_id=unlinked.pk) == unlinked


def test_a_member_cannot_change_or_unlink_an_entry_linked_to_a_project_they_cannot_read(
    project, org, member, owner
):
    hidden = make_project(organization=org, key="HID")
    make_membership(project=hidden, user=owner, role="owner")
    entry = create(owner, project, title="Shared", projects=[project, hidden])

    for links in ([project], None):
        with pytest.raises(NotFoundError):
            knowledge_update(
                actor=Actor(user=member), entry=entry, version=1, fields={"body": "mine"}, projects=links
            )

    entry.refresh_from_db()
    assert (entry.version, entry.body) == (1, "Because.")
    assert sorted(p.key for p in entry.projects.all()) == ["BAL", "HID"]
    # Someone who reads both projects may unlink one.
    knowledge_update(actor=Actor(user=owner), entry=entry, version=1, fields={}, projects=[project])
    assert [p.key for p in entry.projects.all()] == ["BAL"]


def test_list_filters(project, member, indexed):
    with indexed():
        create(member, project, kind="decision", title="Adopt Celery", body="queues")
        create(member, project, kind="debt", title="Old settings module", body="cleanup")
    assert [e.title for e in knowledge_list(user=member, kind="debt")] == ["Old settings module"]
    assert [e.title for e in knowledge_list(user=member, q="celery")] == ["Adopt Celery"]
    assert len(knowledge_list(user=member, project=project)) == 2


def test_an_update_that_changes_nothing_writes_no_version(project, member):
    entry = create(member, project)
    same = knowledge_update(
        actor=Actor(user=member), entry=entry, version=1, fields={"title": " Use Postgres "}
    )
    assert same.version == 1
    assert entry.revisions.count() == 1


def test_relinking_keeps_links_to_projects_the_editor_cannot_write(project, org, member, users):
    hidden = make_project(organization=org, key="HID")
    owner_of_both = users["owner"]
    make_membership(project=hidden, user=owner_of_both, role="owner")
    make_membership(project=hidden, user=member, role="viewer")  # reads HID, writes only BAL
    entry = knowledge_create(
        actor=Actor(user=owner_of_both), kind="note", title="Shared", projects=[project, hidden]
    )
    updated = knowledge_update(
        actor=Actor(user=member),
        entry=entry,
        version=1,
        fields={"body": "edited"},
        projects=[project, hidden],
        items=[],
    )
    assert updated.version == 2
    assert sorted(p.key for p in updated.projects.all()) == ["BAL", "HID"]
    with pytest.raises(PermissionDeniedError):
        knowledge_create(actor=Actor(user=member), kind="note", title="x", projects=[hidden])


def test_a_nul_is_refused_by_the_knowledge_services(project, member):
    actor = Actor(user=member)
    with pytest.raises(ValidationError) as refused:
        knowledge_create(actor=actor, kind="note", title="Fine", body="a\x00b", projects=[project])
    assert refused.value.errors == {"body": ["NUL characters are not allowed."]}
    entry = knowledge_create(actor=actor, kind="note", title="Fine", body="ok", projects=[project])
    with pytest.raises(ValidationError) as refused:
        knowledge_update(actor=actor, entry=entry, version=1, fields={"title": "x\x00"})
    assert refused.value.errors == {"title": ["NUL characters are not allowed."]}
    entry.refresh_from_db()
    assert (entry.title, entry.version) == ("Fine", 1)
