"""The tracker admin: changeset review and decisions, service-backed writes, project scoping."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.db.models import Q
from django.urls import reverse
from django.utils.html import strip_tags

from tests.factories import MembershipFactory, UserFactory
from tracker.activity.filters import activity_filter_register, activity_filter_unregister
from tracker.models import (
    ActivityEvent,
    Changeset,
    ChangesetStatus,
    Dependency,
    Item,
    Membership,
    Project,
    Role,
    Skill,
    SkillPin,
)
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose
from tracker.services.items import dependency_add, item_create, item_update
from tracker.services.skills import skill_pin_set, skill_version_create

# -- helpers and fixtures ------------------------------------------------------


def admin_url(name: str, *args: Any) -> str:
    return reverse(f"admin:{name}", args=args)


def page_text(response) -> str:
    """What a reader sees: the page without tags, whitespace collapsed."""
    return re.sub(r"\s+", " ", strip_tags(response.content.decode()))


def result_rows(response) -> str:
    """The text of a changelist's rows (not its filters)."""
    table = re.search(r'<table id="result_list">.*?</table>', response.content.decode(), re.S)
    return re.sub(r"\s+", " ", strip_tags(table.group(0))) if table else ""


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def propose(project, user, operations, title="Plan change") -> Changeset:
    return changeset_propose(actor=Actor(user=user), project=project, title=title, operations=operations)


def build_plan(project, user, prefix: str) -> dict[str, Any]:
    """One object of every tracker model in ``project``, written through the services."""
    actor = Actor(user=user)
    milestone = item_create(actor=actor, project=project, kind="milestone", fields={"title": f"{prefix} M1"})
    epic = item_create(actor=actor, project=project, kind="epic", fields={"title": f"{prefix} epic"})
    ticket = item_create(
        actor=actor,
        project=project,
        kind="ticket",
        fields={"title": f"{prefix} ticket", "epic": epic, "milestone": milestone},
    )
    blocker = item_create(actor=actor, project=project, kind="ticket", fields={"title": f"{prefix} blocker"})
    dependency = dependency_add(actor=actor, blocker=blocker, blocked=ticket)
    changeset = propose(
        project,
        user,
        [{"op": "update", "item": ticket.key, "base_version": ticket.version, "fields": {"state": "ready"}}],
        title=f"{prefix} changeset",
    )
    version = skill_version_create(actor=actor, project=project, name=f"{prefix.lower()}-skill", body="# Do")
    skill_pin_set(actor=actor, project=project, skill=version.skill, version=1)
    return {
        "organization": project.organization,
        "project": project,
        "membership": Membership.objects.filter(project=project).first(),
        "item": ticket,
        "dependency": dependency,
        "changeset": changeset,
        "skill": version.skill,
        "skillversion": version,
        "skillpin": SkillPin.objects.get(project=project, skill=version.skill),
        "activityevent": ActivityEvent.objects.filter(project=project).first(),
    }


@pytest.fixture
def world(project, other_project, staff):
    """The owner's project BAL, and OTH of another organization that only ``outsider`` belongs to."""
    outsider = UserFactory(username="outsider")
    MembershipFactory(project=other_project, user=outsider, role=Role.OWNER)
    return {
        "own": build_plan(project, staff["owner"], "Ballet"),
        "foreign": build_plan(other_project, outsider, "Foreign"),
    }


MODELS = (
    "organization",
    "project",
    "membership",
    "item",
    "dependency",
    "changeset",
    "skill",
    "skillversion",
    "skillpin",
    "activityevent",
)
# What a project owner may add; the rest are read-only or superuser-only in the admin.
OWNER_ADDS = {"membership", "item", "dependency", "skill", "skillpin"}
SUPERUSER_ADDS = OWNER_ADDS | {"organization", "project"}


@pytest.fixture
def review_case(project, staff, make_item):
    """A changeset with one operation of each kind, proposed by the member."""
    epic = make_item(kind="epic", title="Accounts")
    ticket = make_item(title="Old title", acceptance_criteria=["Loads"])
    blocker = make_item(title="Blocker")
    dependency_add(actor=Actor(user=staff["owner"]), blocker=blocker, blocked=ticket)
    operations = [
        {
            "op": "create",
            "ref": "login",
            "kind": "ticket",
            "fields": {"title": "Login form", "epic": epic.key, "acceptance_criteria": ["Shows errors"]},
        },
        {
            "op": "update",
            "item": ticket.key,
            "base_version": 1,
            "fields": {"title": "New title", "state": "ready"},
        },
        {"op": "add_dependency", "blocker": "$login", "blocked": ticket.key},
        {"op": "remove_dependency", "blocker": blocker.key, "blocked": ticket.key},
    ]
    changeset = propose(project, staff["member"], operations, title="Login work")
    return {"changeset": changeset, "epic": epic, "ticket": ticket, "blocker": blocker}


