"""Changeset review pages: the list, a changeset made readable, Apply and Reject with a note, four
eyes, conflicts and bad input, and the home page's link to them."""

from __future__ import annotations

import pytest
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tracker.models import ActivityEvent, Changeset, ChangesetStatus, Dependency, Item, Role
from tracker.services.activity import Actor
from tracker.services.changesets import MAX_NOTE, changeset_propose, changeset_reject
from tracker.services.items import dependency_add, item_update

HOSTILE = '<script>alert("x")</script>'


def propose(project, user, operations, title="Plan change", rationale=""):
    return changeset_propose(
        actor=Actor(user=user), project=project, title=title, rationale=rationale, operations=operations
    )


def review_url(changeset: Changeset) -> str:
    return f"/projects/{changeset.project.key}/changesets/{changeset.number}/"


def decide(client: Client, changeset: Changeset, decision: str, note: str = ""):
    return client.post(f"{review_url(changeset)}decide/", {"decision": decision, "note": note})


def signed_in(client: Client, user) -> Client:
    client.force_login(user)
    return client


@pytest.fixture
def plan(project, make_item):
    """BAL-1 (ready) and BAL-2, which a changeset of the member's retitles and makes wait for BAL-1."""
    return make_item(title="Login form", state="ready"), make_item(title="Signup", state="ready")


@pytest.fixture
def changeset(project, member, plan):
    first, second = plan
    return propose(
        project,
        member,
        [
            {
                "op": "update",
                "item": second.key,
                "base_version": second.version,
                "fields": {"title": "Sign up"},
            },
            {"op": "create", "ref": "reset", "kind": "ticket", "fields": {"title": "Password reset"}},
            {"op": "add_dependency", "blocker": first.key, "blocked": second.key},
        ],
        title="Tidy the login work",
        rationale="Signup waits for the form.",
    )


def test_the_list_shows_proposed_changesets_first_with_their_people(
    client, project, member, owner, changeset
):
    rejected = propose(project, member, [{"op": "create", "kind": "ticket", "fields": {"title": "No"}}])
    changeset_reject(actor=Actor(user=owner), changeset=rejected, note="Not now")
    later = propose(project, member, [{"op": "create", "kind": "ticket", "fields": {"title": "Later"}}])
    response = signed_in(client, member).get("/projects/BAL/changesets/")
    html = response.content.decode()
    assert response.status_code == 200
    assert (
        html.index(f"#{later.number}<")
        < html.index(f"#{changeset.number}<")
        < html.index(f"#{rejected.number}<")
    )
    assertContains(response, "3 changesets")
    assertContains(response, "Tidy the login work")
    assertContains(response, '<span class="status-badge" data-status="rejected">rejected</span>', html=True)
    assertContains(response, "owner")
    assertContains(response, "waiting for review", count=2)
    assert "Content-Security-Policy" in response


def test_the_list_filters_by_status_and_explains_a_bogus_one(client, project, member, changeset):
    client = signed_in(client, member)
    response = client.get("/projects/BAL/changesets/?status=applied")
    assertContains(response, "No changesets applied in BAL.")
    assertNotContains(response, "Tidy the login work")
    response = client.get("/projects/BAL/changesets/?status=bogus")
    assertContains(
        response, "Unknown status. Choose one of: proposed, applied, rejected, conflicted.", status_code=400
    )
    assertContains(response, "Tidy the login work", status_code=400)


def test_the_review_shows_each_operation_and_that_it_applies_cleanly(client, project, viewer, changeset):
    response = signed_in(client, viewer).get(review_url(changeset))
    assert response.status_code == 200
    assertContains(response, "Changeset #1: Tidy the login work")
    assertContains(response, "Signup waits for the form.")
    assertContains(response, "Update: BAL-2 · Signup")
    assertContains(response, '<td class="value before">Signup</td>', html=True)
    assertContains(response, '<td class="value after">Sign up</td>', html=True)
    # A new ticket is named by its title, never by the changeset's ref ($reset); fields in words.
    assertContains(response, "Create: new ticket")
    assertContains(response, "Password reset")
    assertNotContains(response, "$reset")
    assertContains(response, '<th scope="row">Title</th>', html=True)
    assertContains(
        response,
        "<strong>BAL-2 · Signup</strong> will wait for <strong>BAL-1 · Login form</strong>.",
        html=True,
    )
    assertContains(response, "Applies cleanly to the current plan.")
    assertContains(response, '<section id="impact" aria-labelledby="impact-heading">')
    assert response["Content-Security-Policy"].startswith("default-src 'none'")


