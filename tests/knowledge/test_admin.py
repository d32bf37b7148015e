"""The knowledge admin: entries written through the services, stale saves refused, scoping."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse
from django.utils.html import strip_tags

from knowledge.models import KnowledgeEntry, KnowledgeRevision
from knowledge.services import knowledge_create, knowledge_update
from tests.factories import MembershipFactory, UserFactory
from tracker.models import ActivityEvent, Project, Role
from tracker.services.activity import Actor
from tracker.services.items import item_create


@pytest.fixture
def entries(project, other_project, staff) -> dict[str, KnowledgeEntry]:
    """A decision of BAL's organization, and a note of another organization."""
    outsider: Any = UserFactory(username="outsider")
    MembershipFactory(project=other_project, user=outsider, role=Role.OWNER)
    own = knowledge_create(
        actor=Actor(user=staff["member"]),
        kind="decision",
        title="Use Postgres",
        body="Because.",
        projects=[project],
    )
    foreign = knowledge_create(
        actor=Actor(user=outsider),
        kind="note",
        title="Foreign secret",
        body="Hidden.",
        projects=[other_project],
    )
    return {"own": own, "foreign": foreign}


def admin_url(name: str, *args: Any) -> str:
    return reverse(f"admin:{name}", args=args)


def page_text(response) -> str:
    return re.sub(r"\s+", " ", strip_tags(response.content.decode()))


def entry_form(entry: KnowledgeEntry, **changes: Any) -> dict[str, Any]:
    data = {
        "kind": entry.kind,
        "title": entry.title,
        "body": entry.body,
        "projects": [p.pk for p in entry.projects.all()],
        "items": [i.pk for i in entry.items.all()],
        "version_read": entry.version,
    }
    return {**data, **changes}


@pytest.mark.parametrize("model", ["knowledgeentry", "knowledgerevision"])
def test_superuser_sees_every_organizations_knowledge(client, superuser, entries, model):
    client.force_login(superuser)
    listing = client.get(admin_url(f"knowledge_{model}_changelist")).content.decode()
    for entry in entries.values():
        obj = entry if model == "knowledgeentry" else entry.revisions.get()
        assert admin_url(f"knowledge_{model}_change", obj.pk) in listing
        assert client.get(admin_url(f"knowledge_{model}_change", obj.pk)).status_code == 200
    assert client.get(admin_url(f"knowledge_{model}_add")).status_code == (
        200 if model == "knowledgeentry" else 403
    )


@pytest.mark.parametrize("model", ["knowledgeentry", "knowledgerevision"])
def test_owner_sees_only_their_organizations_knowledge(client, staff, entries, model):
    client.force_login(staff["owner"])
    own, foreign = entries["own"], entries["foreign"]
    if model == "knowledgerevision":
        own, foreign = own.revisions.get(), foreign.revisions.get()
    response = client.get(admin_url(f"knowledge_{model}_changelist"))
    assert response.status_code == 200
    listing = response.content.decode()
    assert admin_url(f"knowledge_{model}_change", own.pk) in listing
    assert admin_url(f"knowledge_{model}_change", foreign.pk) not in listing
    assert "Foreign secret" not in listing
    assert "Other" not in listing
    assert client.get(admin_url(f"knowledge_{model}_change", own.pk)).status_code == 200
    assert client.get(admin_url(f"knowledge_{model}_change", foreign.pk)).status_code == 404


def test_entry_add_goes_through_the_service(client, project, staff, make_item):
    item = make_item(title="Storage ticket")
    client.force_login(staff["member"])
    response = client.post(
        admin_url("knowledge_knowledgeentry_add"),
        {
            "kind": "debt",
            "title": "Old ORM",
            "body": "Replace it.",
            "projects": [project.pk],
            "items": [item.pk],
        },
    )
    assert response.status_code == 302
    entry = KnowledgeEntry.objects.get(title="Old ORM")
    assert (entry.version, entry.author, list(entry.items.all())) == (1, staff["member"], [item])
    assert list(entry.revisions.values_list("version", "actor")) == [(1, "user:member")]
    assert ActivityEvent.objects.filter(verb="knowledge.created", actor="user:member").exists()