def review_url(changeset: Changeset) -> str:
    return admin_url("tracker_changeset_change", changeset.pk)


# -- the changeset review ------------------------------------------------------


def test_review_shows_each_operation_readably(client, staff, review_case):
    client.force_login(staff["maintainer"])
    response = client.get(review_url(review_case["changeset"]))
    assert response.status_code == 200
    text = page_text(response)
    assert "Changeset #1: Login work" in text
    # Fields in words and a new ticket by its title, never its ref (SPEC § 9 "Everywhere").
    assert "Create: new ticket" in text
    assert "$login" not in text
    assert "Title Login form" in text
    assert "Epic BAL-1 · Accounts" in text
    assert "Acceptance criteria • Shows errors" in text
    assert "State draft (default)" in text
    assert "Update: BAL-2 · Old title" in text
    assert "Title Old title → New title" in text
    assert "State draft → ready" in text
    assert "Login form (new ticket) → BAL-2 · Old title added" in text
    assert "BAL-3 · Blocker → BAL-2 · Old title removed" in text
    assert "Proposed by member" in text


def test_review_of_a_valid_changeset_says_valid(client, staff, review_case):
    client.force_login(staff["member"])
    response = client.get(review_url(review_case["changeset"]))
    assert 'data-validation="valid"' in response.content.decode()
    assert "Valid against the current plan" in page_text(response)


def test_review_of_a_stale_update_warns_and_shows_the_field_error(client, staff, review_case):
    ticket = review_case["ticket"]
    item_update(actor=Actor(user=staff["owner"]), item=ticket, fields={"description": "Edited meanwhile"})
    client.force_login(staff["maintainer"])
    response = client.get(review_url(review_case["changeset"]))
    content, text = response.content.decode(), page_text(response)
    assert 'data-validation="invalid"' in content
    assert (
        "BAL-2 is at version 2, but this update was written against version 1: applying will conflict."
        in text
    )
    assert "base_version: BAL-2 changed: base_version 1 is stale, it is now at version 2." in text


def test_review_escapes_what_comes_from_data(client, staff, project, make_item):
    item = make_item(title="<b>bold</b>")
    changeset = propose(
        project,
        staff["member"],
        [
            {
                "op": "update",
                "item": item.key,
                "base_version": 1,
                "fields": {"title": "<script>alert(1)</script>"},
            }
        ],
        title="<img src=x onerror=alert(2)>",
    )
    client.force_login(staff["maintainer"])
    content = client.get(review_url(changeset)).content.decode()
    assert "<script>alert(1)" not in content
    assert "<img src=x" not in content
    assert "<b>bold</b>" not in content
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in content
    assert "&lt;b&gt;bold&lt;/b&gt;" in content


def test_decision_forms_are_offered_to_holders_of_changeset_apply_only(client, staff, review_case):
    url = review_url(review_case["changeset"])
    client.force_login(staff["member"])
    assert "changeset-apply-form" not in client.get(url).content.decode()
    client.force_login(staff["maintainer"])
    content = client.get(url).content.decode()
    assert 'id="changeset-apply-form"' in content
    assert 'id="changeset-reject-form"' in content
    assert 'name="note"' in content


def test_apply_by_a_maintainer_creates_the_items(client, staff, review_case):
    changeset = review_case["changeset"]
    client.force_login(staff["maintainer"])
    response = client.post(admin_url("tracker_changeset_apply", changeset.pk), follow=True)
    changeset.refresh_from_db()
    assert changeset.status == ChangesetStatus.APPLIED
    assert changeset.decided_by == staff["maintainer"]
    login = Item.objects.get(title="Login form")
    assert login.key == "BAL-4"
    assert Dependency.objects.filter(blocker=login, blocked=review_case["ticket"]).exists()
    assert Item.objects.get(pk=review_case["ticket"].pk).title == "New title"
    assert messages_of(response) == ["Changeset #1 applied. Created BAL-4."]
    assert 'data-validation="not-checked"' in response.content.decode()
    assert "changeset-apply-form" not in response.content.decode()