def test_a_viewer_sees_no_form_and_their_post_is_forbidden(client, project, viewer, changeset):
    client = signed_in(client, viewer)
    response = client.get(review_url(changeset))
    assertNotContains(response, 'name="decision"')
    assertContains(response, "waits for someone who holds changeset.apply")
    assert decide(client, changeset, "apply").status_code == 403
    assert decide(client, changeset, "reject").status_code == 403
    changeset.refresh_from_db()
    assert changeset.status == ChangesetStatus.PROPOSED


def test_a_maintainer_applies_with_a_note_and_the_plan_changes(client, project, maintainer, changeset, plan):
    first, second = plan
    client = signed_in(client, maintainer)
    assertContains(client.get(review_url(changeset)), 'value="apply"')
    response = decide(client, changeset, "apply", "Good, ship it.")
    assert response.status_code == 302
    assert response["Location"] == review_url(changeset)
    changeset.refresh_from_db()
    assert (changeset.status, changeset.decided_by, changeset.decision_note) == (
        "applied",
        maintainer,
        "Good, ship it.",
    )
    second.refresh_from_db()
    assert second.title == "Sign up"
    assert Dependency.objects.filter(blocker=first, blocked=second).exists()
    created = Item.objects.get(project=project, title="Password reset")
    page = client.get(response["Location"])
    assertContains(page, f"Applied changeset #1: Tidy the login work. Created {created.key}.")
    assertContains(page, "Good, ship it.")
    assertContains(page, f'href="/projects/BAL/items/{created.key}/"')
    assertNotContains(page, 'name="decision"')
    event = ActivityEvent.objects.get(verb="changeset.applied")
    assert event.data["note"] == "Good, ship it."


def test_a_maintainer_rejects_with_a_note(client, project, maintainer, changeset, plan):
    client = signed_in(client, maintainer)
    response = decide(client, changeset, "reject", f"Not yet {HOSTILE}")
    assert response.status_code == 302
    changeset.refresh_from_db()
    assert (changeset.status, changeset.decision_note) == ("rejected", f"Not yet {HOSTILE}")
    page = client.get(response["Location"])
    assertContains(page, "Rejected changeset #1: Tidy the login work")
    assertContains(page, "Not yet &lt;script&gt;")
    assertNotContains(page, HOSTILE)
    plan[1].refresh_from_db()
    assert plan[1].title == "Signup"
    assert not Item.objects.filter(title="Password reset").exists()


def test_a_second_post_says_already_applied(client, project, maintainer, changeset):
    client = signed_in(client, maintainer)
    assert decide(client, changeset, "apply").status_code == 302
    response = decide(client, changeset, "apply")
    assertContains(
        response, "Changeset #1 is applied; only a proposed changeset can be decided.", status_code=409
    )
    response = decide(client, changeset, "reject", "late")
    assertContains(response, "Changeset #1 is applied", status_code=409)
    assert Item.objects.filter(title="Password reset").count() == 1


def test_a_stale_changeset_is_a_readable_conflict_and_nothing_is_applied(
    client, project, maintainer, owner, changeset, plan
):
    first, second = plan
    item_update(
        actor=Actor(user=owner), item=second, fields={"title": "Register"}, base_version=second.version
    )
    client = signed_in(client, maintainer)
    page = client.get(review_url(changeset))
    assertContains(page, "Conflicts with the current plan")
    assertContains(page, "BAL-2 is at version 2, but this update was written against version 1")
    response = decide(client, changeset, "apply", "try")
    assertContains(
        response, "Not applied: the changeset conflicts with the plan as it is now", status_code=409
    )
    assertContains(response, "operations[0]", status_code=409)
    changeset.refresh_from_db()
    assert changeset.status == ChangesetStatus.CONFLICTED
    second.refresh_from_db()
    assert second.title == "Register"
    assert not Item.objects.filter(title="Password reset").exists()
    assert not Dependency.objects.filter(blocker=first, blocked=second).exists()