def test_entry_add_needs_a_project(client, staff):
    client.force_login(staff["member"])
    response = client.post(admin_url("knowledge_knowledgeentry_add"), {"kind": "note", "title": "Lonely"})
    assert "Link the entry to at least one project." in response.content.decode()
    assert not KnowledgeEntry.objects.exists()


def test_entry_change_bumps_the_version_and_keeps_a_revision(client, staff, entries):
    entry = entries["own"]
    client.force_login(staff["maintainer"])
    response = client.post(
        admin_url("knowledge_knowledgeentry_change", entry.pk), entry_form(entry, body="JSONB.")
    )
    assert response.status_code == 302
    entry.refresh_from_db()
    assert (entry.version, entry.body, entry.last_editor) == (2, "JSONB.", staff["maintainer"])
    assert sorted(entry.revisions.values_list("version", "body")) == [(1, "Because."), (2, "JSONB.")]
    assert ActivityEvent.objects.filter(verb="knowledge.updated", actor="user:maintainer").exists()


def test_saving_without_changes_writes_no_version(client, staff, entries):
    entry = entries["own"]
    client.force_login(staff["member"])
    assert (
        client.post(admin_url("knowledge_knowledgeentry_change", entry.pk), entry_form(entry)).status_code
        == 302
    )
    entry.refresh_from_db()
    assert entry.version == 1


def test_stale_save_is_refused_with_a_clear_message_and_nothing_lost(client, staff, entries):
    entry = entries["own"]
    read = entry_form(entry, body="My careful rewrite.")
    knowledge_update(actor=Actor(user=staff["owner"]), entry=entry, version=1, fields={"body": "Their edit."})
    client.force_login(staff["member"])
    url = admin_url("knowledge_knowledgeentry_change", entry.pk)
    response = client.post(url, read)
    assert response.status_code == 200
    text = page_text(response)
    assert "Someone changed this while you were editing: you read version 1, it is now at version 2." in text
    assert "My careful rewrite." in response.content.decode()
    entry.refresh_from_db()
    assert (entry.version, entry.body) == (2, "Their edit.")
    # The form now carries the current version: saving again, knowingly, replaces it.
    assert 'name="version_read" value="2"' in response.content.decode()
    assert client.post(url, {**read, "version_read": 2}).status_code == 302
    entry.refresh_from_db()
    assert (entry.version, entry.body) == (3, "My careful rewrite.")


def test_viewer_reads_but_cannot_change_an_entry(client, staff, entries):
    entry = entries["own"]
    client.force_login(staff["viewer"])
    url = admin_url("knowledge_knowledgeentry_change", entry.pk)
    assert client.get(url).status_code == 200
    assert client.post(url, entry_form(entry, title="Vandalized")).status_code == 403
    assert client.get(admin_url("knowledge_knowledgeentry_add")).status_code == 403
    entry.refresh_from_db()
    assert entry.title == "Use Postgres"


def test_knowledge_list_filters_by_kind_and_searches_the_body(client, staff, entries, project):
    knowledge_create(
        actor=Actor(user=staff["member"]),
        kind="note",
        title="Standup notes",
        body="Talked",
        projects=[project],
    )
    client.force_login(staff["viewer"])
    url = admin_url("knowledge_knowledgeentry_changelist")
    text = page_text(client.get(url, {"kind__exact": "note"}))
    assert "Standup notes" in text
    assert "Use Postgres" not in text
    text = page_text(client.get(url, {"q": "because"}))
    assert "Use Postgres" in text
    assert "Standup notes" not in text


def test_revisions_are_read_only(client, superuser, entries):
    revision = KnowledgeRevision.objects.get(entry=entries["own"])
    client.force_login(superuser)
    url = admin_url("knowledge_knowledgerevision_change", revision.pk)
    assert client.post(url, {"title": "Rewritten history"}).status_code == 403
    assert (
        client.post(admin_url("knowledge_knowledgerevision_delete", revision.pk), {"post": "yes"}).status_code
        == 403
    )
    revision.refresh_from_db()
    assert revision.title == "Use Postgres"


