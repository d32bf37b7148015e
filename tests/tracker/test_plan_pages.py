"""The plan page (/projects/{key}/) and an item's page (/projects/{key}/items/{item_key}/): what a
reader sees, who may see it, bad filters, hostile text, and a query count that does not grow."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from pytest_django.asserts import assertContains, assertNotContains

from knowledge.services import knowledge_create
from planner.domain.services.agent_questions import question_create
from planner.models import Session
from tests.factories import make_membership, make_project
from tracker.models import Item, Role
from tracker.search.embeddings import LocalModelBackend, embedding_backend_set
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_apply, changeset_propose
from tracker.services.items import dependency_add
from tracker.services.projects import project_update
from tracker.services.work import claim_take, report_add


def page(client: Client, user: Any, url: str) -> Any:
    client.force_login(user)
    return client.get(url)


def listed(response: Any) -> str:
    """The plan's tree, board or search answer (not the side panels, nor the filter form)."""
    html = response.content.decode()
    return html[html.index('class="plan-main"') : html.index('class="plan-side"')]


def item_url(item: Item) -> str:
    return f"/projects/{item.project.key}/items/{item.key}/"


@pytest.fixture
def plan(make_item) -> dict[str, Item]:
    """A milestone with an epic, tickets inside and outside them, one dependency."""
    milestone = make_item(kind="milestone", title="Launch")
    epic = make_item(kind="epic", title="Accounts", milestone=milestone)
    login = make_item(title="Login form", state="ready", epic=epic, milestone=milestone)
    reset = make_item(title="Password reset", state="ready", epic=epic, milestone=milestone)
    loose = make_item(title="Loose end", state="draft")
    shipped = make_item(title="Shipped thing", state="done")
    return {
        "milestone": milestone,
        "epic": epic,
        "login": login,
        "reset": reset,
        "loose": loose,
        "done": shipped,
    }


def test_anonymous_is_sent_to_log_in(client: Client, project, plan):
    for url in ("/projects/BAL/", item_url(plan["login"])):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")


def test_members_and_viewers_read_the_plan_and_every_item(client: Client, users, plan):
    for role in ("member", "viewer"):
        assert page(client, users[role], "/projects/BAL/").status_code == 200
        for item in plan.values():
            assert page(client, users[role], item_url(item)).status_code == 200


def test_a_member_of_another_project_of_the_organization_gets_404(client: Client, org, plan):
    neighbour = make_project(organization=org, key="NEXT", name="Next door")
    outsider = make_membership(project=neighbour).user
    assert page(client, outsider, "/projects/BAL/").status_code == 404
    for item in plan.values():
        assert page(client, outsider, item_url(item)).status_code == 404
    assert page(client, outsider, "/projects/NOPE/").status_code == 404


def test_the_tree_groups_tickets_under_epics_and_milestones(client: Client, member, plan):
    response = page(client, member, "/projects/BAL/")
    html = listed(response)
    assertContains(response, 'href="/projects/BAL/items/BAL-3/"')
    assertContains(response, "Login form")
    assert (
        html.index("Launch") < html.index("Accounts") < html.index("Login form") < html.index("No milestone")
    )
    assert html.index("No milestone") < html.index("No epic") < html.index("Loose end")
    assertContains(response, '<span class="badge state state-ready">ready</span>')
    assertContains(response, 'id="graph" aria-labelledby="graph-heading"')
    assertContains(response, "Dependency graph")
    assert "style=" not in response.content.decode()
    assert "script-src 'self'" in response["Content-Security-Policy"]


def test_the_plan_draws_its_dependency_graph_with_links_and_the_chain(client: Client, owner, member, plan):
    dependency_add(actor=Actor(user=owner), blocker=plan["login"], blocked=plan["reset"])

    html = page(client, member, "/projects/BAL/").content.decode()
    graph = html[html.index('id="graph"') :]

    assert "<svg" in graph
    assert f'href="/projects/BAL/items/{plan["login"].key}/"' in graph
    assert f'href="/projects/BAL/items/{plan["reset"].key}/"' in graph
    # The login form: runnable, and first of the chain.
    assert graph.count('class="node state-ready runnable chain') == 1
    assert "The graph as a list" in graph
    assert "on the longest remaining chain" in graph