def test_four_eyes_hides_apply_from_the_proposer_and_refuses_their_post(client, project, maintainer, owner):
    project.settings = {"four_eyes": True}
    project.save()
    changeset = propose(project, maintainer, [{"op": "create", "kind": "ticket", "fields": {"title": "T"}}])
    client = signed_in(client, maintainer)
    page = client.get(review_url(changeset))
    assertContains(page, "This project requires four eyes")
    assertNotContains(page, 'value="apply"')
    assertContains(page, 'value="reject"')
    response = decide(client, changeset, "apply")
    assertContains(response, "someone other than the proposer must apply it", status_code=403)
    changeset.refresh_from_db()
    assert changeset.status == ChangesetStatus.PROPOSED
    other = signed_in(Client(), owner)
    assertContains(other.get(review_url(changeset)), 'value="apply"')
    assert decide(other, changeset, "apply").status_code == 302


def test_a_member_of_another_project_gets_404_everywhere(client, project, changeset):
    outsider = UserFactory(username="outsider")
    MembershipFactory(
        project=ProjectFactory(organization=project.organization, key="ELS"), user=outsider, role=Role.OWNER
    )
    client = signed_in(client, outsider)
    assert client.get("/projects/BAL/changesets/").status_code == 404
    assert client.get(review_url(changeset)).status_code == 404
    assert decide(client, changeset, "apply").status_code == 404
    assert client.get("/projects/ELS/changesets/1/").status_code == 404
    changeset.refresh_from_db()
    assert changeset.status == ChangesetStatus.PROPOSED


def test_anonymous_is_sent_to_log_in(client, changeset):
    response = client.get(review_url(changeset))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("number", [0, 99, 2**31, 2**63, 10**30])
def test_a_number_out_of_range_is_404(client, member, changeset, number):
    client = signed_in(client, member)
    assert client.get(f"/projects/BAL/changesets/{number}/").status_code == 404
    assert client.post(f"/projects/BAL/changesets/{number}/decide/", {"decision": "apply"}).status_code == 404


@pytest.mark.parametrize(
    ("decision", "note", "message"),
    [
        ("apply", "bad\x00note", "NUL"),
        ("reject", "bad\x00note", "NUL"),
        ("apply", "x" * (MAX_NOTE + 1), f"at most {MAX_NOTE} characters"),
        ("reject", "x" * (MAX_NOTE + 1), f"at most {MAX_NOTE} characters"),
        ("bogus", "", "Choose Apply or Reject."),
        ("", "", "Choose Apply or Reject."),
    ],
)
def test_bad_input_is_refused_readably_and_decides_nothing(
    client, maintainer, changeset, decision, note, message
):
    response = decide(signed_in(client, maintainer), changeset, decision, note)
    assertContains(response, message, status_code=400)
    changeset.refresh_from_db()
    assert changeset.status == ChangesetStatus.PROPOSED


def test_a_get_of_decide_is_not_allowed(client, maintainer, changeset):
    assert signed_in(client, maintainer).get(f"{review_url(changeset)}decide/").status_code == 405


