"""The ticket page's actions (tracker/web/item_actions.py): who sees them, state moves, the edit form,
blockers, claims, the plan's quick "New ticket"; what the messages say; stale edits; bad input."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from tests.factories import make_membership
from tracker.models import Changeset, ChangesetStatus, Claim, ClaimStatus, Dependency, Item, Role
from tracker.services.activity import Actor
from tracker.services.work import claim_take


def item_url(item: Item, action: str = "") -> str:
    return f"/projects/{item.project.key}/items/{item.key}/" + (f"{action}/" if action else "")


def fresh(item: Item) -> Item:
    return Item.objects.get(pk=item.pk)


def post(client: Client, user: Any, url: str, data: dict[str, Any]) -> Any:
    client.force_login(user)
    return client.post(url, data, follow=True)


def test_a_member_sees_the_actions_and_a_viewer_none(client: Client, member, viewer, make_item):
    ticket = make_item(state="in_review")

    client.force_login(member)
    page = client.get(item_url(ticket))
    assertContains(page, "Accept (done)")
    assertContains(page, "Send back")
    assertContains(page, ">Cancel<")
    assertContains(page, 'name="version" value="1"')
    assertContains(page, "Acceptance criteria")
    assert page["Content-Security-Policy"]

    client.force_login(viewer)
    page = client.get(item_url(ticket))
    assertNotContains(page, "Accept (done)")
    assertNotContains(page, item_url(ticket, "edit"))


def test_accepting_a_reviewed_ticket_applies_a_changeset(client: Client, member, make_item):
    ticket = make_item(state="in_review")

    page = post(client, member, item_url(ticket, "move"), {"version": "1", "state": "done"})

    assert fresh(ticket).state == "done"
    changeset = Changeset.objects.get()
    assert changeset.status == ChangesetStatus.APPLIED
    assertContains(page, f'Applied as <a href="/projects/BAL/changesets/{changeset.number}/">')
    assertContains(page, "Reopen")  # the page now offers done's moves


def test_a_disallowed_move_says_which_are_allowed(client: Client, member, make_item):
    ticket = make_item(state="draft")

    page = post(client, member, item_url(ticket, "move"), {"version": "1", "state": "done"})

    assertContains(page, "State: BAL-1 cannot move from draft to done; it may move to: ready, cancelled.")
    assert fresh(ticket).state == "draft"


def test_a_stale_edit_shows_the_conflict_and_changes_nothing(client: Client, member, make_item):
    ticket = make_item(title="Old", state="ready")
    post(client, member, item_url(ticket, "edit"), {"version": "1", "title": "Newer"})

    page = post(client, member, item_url(ticket, "edit"), {"version": "1", "title": "Stale"})

    assertContains(page, "changed since you read it")
    assert fresh(ticket).title == "Newer"
    assert Changeset.objects.count() == 1


def test_a_refused_edit_is_kept_in_the_form_once_at_the_version_now(client: Client, member, make_item):
    ticket = make_item(title="Old", state="ready", description="First words")
    post(client, member, item_url(ticket, "edit"), {"version": "1", "title": "Newer"})
    mine = {"version": "1", "title": "Mine", "description": "My **long** text", "priority": "urgent"}

    page = post(client, member, item_url(ticket, "edit"), mine)

    assertContains(page, '<details class="item-edit" open>')
    assertContains(page, 'value="Mine"')
    assertContains(page, ">My **long** text</textarea>")
    assertContains(page, '<option value="urgent" selected>')
    assertContains(page, 'name="version" value="2"')  # saving again is an edit of what is there now
    again = client.get(item_url(ticket))  # shown once
    assertNotContains(again, 'value="Mine"')
    assertContains(again, 'value="Newer"')
    post(client, member, item_url(ticket, "edit"), {**mine, "version": "2"})
    assert (fresh(ticket).title, fresh(ticket).description) == ("Mine", "My **long** text")


def test_the_edit_form_sets_every_field(client: Client, member, make_item):
    milestone = make_item(kind="milestone", title="M")
    epic = make_item(kind="epic", title="E")
    ticket = make_item(title="Old")

    post(
        client,
        member,
        item_url(ticket, "edit"),
        {
            "version": "1",
            "title": " New title ",
            "description": "Line one\r\nLine two",
            "acceptance_criteria": "It works\r\n\r\n  It is fast  \r\n",
            "epic": epic.key,
            "milestone": milestone.key,
            "priority": "urgent",
            "labels_shown": "1",
            "labels": ["security", "bug"],
        },
    )

    after = fresh(ticket)
    assert after.title == "New title"
    assert after.description == "Line one\nLine two"
    assert after.acceptance_criteria == ["It works", "It is fast"]
    assert (after.epic, after.milestone, after.priority) == (epic, milestone, "urgent")
    assert after.labels == ["bug", "security"]


def test_resaving_an_unchanged_form_changes_nothing(client: Client, member, make_item):
    ticket = make_item(title="Same", description="A\nB", labels=["bug"])
    client.force_login(member)
    page = post(
        client,
        member,
        item_url(ticket, "edit"),
        {
            "version": "1",
            "title": "Same",
            "description": "A\r\nB",
            "acceptance_criteria": "",
            "epic": "",
            "milestone": "",
            "priority": "normal",
            "labels_shown": "1",
            "labels": ["bug"],
        },
    )
    assertContains(page, "Nothing to change")
    assert fresh(ticket).version == 1


@pytest.mark.parametrize(
    ("data", "shown"),
    [
        ({"version": "1", "title": "x" * 201}, "Title: At most 200 characters."),
        ({"version": "1", "title": "a\x00b"}, "Title:"),
        ({"version": "one", "title": "x"}, "Version:"),
        ({"version": "1", "labels_shown": "1", "labels": ["nope"]}, "Labels: Unknown label nope"),
        ({"version": "1", "priority": "asap"}, "Priority:"),
        ({"version": "1", "epic": "BAL-99"}, "Epic: Unknown item BAL-99"),
    ],
)
def test_bad_edits_show_readable_field_errors(client: Client, member, make_item, data, shown):
    ticket = make_item(title="Old")

    page = post(client, member, item_url(ticket, "edit"), data)

    assert page.status_code == 200
    assertContains(page, shown)
    assert fresh(ticket).version == 1
    assert not Changeset.objects.exists()


def test_edits_are_proposed_where_direct_edits_say_so(client: Client, project, member, make_item):
    project.settings = {"direct_edits": "state"}
    project.save(update_fields=["settings"])
    ticket = make_item(title="Old", state="ready")

    page = post(client, member, item_url(ticket, "edit"), {"version": "1", "title": "New"})
    assertContains(page, "for review")
    assert fresh(ticket).title == "Old"

    post(client, member, item_url(ticket, "move"), {"version": "1", "state": "draft"})
    assert fresh(ticket).state == "draft"


def test_blockers_are_added_and_removed(client: Client, member, make_item):
    blocker = make_item(title="Blocker")
    ticket = make_item(state="ready")

    page = post(client, member, item_url(ticket, "blockers"), {"version": "1", "add": blocker.key.lower()})
    assertContains(page, f"Added blocker {blocker.key}.")
    assert Dependency.objects.filter(blocker=blocker, blocked=ticket).exists()
    assertContains(page, f"blocker {blocker.key}</span></button>")  # its remove button

    post(client, member, item_url(ticket, "blockers"), {"version": "1", "remove": blocker.key})
    assert not Dependency.objects.exists()

    page = post(client, member, item_url(ticket, "blockers"), {"version": "1", "add": "BAL-99"})
    assertContains(page, "Blocker to add: Unknown item BAL-99")


def test_claim_and_release(client: Client, member, owner, make_item):
    ticket = make_item(state="ready")

    page = post(client, member, item_url(ticket, "claim"), {})
    assertContains(page, "You claimed BAL-1")
    assert Claim.objects.get().holder == member
    assertContains(page, "Release my claim")

    page = post(client, owner, item_url(ticket, "release"), {})
    assertContains(page, "Released the claim of member on BAL-1")
    assert Claim.objects.get().status == ClaimStatus.RELEASED
    assert fresh(ticket).state == "ready"

    page = post(client, owner, item_url(ticket, "release"), {})
    assertContains(page, "Nobody holds this ticket.")


def test_claiming_a_ticket_that_is_not_runnable_says_why(client: Client, member, make_item):
    ticket = make_item(state="draft")
    page = post(client, member, item_url(ticket, "claim"), {})
    assert not Claim.objects.exists()
    assert page.status_code == 200
    assertContains(page, 'class="message error"')


@pytest.mark.parametrize("action", ["edit", "move", "blockers", "claim", "release"])
def test_viewers_get_403_and_other_projects_members_404(
    client: Client, viewer, users, other_project, make_item, action
):
    ticket = make_item(state="ready")
    claim_take(actor=Actor(user=users["member"]), project=ticket.project, item=ticket)
    outsider = users["stranger"]
    make_membership(project=other_project, user=outsider, role=Role.OWNER)
    data = {"version": "2", "state": "cancelled", "title": "x", "add": "BAL-1"}

    client.force_login(viewer)
    assert client.post(item_url(ticket, action), data).status_code == 403
    client.force_login(outsider)
    assert client.post(item_url(ticket, action), data).status_code == 404
    assert client.get(item_url(ticket, action)).status_code in (404, 405)
    assert fresh(ticket).version == 2
    assert Claim.objects.get().status == ClaimStatus.ACTIVE


def test_quick_create_from_the_plan(client: Client, project, member, viewer, make_item):
    epic = make_item(kind="epic", title="Accounts")
    client.force_login(member)
    plan = client.get("/projects/BAL/")
    assertContains(plan, 'action="/projects/BAL/items/new/"')

    page = post(client, member, "/projects/BAL/items/new/", {"title": "Sign up form", "epic": epic.key})

    created = Item.objects.get(title="Sign up form")
    assert created.epic == epic
    assertContains(page, f'Created <a href="/projects/BAL/items/{created.key}/">{created.key}</a>')

    page = post(client, member, "/projects/BAL/items/new/", {"title": " "})
    assertContains(page, "Title:")

    client.force_login(viewer)
    assertNotContains(client.get("/projects/BAL/"), 'action="/projects/BAL/items/new/"')
    assert client.post("/projects/BAL/items/new/", {"title": "Nope"}).status_code == 403
    assert not Item.objects.filter(title="Nope").exists()


def test_the_plan_filters_by_priority_and_label_and_shows_them(client: Client, member, make_item):
    make_item(title="Urgent bug", state="ready", priority="urgent", labels=["bug"])
    make_item(title="Plain docs", state="ready", labels=["docs"])
    client.force_login(member)

    page = client.get("/projects/BAL/?priority=urgent")
    html = page.content.decode()
    main = html[html.index('class="plan-main"') : html.index('class="plan-side"')]
    assert "Urgent bug" in main
    assert "Plain docs" not in main
    assert 'class="badge priority priority-urgent">urgent<' in main
    assert 'class="badge label">bug<' in main

    html = client.get("/projects/BAL/?label=docs").content.decode()
    main = html[html.index('class="plan-main"') : html.index('class="plan-side"')]
    assert ("Plain docs" in main, "Urgent bug" in main) == (True, False)

    assertContains(client.get("/projects/BAL/?priority=asap"), "Unknown priority")