def test_the_board_puts_tickets_in_columns_by_state(client: Client, member, plan):
    response = page(client, member, "/projects/BAL/?layout=board")
    html = listed(response)
    for label in ("draft", "ready", "in progress", "in review", "done", "cancelled"):
        assertContains(response, f'<span class="badge state state-{label.replace(" ", "_")}">{label}</span>')
    assert html.index('id="column-ready"') < html.index("Login form") < html.index('id="column-in_progress"')
    assert html.index('id="column-done"') < html.index("Shipped thing") < html.index('id="column-cancelled"')
    assertContains(response, 'aria-current="page">Board by state</a>')


def test_a_long_resolved_column_links_to_the_rest(client: Client, member, make_item):
    for n in range(12):
        make_item(title=f"Old {n}", state="done")
    response = page(client, member, "/projects/BAL/?layout=board")
    assertContains(response, '<a href="?state=done">2 more')
    board = listed(response)
    assert "Old 11" in board
    assert "Old 0<" not in board


def test_filters_keep_the_tickets_they_name(client: Client, member, plan):
    drafts = listed(page(client, member, "/projects/BAL/?state=draft"))
    assert "Loose end" in drafts
    assert "Login form" not in drafts
    in_epic = listed(page(client, member, f"/projects/BAL/?epic={plan['epic'].key}"))
    assert "Password reset" in in_epic
    assert "Loose end" not in in_epic
    epics = listed(page(client, member, "/projects/BAL/?kind=epic"))
    assert "Accounts" in epics
    assert "Login form" not in epics


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("state=nope", "Unknown state “nope”"),
        ("kind=bug", "Unknown kind “bug”"),
        ("epic=999999999999999", "Item 999999999999999 not found in project BAL."),
        ("epic=BAL-1", "BAL-1 is a milestone, not an epic."),
        ("milestone=BAL-999999999999", "not found in project BAL"),
        ("q=%00", "The q filter contains a NUL character"),
        ("epic=BAL-2%00", "The epic filter contains a NUL character"),
        ("layout=spiral", "Unknown layout “spiral”"),
        ("view=everything", "Unknown view “everything”"),
        ("q=" + "x" * 501, "longer than 500 characters"),
    ],
)
def test_a_bad_filter_is_a_message_not_an_error(client: Client, member, plan, query, message):
    response = page(client, member, f"/projects/BAL/?{query}")
    assert response.status_code == 200
    assertContains(response, message)
    assert "Login form" in listed(response)  # the bad filter is left out, the plan still shows


def test_a_search_ranks_the_matching_items(client: Client, member, make_item, indexed):
    with indexed():
        make_item(title="Invoice export to CSV", state="ready")
        make_item(title="Dark mode toggle", state="ready")
    response = page(client, member, "/projects/BAL/?q=invoice+export")
    assertContains(response, "Best matches for “invoice export”")
    found = listed(response)
    assert "Invoice export to CSV" in found
    assert "Dark mode toggle" not in found or found.index("Invoice export") < found.index("Dark mode toggle")
    response = page(client, member, "/projects/BAL/?q=zzzqqqxxx")
    assertContains(response, "Nothing in BAL matches")


def test_a_search_shows_the_items_only_related_to_it_apart(client: Client, member, make_item, indexed):
    """A mention of the word in a description, with nothing else about it, is no best match."""
    embedding_backend_set(LocalModelBackend())
    try:
        with indexed():
            make_item(title="Export the week's bookings as CSV", state="ready")
            make_item(
                title="Public launch",
                description="Every member and their guests can book. Guests pay the guest fee by card, "
                "everyone gets a confirmation and a reminder, and the front desk can export the week.",
                state="ready",
            )
        response = page(client, member, "/projects/BAL/?q=export")
    finally:
        embedding_backend_set(None)
    html = listed(response)
    best, related = html.split('id="related-heading"')
    assert "Export the week&#x27;s bookings as CSV" in best
    assert "Public launch" not in best
    assert "Related to “export”" in related
    assert "Public launch" in related


def test_the_runnable_view_lists_only_runnable_tickets(client: Client, member, owner, plan):
    dependency_add(actor=Actor(user=owner), blocker=plan["login"], blocked=plan["reset"])
    response = page(client, member, "/projects/BAL/")
    assertContains(response, 'Runnable now <span class="count">1</span>')
    assertContains(response, "waits on BAL-3")
    runnable = listed(page(client, member, "/projects/BAL/?view=runnable"))
    assert "Login form" in runnable
    assert "Password reset" not in runnable
    assert "Loose end" not in runnable