def test_hostile_text_is_escaped(client, project, member, plan):
    changeset = propose(
        project,
        member,
        [{"op": "create", "kind": "ticket", "fields": {"title": HOSTILE, "description": HOSTILE}}],
        title=f"Title {HOSTILE}",
        rationale=f"Because {HOSTILE}",
    )
    for url in ("/projects/BAL/changesets/", review_url(changeset)):
        response = signed_in(client, member).get(url)
        assertContains(response, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;")
        assertNotContains(response, HOSTILE)


def test_a_decided_changeset_is_not_validated_again(client, project, owner, member, changeset):
    changeset_reject(actor=Actor(user=owner), changeset=changeset, note="No")
    response = signed_in(client, member).get(review_url(changeset))
    assertContains(response, "Not checked: this changeset is rejected")
    assertContains(response, "<dt>Decided by</dt><dd>owner</dd>", html=True)


def test_the_home_page_links_every_reader_to_the_review_with_the_count(client, project, viewer, changeset):
    response = signed_in(client, viewer).get("/")
    assertContains(response, 'href="/projects/BAL/changesets/"')
    assertContains(response, "(1 proposed)")
    assertNotContains(response, "/admin/tracker/changeset/")


def impact_of(response) -> str:
    html = response.content.decode()
    return html[html.index('id="impact"') : html.index("</section>", html.index('id="impact-after-heading"'))]


def test_the_review_shows_the_impact_tried_and_rolled_back(client, project, viewer, plan, changeset):
    first, second = plan
    versions = list(Item.objects.order_by("pk").values_list("version", flat=True))

    response = signed_in(client, viewer).get(review_url(changeset))

    impact = impact_of(response)
    blocked = impact[impact.index("Stop being runnable") : impact.index("Longest remaining chain")]
    assert f'<a href="/projects/BAL/items/{second.key}/">{second.key}</a> Sign up' in blocked
    assert "Become blocked" in blocked
    chain = impact[impact.index("Longest remaining chain") : impact.index("The graph now")]
    assert "Now</dt><dd>none" in chain
    assert "2 tickets:" in chain
    assert chain.index(first.key) < chain.index(second.key)
    assert impact.count('<svg xmlns="http://www.w3.org/2000/svg"') == 2  # now, and once applied
    assert "Password reset — draft, new." in impact  # the ticket it creates, in the graph once applied
    assert "$reset" not in impact  # named "New 1" and by its title, without a page yet
    # Nothing of the trial stayed.
    assert list(Item.objects.order_by("pk").values_list("version", flat=True)) == versions
    assert not Dependency.objects.exists()
    assert Changeset.objects.get(pk=changeset.pk).status == ChangesetStatus.PROPOSED


def test_a_changeset_that_no_longer_applies_says_why_instead_of_an_impact(
    client, project, owner, member, plan, changeset
):
    second = plan[1]
    item_update(actor=Actor(user=owner), item=second, fields={"title": "Changed meanwhile"})

    response = signed_in(client, member).get(review_url(changeset))

    html = response.content.decode()
    section = html[html.index('id="impact"') :]
    assert "This changeset no longer applies" in section[: section.index("</section>")]
    assert "<svg" not in section[: section.index("</section>")]


def test_a_decided_changeset_shows_no_impact(client, project, owner, changeset):
    changeset_reject(actor=Actor(user=owner), changeset=changeset, note="No")

    html = signed_in(client, owner).get(review_url(changeset)).content.decode()

    section = html[html.index('id="impact"') :]
    assert "<svg" not in section[: section.index("</section>")]
    assert "Only a proposed changeset has an impact; this one is rejected." in section


def test_an_impact_that_keeps_the_chain_says_so(client, project, owner, member, plan):
    first, second = plan
    dependency_add(actor=Actor(user=owner), blocker=first, blocked=second)
    retitle = propose(
        project,
        member,
        [{"op": "update", "item": first.key, "base_version": first.version, "fields": {"title": "Log in"}}],
    )

    impact = impact_of(signed_in(client, member).get(review_url(retitle)))

    assert "Applying it changes no ticket's runnability." in impact
    chain = impact[impact.index("Longest remaining chain") : impact.index("The graph now")]
    assert "Once applied</dt><dd>unchanged" in chain


def test_the_list_and_the_review_lead_back_to_the_plan(client, member, changeset):
    for url in ("/projects/BAL/changesets/", review_url(changeset)):
        html = signed_in(client, member).get(url).content.decode()
        start = html.index('<nav class="crumbs"')
        crumbs = html[start : html.index("</nav>", start)]
        assert '<a href="/projects/BAL/"><span class="key">BAL</span>' in crumbs, url