def test_apply_by_a_member_is_refused_and_changes_nothing(client, staff, review_case):
    changeset = review_case["changeset"]
    client.force_login(staff["member"])
    response = client.post(admin_url("tracker_changeset_apply", changeset.pk))
    assert response.status_code == 403
    changeset.refresh_from_db()
    assert changeset.status == ChangesetStatus.PROPOSED
    assert not Item.objects.filter(title="Login form").exists()


def test_apply_needs_a_post(client, staff, review_case):
    client.force_login(staff["maintainer"])
    response = client.get(admin_url("tracker_changeset_apply", review_case["changeset"].pk))
    assert response.status_code == 405
    assert Changeset.objects.get().status == ChangesetStatus.PROPOSED


def test_reject_with_a_note_by_a_maintainer(client, staff, review_case):
    changeset = review_case["changeset"]
    client.force_login(staff["maintainer"])
    response = client.post(
        admin_url("tracker_changeset_reject", changeset.pk), {"note": "Split it in two."}, follow=True
    )
    changeset.refresh_from_db()
    assert (changeset.status, changeset.decision_note) == (ChangesetStatus.REJECTED, "Split it in two.")
    assert messages_of(response) == ["Changeset #1 rejected."]
    assert "Decision note Split it in two." in page_text(response)
    assert not Item.objects.filter(title="Login form").exists()


def test_reject_by_a_member_is_refused(client, staff, review_case):
    changeset = review_case["changeset"]
    client.force_login(staff["member"])
    response = client.post(admin_url("tracker_changeset_reject", changeset.pk), {"note": "No."})
    assert response.status_code == 403
    changeset.refresh_from_db()
    assert (changeset.status, changeset.decision_note) == (ChangesetStatus.PROPOSED, "")


def test_four_eyes_refuses_self_apply_with_a_message(client, project, staff, make_item):
    project.settings = {"four_eyes": True}
    project.save()
    item = make_item(title="Mine")
    changeset = propose(
        project,
        staff["maintainer"],
        [{"op": "update", "item": item.key, "base_version": 1, "fields": {"title": "X"}}],
    )
    client.force_login(staff["maintainer"])
    response = client.post(admin_url("tracker_changeset_apply", changeset.pk), follow=True)
    assert messages_of(response) == [
        "Not applied: This project requires four eyes: someone other than the proposer must apply it."
    ]
    changeset.refresh_from_db()
    assert changeset.status == ChangesetStatus.PROPOSED
    assert Item.objects.get(pk=item.pk).title == "Mine"


def test_stale_changeset_is_conflicted_with_its_reason_after_apply(client, staff, review_case):
    changeset = review_case["changeset"]
    item_update(actor=Actor(user=staff["owner"]), item=review_case["ticket"], fields={"state": "ready"})
    client.force_login(staff["maintainer"])
    response = client.post(admin_url("tracker_changeset_apply", changeset.pk), follow=True)
    changeset.refresh_from_db()
    assert changeset.status == ChangesetStatus.CONFLICTED
    assert "base_version 1 is stale" in changeset.conflict_reason
    assert not Item.objects.filter(title="Login form").exists()
    [message] = messages_of(response)
    assert message.startswith("Changeset #1 conflicted and nothing was applied: operations[1].base_version:")
    assert f"Conflict {changeset.conflict_reason}" in page_text(response)


def test_a_changeset_cannot_be_edited_in_the_admin(client, staff, review_case):
    changeset = review_case["changeset"]
    client.force_login(staff["owner"])
    response = client.post(review_url(changeset), {"title": "Renamed", "status": "applied"})
    assert response.status_code == 403
    changeset.refresh_from_db()
    assert (changeset.title, changeset.status) == ("Login work", ChangesetStatus.PROPOSED)


def test_another_projects_changeset_is_not_found_even_for_apply(client, staff, world):
    foreign = world["foreign"]["changeset"]
    client.force_login(staff["owner"])
    assert client.get(review_url(foreign)).status_code == 404
    assert client.post(admin_url("tracker_changeset_apply", foreign.pk)).status_code == 404
    foreign.refresh_from_db()
    assert foreign.status == ChangesetStatus.PROPOSED


def test_changeset_list_columns_and_filters(client, staff, world):
    client.force_login(staff["owner"])
    response = client.get(admin_url("tracker_changeset_changelist"), {"status__exact": "proposed"})
    text = result_rows(response)
    assert "Ballet changeset" in text
    assert "Foreign changeset" not in text
    for column in ("Number", "Project", "Title", "Status", "Proposed by", "Created at"):
        assert column in text


# -- every model renders, scoped to the user's projects --------------------------