def test_claims_show_who_holds_what_until_when(client: Client, member, plan):
    claim = claim_take(actor=Actor(user=member), project=plan["login"].project, item=plan["login"])
    response = page(client, member, "/projects/BAL/")
    assertContains(response, "held by <strong>member</strong>")
    assertContains(response, f'<time datetime="{claim.expires_at.isoformat()}"')
    assertContains(response, 'member</span> claimed <a href="/projects/BAL/items/BAL-3/">BAL-3</a>')


def test_recent_activity_reads_in_words(client: Client, maintainer, member, project, plan):
    changeset = changeset_propose(
        actor=Actor(user=member),
        project=project,
        title="Ready the loose end",
        operations=[
            {"op": "update", "item": plan["loose"].key, "base_version": 1, "fields": {"state": "ready"}}
        ],
    )
    changeset_apply(actor=Actor(user=maintainer), changeset=changeset)
    response = page(client, member, "/projects/BAL/")
    assertContains(
        response, 'maintainer</span> applied <a href="/projects/BAL/changesets/1/">changeset #1</a>'
    )
    assertContains(response, 'owner</span> created <a href="/projects/BAL/items/BAL-5/">BAL-5</a>')
    assertContains(
        response, 'href="/projects/BAL/changesets/">Changesets to review <span class="count">0</span>'
    )
    item = page(client, member, item_url(plan["loose"]))
    assertContains(item, 'href="/projects/BAL/changesets/1/">Changeset #1</a> Ready the loose end')
    assertContains(item, 'updated <a href="/projects/BAL/items/BAL-5/">BAL-5</a>: state (now ready)')
    assertNotContains(page(client, member, item_url(plan["login"])), "Changeset #1")


@pytest.fixture
def chat_project(project, owner):
    project_update(actor=Actor(user=owner), project=project, credential="sk-test")
    return project


def test_open_questions_link_to_their_sub_chat(client: Client, chat_project, member, viewer, plan):
    question = question_create(user=member, project=chat_project, text="Which database?", item_key="BAL-3")
    sub_chat = Session.objects.get(question=question)
    response = page(client, member, "/projects/BAL/")
    assertContains(response, f'<a href="/projects/BAL/chat/{sub_chat.pk}/">Which database?</a>')
    item = page(client, member, item_url(plan["login"]))
    assertContains(item, f'<a href="/projects/BAL/chat/{sub_chat.pk}/">Which database?</a>')
    assertNotContains(page(client, member, item_url(plan["reset"])), "Which database?")
    seen_by_viewer = page(client, viewer, "/projects/BAL/")  # a viewer may not open the sub-chat
    assertContains(seen_by_viewer, "Which database?")
    assertNotContains(seen_by_viewer, f"/chat/{sub_chat.pk}/")


def test_the_ticket_page_shows_everything_about_it(client: Client, owner, member, project, plan):
    dependency_add(actor=Actor(user=owner), blocker=plan["login"], blocked=plan["reset"])
    claim = claim_take(actor=Actor(user=member), project=project, item=plan["login"])
    report_add(
        actor=Actor(user=member),
        claim=claim,
        kind="progress",
        summary="Form **drafted**\n<img src=x onerror=alert(1)>",
        links=["https://ci.example/run/1"],
    )
    response = page(client, member, item_url(plan["login"]))
    assertContains(response, "Claimed by <strong>member</strong>")
    assertContains(response, "&lt;img src=x onerror=alert(1)&gt;")
    assertContains(response, '<a href="https://ci.example/run/1" rel="nofollow noopener noreferrer">')
    assertContains(response, 'href="/projects/BAL/items/BAL-2/">BAL-2 Accounts</a>')
    assertContains(response, 'href="/projects/BAL/items/BAL-1/">BAL-1 Launch</a>')
    assertContains(response, 'href="/projects/BAL/items/BAL-4/">BAL-4</a> Password reset')
    assertContains(
        response,
        'owner</span> made <a href="/projects/BAL/items/BAL-3/">BAL-3</a> block '
        '<a href="/projects/BAL/items/BAL-4/">BAL-4</a>',
    )
    assertContains(
        response, 'member</span> reported progress on <a href="/projects/BAL/items/BAL-3/">BAL-3</a>'
    )
    blocked = page(client, member, item_url(plan["reset"]))
    assertContains(
        blocked,
        'href="/projects/BAL/items/BAL-3/">BAL-3</a> Login form <span class="badge state state-in_progress">',
    )
    epic = page(client, member, item_url(plan["epic"]))
    assertContains(epic, "Login form")
    assertContains(epic, "Password reset")
    milestone = page(client, member, item_url(plan["milestone"]))
    assertContains(milestone, "Accounts")


