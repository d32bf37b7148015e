"""The index follows every write: create, update, delete, changeset apply, and only committed work."""

from __future__ import annotations

import pytest
from django.db import transaction

from knowledge.search import knowledge_search
from knowledge.services import knowledge_create, knowledge_update
from tracker.models import Item, Project, SearchDocument
from tracker.search import project_search
from tracker.search.documents import item_documents
from tracker.search.indexing import documents_write
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_apply, changeset_propose
from tracker.services.items import item_update
from tracker.services.skills import skill_version_create
from tracker.tasks import search_index_on_commit


def _keys(project, query: str) -> list[str]:
    return [hit.key for hit in project_search(project=project, query=query)]


def test_a_created_item_is_found_after_its_commit_only(project, make_item, indexed):
    item = make_item(title="Quarterly tax report")
    assert _keys(project, "quarterly tax") == []  # not committed yet: nothing indexed
    with indexed():
        item = make_item(title="Quarterly tax report")
    assert _keys(project, "quarterly tax") == [item.key]


def test_an_update_replaces_the_old_words(project, owner, make_item, indexed):
    with indexed():
        item = make_item(title="Quarterly tax report")
    assert _keys(project, "quarterly") == [item.key]
    with indexed():
        item_update(actor=Actor(user=owner), item=item, fields={"title": "Annual audit", "state": "ready"})
    assert _keys(project, "quarterly") == []
    hit = project_search(project=project, query="annual audit")[0]
    assert (hit.key, hit.title, hit.state) == (item.key, "Annual audit", "ready")


def test_a_changeset_apply_indexes_what_it_created_and_changed(project, owner, make_item, indexed):
    with indexed():
        existing = make_item(title="Old name")
    changeset = changeset_propose(
        actor=Actor(user=owner),
        project=project,
        title="Plan",
        operations=[
            {"op": "create", "kind": "ticket", "fields": {"title": "Webhook signature check"}},
            {"op": "update", "item": existing.key, "base_version": 1, "fields": {"title": "Renamed ticket"}},
        ],
    )
    with indexed():
        changeset_apply(actor=Actor(user=owner), changeset=changeset)
    assert _keys(project, "webhook signature") == [f"{project.key}-2"]
    assert _keys(project, "renamed") == [existing.key]
    assert _keys(project, "old name") == []


def test_skills_and_knowledge_follow_their_new_versions(project, owner, indexed):
    actor = Actor(user=owner)
    with indexed():
        skill_version_create(actor=actor, project=project, name="triage", body="Label every bug")
        entry = knowledge_create(actor=actor, kind="note", title="Bug labels", body="red", projects=[project])
    with indexed():
        skill_version_create(actor=actor, project=project, name="triage", body="Assign an owner first")
        knowledge_update(actor=actor, entry=entry, version=1, fields={"body": "Use the severity scale"})
    assert _keys(project, "assign owner") == ["triage"]
    assert _keys(project, "label every") == []
    org = project.organization_id
    assert [h.key for h in knowledge_search(organization_id=org, query="severity scale", hidden=())] == [
        str(entry.pk)
    ]


def test_a_deleted_object_leaves_the_index(project, make_item, indexed):
    with indexed():
        item = make_item(title="Legacy importer")
    assert _keys(project, "legacy importer") == [item.key]
    Item.objects.filter(pk=item.pk).delete()  # no service deletes items; whatever does must enqueue this
    with indexed(), transaction.atomic():
        search_index_on_commit("item", [item.pk])
    assert _keys(project, "legacy importer") == []
    assert SearchDocument.objects.get(object_id=item.pk, kind="item").deleted


def test_a_deleted_project_takes_its_documents_along(org, project, owner, make_item, indexed):
    doomed = Project.objects.create(organization=org, key="DOOM", name="Doomed")
    with indexed():
        make_item(title="Doomed ticket", target=doomed)
        make_item(title="Surviving ticket")
    assert _keys(doomed, "ticket") == ["DOOM-1"]
    doomed.delete()  # the admin's cascade (superusers only)
    assert not SearchDocument.objects.filter(key="DOOM-1").exists()
    assert _keys(project, "ticket") == ["BAL-1"]


def test_an_older_task_never_overwrites_a_newer_document(project, owner, make_item, indexed):
    with indexed():
        item = make_item(title="First title")
    stale = item_documents([item.pk])
    with indexed():
        item_update(actor=Actor(user=owner), item=item, fields={"title": "Second title"})
    documents_write(stale)  # a slow task that read version 1 writes last
    assert _keys(project, "second title") == [item.key]
    assert _keys(project, "first") == []


@pytest.mark.django_db(transaction=True)
def test_a_real_commit_indexes_through_the_celery_task(project, make_item):
    """No capture: the service's own transaction commits and the (eager) task runs on commit."""
    item = make_item(title="Committed for real")
    assert _keys(project, "committed real") == [item.key]
    try:
        with transaction.atomic():
            make_item(title="Rolled back ticket")
            raise RuntimeError
    except RuntimeError:
        pass
    assert _keys(project, "rolled back") == []