@pytest.mark.parametrize("model", MODELS)
def test_superuser_sees_every_model_of_every_project(client, superuser, world, model):
    client.force_login(superuser)
    listing = client.get(admin_url(f"tracker_{model}_changelist")).content.decode()
    for side in ("own", "foreign"):
        obj = world[side][model]
        assert admin_url(f"tracker_{model}_change", obj.pk) in listing
        assert client.get(admin_url(f"tracker_{model}_change", obj.pk)).status_code == 200
    add = client.get(admin_url(f"tracker_{model}_add"))
    assert add.status_code == (200 if model in SUPERUSER_ADDS else 403)


@pytest.mark.parametrize("model", MODELS)
def test_owner_sees_only_their_projects_rows(client, staff, world, model):
    client.force_login(staff["owner"])
    response = client.get(admin_url(f"tracker_{model}_changelist"))
    assert response.status_code == 200
    listing = response.content.decode()
    own, foreign = world["own"][model], world["foreign"][model]
    assert admin_url(f"tracker_{model}_change", own.pk) in listing
    assert admin_url(f"tracker_{model}_change", foreign.pk) not in listing
    assert "Foreign" not in listing
    assert "OTH" not in listing
    assert client.get(admin_url(f"tracker_{model}_change", own.pk)).status_code == 200
    assert client.get(admin_url(f"tracker_{model}_change", foreign.pk)).status_code == 404
    assert client.get(admin_url(f"tracker_{model}_history", foreign.pk)).status_code == 404
    add = client.get(admin_url(f"tracker_{model}_add"))
    assert add.status_code == (200 if model in OWNER_ADDS else 403)


def test_admin_index_lists_the_tracker_for_a_viewer(client, staff, world):
    client.force_login(staff["viewer"])
    text = page_text(client.get(admin_url("index")))
    assert "Items" in text
    assert "Changesets" in text


def test_user_without_projects_sees_no_tracker_rows(client, staff, world):
    stranger = staff["stranger"]
    client.force_login(stranger)
    assert client.get(admin_url("tracker_item_changelist")).status_code == 403
    assert client.get(admin_url("tracker_item_change", world["own"]["item"].pk)).status_code == 403


# -- items ---------------------------------------------------------------------


def item_form(item: Item, **changes: Any) -> dict[str, Any]:
    data = {
        "title": item.title,
        "description": item.description,
        "acceptance_criteria": "\n".join(item.acceptance_criteria),
        "state": item.state,
        "epic": item.epic_id or "",
        "milestone": item.milestone_id or "",
        "priority": item.priority,
        "labels": json.dumps(item.labels),
        "policy": json.dumps(item.policy),
        "version_read": item.version,
    }
    return {**data, **changes}


def test_item_change_bumps_the_version_and_logs_the_user(client, staff, make_item):
    item = make_item(title="Before")
    client.force_login(staff["member"])
    response = client.post(
        admin_url("tracker_item_change", item.pk),
        item_form(item, title="After", acceptance_criteria="One\n\n Two "),
    )
    assert response.status_code == 302
    item.refresh_from_db()
    assert (item.title, item.version, item.acceptance_criteria) == ("After", 2, ["One", "Two"])
    event = ActivityEvent.objects.filter(verb="item.updated", target=item.key).get()
    assert (event.actor, event.on_behalf_of) == ("user:member", staff["member"])
    assert event.data["changes"]["title"] == ["Before", "After"]


def test_priority_and_labels_are_checked_like_a_changesets(client, staff, make_item):
    item = make_item(title="Labelled")
    client.force_login(staff["member"])
    url = admin_url("tracker_item_change", item.pk)
    refused = client.post(url, item_form(item, labels='["bug", "nonsense"]'))
    assert "Unknown label nonsense; the project&#x27;s labels are: bug, feature" in refused.content.decode()
    assert client.post(url, item_form(item, labels='"bug"')).status_code == 200
    item.refresh_from_db()
    assert (item.labels, item.version) == ([], 1)
    saved = client.post(url, item_form(item, labels='["Docs", "bug", "bug"]', priority="urgent"))
    assert saved.status_code == 302
    item.refresh_from_db()
    assert (item.labels, item.priority, item.version) == (["bug", "docs"], "urgent", 2)


def test_item_add_goes_through_the_service(client, project, staff, make_item):
    epic = make_item(kind="epic", title="Epic")
    client.force_login(staff["member"])
    response = client.post(
        admin_url("tracker_item_add"),
        {
            "project": project.pk,
            "kind": "ticket",
            "title": "New one",
            "state": "draft",
            "epic": epic.pk,
            "policy": "",
        },
    )
    assert response.status_code == 302
    item = Item.objects.get(title="New one")
    assert (item.key, item.epic, item.version, item.policy) == ("BAL-2", epic, 1, {})
    assert ActivityEvent.objects.filter(verb="item.created", target="BAL-2", actor="user:member").exists()