def test_a_ticket_shows_its_description_as_markdown_and_its_criteria_and_policy_as_text(
    client: Client, member, make_item
):
    other = make_item(title="Other")
    ticket = make_item(
        title="Export",
        description=f"Line one\nLine <b>two</b>\n\n## Steps\n\n**Bold**, after {other.key} and BAL-999",
        acceptance_criteria=["CSV downloads", "<i>UTF-8</i>"],
        policy={"review": "none"},
    )
    response = page(client, member, item_url(ticket))
    assertContains(response, "<p>Line one<br>\nLine &lt;b&gt;two&lt;/b&gt;</p>")
    assertContains(response, "<h2>Steps</h2>")
    # A key of the project that exists is a link; one that does not is text.
    linked = f'<a href="{item_url(other)}">{other.key}</a>'
    assertContains(response, f"<strong>Bold</strong>, after {linked} and BAL-999")
    assertContains(response, "<li>&lt;i&gt;UTF-8&lt;/i&gt;</li>")
    assertContains(response, "&quot;review&quot;: &quot;none&quot;")


def test_linked_knowledge_shows_only_what_the_reader_may_read(
    client: Client, org, owner, member, project, plan
):
    elsewhere = make_project(organization=org, key="SEC", name="Secret")
    make_membership(project=elsewhere, user=owner, role=Role.OWNER)
    actor = Actor(user=owner)
    knowledge_create(
        actor=actor, kind="note", title="Session cookies", projects=[project], items=[plan["login"]]
    )
    knowledge_create(
        actor=actor, kind="note", title="Secret roadmap", projects=[project, elsewhere], items=[plan["login"]]
    )
    response = page(client, member, item_url(plan["login"]))
    assertContains(response, "Session cookies")
    assertNotContains(response, "Secret roadmap")
    assertContains(page(client, owner, item_url(plan["login"])), "Secret roadmap")


@pytest.mark.parametrize("key", ["bal-3", "BAL-0", "BAL-x", "BAL-99999999999999999999", "BAL-3%00", "OTH-3"])
def test_a_malformed_or_unknown_item_key_is_404(client: Client, member, plan, key):
    assert page(client, member, f"/projects/BAL/items/{key}/").status_code == 404


def test_hostile_titles_render_escaped(client: Client, member, make_item):
    ticket = make_item(title="<script>alert(1)</script>", state="ready")
    for url in ("/projects/BAL/", "/projects/BAL/?layout=board", item_url(ticket)):
        response = page(client, member, url)
        assertNotContains(response, "<script>alert(1)</script>")
        assertContains(response, "&lt;script&gt;alert(1)&lt;/script&gt;")


def _queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def _grow(make_item, owner, epic: Item, count: int) -> None:
    previous = None
    for n in range(count):
        ticket = make_item(title=f"Ticket {n}", state="ready", epic=epic)
        if previous is not None:
            dependency_add(actor=Actor(user=owner), blocker=previous, blocked=ticket)
        claim_take(actor=Actor(user=owner), project=ticket.project, item=ticket) if n == 0 else None
        previous = ticket


@pytest.mark.parametrize("layout", ["tree", "board"])
def test_the_plan_reads_a_fixed_number_of_queries(client: Client, owner, member, make_item, layout):
    epic = make_item(kind="epic", title="Epic")
    client.force_login(member)
    _grow(make_item, owner, epic, 3)
    url = f"/projects/BAL/?layout={layout}"
    small = _queries(client, url)
    _grow(make_item, owner, epic, 30)
    assert _queries(client, url) == small


def test_a_ticket_page_reads_a_fixed_number_of_queries(client: Client, owner, member, make_item):
    epic = make_item(kind="epic", title="Epic")
    client.force_login(member)
    url = item_url(epic)
    _grow(make_item, owner, epic, 2)
    small = _queries(client, url)
    _grow(make_item, owner, epic, 20)
    assert _queries(client, url) == small


def test_recent_activity_says_when_in_words(client: Client, member, plan):
    html = page(client, member, "/projects/BAL/").content.decode()

    assert "just now</time>" in html
    assert "0 minutes ago" not in html