def test_an_entry_linked_to_a_project_the_staff_user_cannot_read_leaves_no_trace(
    client, project, org, staff, entries, superuser
):
    sibling = Project.objects.create(organization=org, key="SIB", name="Sibling")
    insider: Any = UserFactory(username="insider")
    MembershipFactory(project=sibling, user=insider, role=Role.OWNER)
    MembershipFactory(project=project, user=insider, role=Role.OWNER)
    secret = item_create(
        actor=Actor(user=insider), project=sibling, kind="ticket", fields={"title": "Confidential launch"}
    )
    entry = knowledge_create(
        actor=Actor(user=insider),
        kind="note",
        title="Merger Bluebird",
        body="Only for SIB.",
        projects=[project, sibling],
        items=[secret],
    )
    client.force_login(staff["owner"])

    pages = [
        client.get(admin_url("knowledge_knowledgeentry_changelist")),
        client.get(admin_url("knowledge_knowledgerevision_changelist")),
        client.get(admin_url("knowledge_knowledgeentry_add")),
        client.get(admin_url("knowledge_knowledgeentry_change", entries["own"].pk)),
        client.get(admin_url("tracker_activityevent_changelist"), {"q": "knowledge:"}),
    ]
    for page in pages:
        assert page.status_code == 200
        text = page.content.decode()
        assert "Bluebird" not in text
        assert "Confidential launch" not in text
        assert "Sibling" not in text
    assert client.get(admin_url("knowledge_knowledgeentry_change", entry.pk)).status_code == 404
    activity = client.get(admin_url("tracker_activityevent_changelist"), {"q": "knowledge:"})
    assert f"knowledge:{entry.pk}<" not in activity.content.decode()
    assert f"knowledge:{entries['own'].pk}<" in activity.content.decode()
    event = ActivityEvent.objects.get(verb="knowledge.created", target=f"knowledge:{entry.pk}")
    assert client.get(admin_url("tracker_activityevent_change", event.pk)).status_code == 404
    own_event = ActivityEvent.objects.get(verb="knowledge.created", target=f"knowledge:{entries['own'].pk}")
    assert client.get(admin_url("tracker_activityevent_change", own_event.pk)).status_code == 200
    revision = entry.revisions.get()
    assert client.get(admin_url("knowledge_knowledgerevision_change", revision.pk)).status_code == 404
    response = client.post(
        admin_url("knowledge_knowledgeentry_change", entry.pk),
        entry_form(entry, projects=[project.pk], items=[]),
    )
    assert response.status_code == 404
    assert sorted(p.key for p in entry.projects.all()) == ["BAL", "SIB"]
    assert list(entry.items.all()) == [secret]
    # Who reads both projects sees the entry and every link.
    client.force_login(superuser)
    page = client.get(admin_url("knowledge_knowledgeentry_change", entry.pk)).content.decode()
    assert "Confidential launch" in page


def test_the_entry_form_offers_only_readable_links(client, project, org, staff):
    """A reader of SIB who writes only BAL keeps SIB's link and sees its items; nothing of a third project."""
    sibling = Project.objects.create(organization=org, key="SIB", name="Sibling")
    third = Project.objects.create(organization=org, key="THI", name="Third")
    insider: Any = UserFactory(username="insider")
    for p in (project, sibling, third):
        MembershipFactory(project=p, user=insider, role=Role.OWNER)
    MembershipFactory(project=sibling, user=staff["member"], role=Role.VIEWER)
    sib_item = item_create(
        actor=Actor(user=insider), project=sibling, kind="ticket", fields={"title": "SIB work"}
    )
    item_create(actor=Actor(user=insider), project=third, kind="ticket", fields={"title": "Third work"})
    entry = knowledge_create(
        actor=Actor(user=insider), kind="note", title="Shared", projects=[project, sibling], items=[sib_item]
    )
    client.force_login(staff["member"])

    page = client.get(admin_url("knowledge_knowledgeentry_change", entry.pk)).content.decode()

    assert "SIB work" in page
    assert "Third work" not in page
    assert "Third" not in page