def test_item_add_checks_state_and_parents_like_the_services(client, project, staff, make_item):
    milestone = make_item(kind="milestone", title="M")
    client.force_login(staff["member"])
    response = client.post(
        admin_url("tracker_item_add"),
        {
            "project": project.pk,
            "kind": "milestone",
            "title": "Bad",
            "state": "ready",
            "epic": "",
            "policy": "",
        },
    )
    assert response.status_code == 200
    assert "A milestone&#x27;s state is one of: open, done, cancelled." in response.content.decode()
    response = client.post(
        admin_url("tracker_item_add"),
        {
            "project": project.pk,
            "kind": "milestone",
            "title": "Bad",
            "state": "open",
            "milestone": milestone.pk,
        },
    )
    assert "A milestone has no milestone." in response.content.decode()
    assert not Item.objects.filter(title="Bad").exists()


def test_policy_is_only_for_holders_of_policy_set(client, project, staff, make_item):
    item = make_item()
    url = admin_url("tracker_item_change", item.pk)
    client.force_login(staff["member"])
    assert 'name="policy"' not in client.get(url).content.decode()
    client.post(url, item_form(item, policy='{"sandbox": "none"}', title="Renamed"))
    item.refresh_from_db()
    assert (item.title, item.policy) == ("Renamed", {})
    add = client.post(
        admin_url("tracker_item_add"),
        {"project": project.pk, "kind": "ticket", "title": "P", "state": "draft", "policy": '{"a": 1}'},
    )
    assert "Only a human with policy.set in BAL may set a policy." in add.content.decode()
    client.force_login(staff["maintainer"])
    assert 'name="policy"' in client.get(url).content.decode()
    client.post(url, item_form(item, policy='{"sandbox": "none"}'))
    item.refresh_from_db()
    assert item.policy == {"sandbox": "none"}


def test_stale_item_edit_is_refused_and_keeps_the_typed_text(client, staff, make_item):
    item = make_item(title="Original")
    read = item_form(item, title="My edit")
    item_update(actor=Actor(user=staff["owner"]), item=item, fields={"title": "Their edit"})
    client.force_login(staff["member"])
    url = admin_url("tracker_item_change", item.pk)
    response = client.post(url, read)
    assert response.status_code == 200
    content = response.content.decode()
    assert "you read version 1, it is now at version 2" in content
    assert 'value="My edit"' in content
    assert 'name="version_read" value="2"' in content
    item.refresh_from_db()
    assert (item.title, item.version) == ("Their edit", 2)
    assert client.post(url, {**read, "version_read": 2}).status_code == 302
    item.refresh_from_db()
    assert (item.title, item.version) == ("My edit", 3)


def test_viewer_sees_an_item_but_cannot_change_it(client, staff, make_item):
    item = make_item(title="Look only")
    client.force_login(staff["viewer"])
    url = admin_url("tracker_item_change", item.pk)
    assert client.get(url).status_code == 200
    assert client.post(url, item_form(item, title="Changed")).status_code == 403
    assert client.get(admin_url("tracker_item_add")).status_code == 403
    item.refresh_from_db()
    assert item.title == "Look only"


def test_items_cannot_be_deleted_in_the_admin(client, superuser, make_item):
    item = make_item()
    client.force_login(superuser)
    assert client.post(admin_url("tracker_item_delete", item.pk), {"post": "yes"}).status_code == 403
    assert Item.objects.filter(pk=item.pk).exists()


def test_item_list_filters_by_kind_and_searches_titles(client, staff, make_item):
    make_item(kind="epic", title="Payments epic")
    make_item(title="Refund ticket", description="Money back")
    client.force_login(staff["viewer"])
    text = result_rows(client.get(admin_url("tracker_item_changelist"), {"kind__exact": "epic"}))
    assert "Payments epic" in text
    assert "Refund ticket" not in text
    text = result_rows(client.get(admin_url("tracker_item_changelist"), {"q": "money"}))
    assert "Refund ticket" in text
    assert "Payments epic" not in text


# -- dependencies, projects, memberships, skills -------------------------------


