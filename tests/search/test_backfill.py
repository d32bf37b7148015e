"""manage.py search_backfill indexes a whole organization and reports its progress."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import KnowledgeEntry
from tracker.models import Item, SearchDocument
from tracker.search import ITEM, KNOWLEDGE, SearchScope, project_search, search


def test_backfill_indexes_rows_written_around_the_services(org, project, owner, other_project):
    Item.objects.bulk_create(
        Item(project=project, kind="ticket", number=n, title=f"Imported ticket {n}", state="draft")
        for n in range(1, 6)
    )
    entry = KnowledgeEntry.objects.create(
        organization=org, kind="note", title="Imported note", author=owner, last_editor=owner
    )
    Item.objects.create(
        project=other_project, kind="ticket", number=1, title="Imported elsewhere", state="draft"
    )
    assert project_search(project=project, query="imported") == []

    out = StringIO()
    call_command("search_backfill", "acme", "--batch", "2", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[:3] == ["acme item: 2/5 (40%)", "acme item: 4/5 (80%)", "acme item: 5/5 (100%)"]
    assert "acme knowledge: 1/1 (100%)" in lines
    assert lines[-1].startswith("acme: 6 documents in ")
    assert len(project_search(project=project, query="imported ticket")) == 5
    scope = SearchScope(organization_id=org.pk, kinds=frozenset({KNOWLEDGE}))
    assert [hit.key for hit in search(scope=scope, query="imported note")] == [str(entry.pk)]
    assert not SearchDocument.objects.filter(organization=other_project.organization).exists()


def test_backfill_tombstones_documents_whose_object_is_gone(org, project, make_item, indexed):
    with indexed():
        kept, gone = make_item(title="Kept ticket"), make_item(title="Gone ticket")
    Item.objects.filter(pk=gone.pk).delete()
    call_command("search_backfill", "--all", stdout=StringIO())
    assert [hit.key for hit in project_search(project=project, query="ticket")] == [kept.key]
    assert SearchDocument.objects.get(kind=ITEM, object_id=gone.pk).deleted


@pytest.mark.parametrize("args", [(), ("acme", "--all"), ("nope",)])
def test_backfill_needs_known_organizations_or_all(org, args):
    with pytest.raises(CommandError):
        call_command("search_backfill", *args, stdout=StringIO())


def test_unindexed_skips_organizations_already_indexed(org, project, make_item, indexed, other_project):
    with indexed():
        make_item(title="Indexed already")
    Item.objects.create(project=other_project, kind="ticket", number=1, title="Never indexed", state="draft")
    out = StringIO()
    call_command("search_backfill", "--all", "--unindexed", stdout=out)
    assert "acme" not in out.getvalue()
    assert "other item: 1/1 (100%)" in out.getvalue()