def test_dependency_add_refuses_a_cycle_and_adds_through_the_service(client, staff, make_item):
    a, b = make_item(title="A"), make_item(title="B")
    dependency_add(actor=Actor(user=staff["owner"]), blocker=a, blocked=b)
    client.force_login(staff["member"])
    response = client.post(admin_url("tracker_dependency_add"), {"blocker": b.pk, "blocked": a.pk})
    assert "The dependency BAL-2 → BAL-1 would make a cycle." in response.content.decode()
    c = make_item(title="C")
    assert (
        client.post(admin_url("tracker_dependency_add"), {"blocker": b.pk, "blocked": c.pk}).status_code
        == 302
    )
    assert ActivityEvent.objects.filter(verb="dependency.added", target=c.key, actor="user:member").exists()


def test_dependency_delete_goes_through_the_service(client, staff, make_item):
    a, b = make_item(title="A"), make_item(title="B")
    dependency = dependency_add(actor=Actor(user=staff["owner"]), blocker=a, blocked=b)
    client.force_login(staff["member"])
    response = client.post(admin_url("tracker_dependency_delete", dependency.pk), {"post": "yes"})
    assert response.status_code == 302
    assert not Dependency.objects.exists()
    assert ActivityEvent.objects.filter(verb="dependency.removed", actor="user:member").exists()


def test_project_credential_is_write_only(client, project, staff):
    client.force_login(staff["owner"])
    url = admin_url("tracker_project_change", project.pk)
    data = {"name": "Ballet", "description": "", "settings": "{}", "credential": "sk-very-secret"}
    assert client.post(url, data).status_code == 302
    project.refresh_from_db()
    assert project.has_credential
    content = client.get(url).content.decode()
    assert "sk-very-secret" not in content
    assert project.credential_encrypted not in content
    assert 'type="password"' in content
    event = ActivityEvent.objects.get(verb="project.updated")
    assert event.data == {"fields": ["credential"]}
    client.post(url, {**data, "credential": "", "remove_credential": "on"})
    project.refresh_from_db()
    assert not project.has_credential


def test_project_settings_are_validated(client, project, staff):
    client.force_login(staff["owner"])
    url = admin_url("tracker_project_change", project.pk)
    response = client.post(url, {"name": "Ballet", "settings": '{"colour": "red"}'})
    assert "Unknown setting" in response.content.decode()
    client.post(url, {"name": "Ballet", "settings": '{"four_eyes": true}'})
    project.refresh_from_db()
    assert project.settings == {"four_eyes": True}


def test_only_owners_edit_the_project(client, project, staff):
    client.force_login(staff["maintainer"])
    url = admin_url("tracker_project_change", project.pk)
    assert client.get(url).status_code == 200
    assert client.post(url, {"name": "Hijacked", "settings": "{}"}).status_code == 403
    project.refresh_from_db()
    assert project.name == "Ballet"


def test_superuser_creates_a_project(client, org, superuser):
    client.force_login(superuser)
    response = client.post(
        admin_url("tracker_project_add"),
        {"organization": org.pk, "key": "NEW", "name": "New", "settings": "{}", "credential": "sk-1"},
    )
    assert response.status_code == 302
    assert Project.objects.get(key="NEW").has_credential


def test_owner_adds_and_removes_a_member_through_the_services(client, project, staff, superuser):
    # An owner no longer adds a user directly (issue 41: nobody joins without accepting); an
    # operator (a superuser) still may, and the owner changes the role and removes.
    UserFactory(username="newbie")
    client.force_login(staff["owner"])
    refused = client.post(
        admin_url("tracker_membership_add"), {"project": project.pk, "username": "newbie", "role": "viewer"}
    )
    assert refused.status_code == 200
    assert "only by accepting an invitation" in refused.content.decode()
    assert not Membership.objects.filter(user__username="newbie").exists()
    client.force_login(superuser)
    response = client.post(
        admin_url("tracker_membership_add"), {"project": project.pk, "username": "newbie", "role": "viewer"}
    )
    assert response.status_code == 302
    client.force_login(staff["owner"])
    membership = Membership.objects.get(user__username="newbie")
    assert membership.role == Role.VIEWER
    assert ActivityEvent.objects.filter(
        verb="membership.set", target="user:newbie", actor="user:root"
    ).exists()
    client.post(admin_url("tracker_membership_change", membership.pk), {"role": "member"})
    membership.refresh_from_db()
    assert membership.role == Role.MEMBER
    client.post(admin_url("tracker_membership_delete", membership.pk), {"post": "yes"})
    assert not Membership.objects.filter(user__username="newbie").exists()
    assert ActivityEvent.objects.filter(verb="membership.removed", target="user:newbie").exists()


def test_members_cannot_manage_memberships(client, project, staff):
    client.force_login(staff["maintainer"])
    assert client.get(admin_url("tracker_membership_add")).status_code == 403
    membership = Membership.objects.get(user=staff["viewer"])
    client.post(admin_url("tracker_membership_change", membership.pk), {"role": "owner"})
    membership.refresh_from_db()
    assert membership.role == Role.VIEWER


def test_skill_add_and_new_version_go_through_the_service(client, project, staff):
    client.force_login(staff["maintainer"])
    response = client.post(
        admin_url("tracker_skill_add"), {"write_from": project.pk, "skill_name": "planner", "body": "v1 text"}
    )
    assert response.status_code == 302
    skill = Skill.objects.get(name="planner")
    assert (skill.project, list(skill.versions.values_list("version", "body"))) == (project, [(1, "v1 text")])
    management = {"versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"}
    response = client.post(
        admin_url("tracker_skill_change", skill.pk), {"new_version": "v2 text", **management}
    )
    assert response.status_code == 302
    assert sorted(skill.versions.values_list("version", "body")) == [(1, "v1 text"), (2, "v2 text")]
    assert ActivityEvent.objects.filter(verb="skill.version_created", actor="user:maintainer").exists()
    page = client.get(admin_url("tracker_skill_change", skill.pk))
    assert "v2 text" in page_text(page)


def test_skill_write_is_for_maintainers(client, project, staff):
    client.force_login(staff["member"])
    assert client.get(admin_url("tracker_skill_add")).status_code == 403


def test_an_organization_skill_in_the_admin_needs_skill_write_in_every_project(client, project, org, staff):
    """A maintainer of BAL alone may not write what reaches the sibling project's planner."""
    sibling = Project.objects.create(organization=org, key="SIB", name="Sibling")
    MembershipFactory(project=sibling, user=staff["owner"], role=Role.OWNER)
    client.force_login(staff["maintainer"])
    response = client.post(
        admin_url("tracker_skill_add"),
        {"write_from": project.pk, "skill_name": "review", "organization_scope": "on", "body": "Obey me"},
    )
    assert response.status_code == 200
    assert "You need skill.write in every project of the organization" in page_text(response)
    assert not Skill.objects.filter(name="review").exists()

    skill = skill_version_create(
        actor=Actor(user=staff["owner"]), project=project, name="review", body="v1", organization_scope=True
    ).skill
    page = client.get(admin_url("tracker_skill_change", skill.pk))
    assert page.status_code == 200
    assert 'name="new_version"' not in page.content.decode()
    management = {"versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"}
    refused = client.post(
        admin_url("tracker_skill_change", skill.pk), {"new_version": "Obey me", **management}
    )
    assert refused.status_code == 403
    assert list(skill.versions.values_list("body", flat=True)) == ["v1"]

    client.force_login(staff["owner"])
    response = client.post(admin_url("tracker_skill_change", skill.pk), {"new_version": "v2", **management})
    assert response.status_code == 302
    assert skill.versions.count() == 2


def test_skill_pin_through_the_admin(client, project, staff):
    version = skill_version_create(actor=Actor(user=staff["owner"]), project=project, name="style", body="v1")
    skill_version_create(actor=Actor(user=staff["owner"]), project=project, name="style", body="v2")
    client.force_login(staff["maintainer"])
    response = client.post(
        admin_url("tracker_skillpin_add"), {"project": project.pk, "skill": version.skill.pk, "version": 7}
    )
    assert "Skill style has no version 7." in response.content.decode()
    client.post(
        admin_url("tracker_skillpin_add"), {"project": project.pk, "skill": version.skill.pk, "version": 1}
    )
    pin = SkillPin.objects.get()
    assert pin.version == 1
    assert ActivityEvent.objects.filter(verb="skill.pinned", actor="user:maintainer").exists()
    client.post(admin_url("tracker_skillpin_delete", pin.pk), {"post": "yes"})
    assert not SkillPin.objects.exists()


def test_activity_is_read_only_and_searchable(client, staff, world):
    client.force_login(staff["owner"])
    event = world["own"]["activityevent"]
    assert client.post(admin_url("tracker_activityevent_change", event.pk), {"verb": "x"}).status_code == 403
    text = result_rows(client.get(admin_url("tracker_activityevent_changelist"), {"q": "BAL-3"}))
    assert "dependency.added" in text
    text = result_rows(
        client.get(admin_url("tracker_activityevent_changelist"), {"verb__exact": "skill.pinned"})
    )
    assert "skill:ballet-skill" in text
    assert "item.created" not in text


@pytest.fixture
def owner_only_sees_skill_pins():
    """A filter another app could register: of the ``skill.*`` events, the owner sees only pins."""

    def visible(*, user: Any) -> Q:
        return Q(verb="skill.pinned") if user.username == "owner" else Q()

    activity_filter_register(verb_prefix="skill.", visible=visible)
    yield
    activity_filter_unregister(verb_prefix="skill.")


@pytest.mark.usefixtures("owner_only_sees_skill_pins")
def test_activity_leaves_out_the_events_a_registered_filter_hides(client, staff, world):
    hidden = ActivityEvent.objects.get(project=world["own"]["project"], verb="skill.created")
    client.force_login(staff["owner"])

    text = result_rows(client.get(admin_url("tracker_activityevent_changelist")))

    assert "skill.pinned" in text
    assert "skill.created" not in text
    assert "item.created" in text
    assert client.get(admin_url("tracker_activityevent_change", hidden.pk)).status_code == 404
    client.force_login(staff["maintainer"])
    assert "skill.created" in result_rows(client.get(admin_url("tracker_activityevent_changelist")))


def test_a_verb_prefix_has_one_activity_filter():
    def everything(*, user: Any) -> Q:
        return Q()

    with pytest.raises(ValueError, match="already have a filter"):
        activity_filter_register(verb_prefix="knowledge.", visible=everything)
    with pytest.raises(ValueError, match="ends with a dot"):
        activity_filter_register(verb_prefix="skill", visible=everything)


# -- four eyes (docs/trust.md#four-eyes) -----------------------------------------------------


@pytest.fixture
def four_eyes_project(project):
    project.settings = {"four_eyes": True}
    project.save(update_fields=["settings"])
    return project


@pytest.mark.parametrize("who", ["maintainer", "owner", "root"])
def test_four_eyes_makes_the_item_form_read_only_for_everyone(
    client, staff, superuser, four_eyes_project, make_item, who
):
    item = make_item(title="Mine")
    client.force_login(superuser if who == "root" else staff[who])
    url = admin_url("tracker_item_change", item.pk)
    page = client.get(url)
    assert page.status_code == 200
    assert 'name="title"' not in page.content.decode()
    assert messages_of(page) == [
        "BAL requires four eyes: its plan is read-only here. "
        "Propose a changeset; someone other than you applies it."
    ]
    response = client.post(url, item_form(item, title="Direct", state="ready", policy='{"sandbox": "none"}'))
    assert response.status_code == 403
    item.refresh_from_db()
    assert (item.title, item.state, item.policy, item.version) == ("Mine", "draft", {}, 1)
    assert not ActivityEvent.objects.filter(verb="item.updated").exists()


def test_four_eyes_refuses_adding_items_and_dependencies_in_the_admin(
    client, superuser, four_eyes_project, make_item
):
    a, b = make_item(title="A"), make_item(title="B")
    client.force_login(superuser)
    response = client.post(
        admin_url("tracker_item_add"),
        {
            "project": four_eyes_project.pk,
            "kind": "ticket",
            "title": "Sneaked in",
            "state": "draft",
            "policy": "",
        },
    )
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not Item.objects.filter(title="Sneaked in").exists()
    response = client.post(admin_url("tracker_dependency_add"), {"blocker": a.pk, "blocked": b.pk})
    assert response.status_code == 200
    assert not Dependency.objects.exists()


def test_four_eyes_refuses_deleting_dependencies_in_the_admin(
    client, superuser, four_eyes_project, make_item
):
    a, b = make_item(title="A"), make_item(title="B")
    dependency = dependency_add(actor=Actor(user=superuser), blocker=a, blocked=b)
    client.force_login(superuser)
    response = client.post(admin_url("tracker_dependency_delete", dependency.pk), {"post": "yes"})
    assert response.status_code == 403
    bulk = client.post(
        admin_url("tracker_dependency_changelist"),
        {"action": "delete_selected", "_selected_action": [dependency.pk], "post": "yes"},
    )
    assert bulk.status_code in (200, 403)
    assert Dependency.objects.filter(pk=dependency.pk).exists()


def test_four_eyes_changes_still_go_through_a_changeset_someone_else_applies(
    client, staff, four_eyes_project, make_item
):
    item = make_item(title="Mine")
    changeset = propose(
        four_eyes_project,
        staff["maintainer"],
        [{"op": "update", "item": item.key, "base_version": 1, "fields": {"title": "Reviewed"}}],
    )
    client.force_login(staff["owner"])
    client.post(admin_url("tracker_changeset_apply", changeset.pk))
    item.refresh_from_db()
    assert (item.title, item.version) == ("Reviewed", 2)
