"""The knowledge and changeset review pages in a real Chromium: axe scans at 1280 and 375 px and in
the dark scheme, nothing wider than a phone, Apply by keyboard alone, no Apply for a viewer; and the
admin's review, whose Apply and Reject fit a 1280 px window."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import VIEWPORTS, shell
from tests.e2e.test_browser_a11y import assert_accessible
from tests.fakes.servers import PASSWORD, Server

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]

_titles = itertools.count(1)


def propose(server: Server, title: str) -> tuple[int, int]:
    """A changeset of DEMO proposed by its member ``agent`` (so that demo may apply it even under four
    eyes): a new ticket, an update of the first ticket and a dependency; its number and id."""
    number, pk = shell(
        server,
        "from django.contrib.auth.models import User; "
        "from tracker.models import Item, Project; "
        "from tracker.services.activity import Actor; "
        "from tracker.services.changesets import changeset_propose; "
        "project = Project.objects.get(key='DEMO'); "
        "tickets = Item.objects.filter(project=project, kind='ticket').order_by('number'); "
        "first, second = tickets.exclude(state__in=['done', 'cancelled'])[:2]; "
        "changeset = changeset_propose(actor=Actor(user=User.objects.get(username='agent')), "
        f"project=project, title={title!r}, rationale='Because <b>reasons</b>.', operations=["
        f"{{'op': 'create', 'ref': 'new', 'kind': 'ticket', 'fields': {{'title': {title + ' ticket'!r}}}}}, "
        "{'op': 'update', 'item': first.key, 'base_version': first.version, "
        "'fields': {'description': first.description + ' (reviewed)'}}, "
        "{'op': 'add_dependency', 'blocker': '$new', 'blocked': second.key}]); "
        "print(changeset.number, changeset.pk)",
    ).split()
    return int(number), int(pk)


def knowledge_entry(server: Server) -> int:
    """The id of a DEMO knowledge entry with more than one revision."""
    return int(
        shell(
            server,
            "from knowledge.models import KnowledgeEntry; "
            "print(KnowledgeEntry.objects.filter(projects__key='DEMO', version__gt=1).order_by('pk')[0].pk)",
        )
    )


def assert_fits(page: Any) -> None:
    """Nothing of the page makes the window scroll sideways."""
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"{page.url} is {widths[0]} px wide in a {widths[1]} px window"


def look(page: Any, name: str) -> None:
    width = page.viewport_size["width"]
    scheme = page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'")
    page.screenshot(path=f"/tmp/ballet-review-{name}-{width}-{scheme}.png", full_page=True)  # to look at
    assert_fits(page)
    assert_accessible(page)


def test_the_knowledge_pages_are_accessible(tab, server):
    tab.goto("/projects/DEMO/knowledge/")
    expect(tab.get_by_role("heading", name="Knowledge", exact=True)).to_be_visible()
    expect(tab.locator(".entry-list > li")).not_to_have_count(0)
    look(tab, "knowledge-list")
    tab.goto(f"/projects/DEMO/knowledge/{knowledge_entry(server)}/")
    expect(tab.get_by_role("heading", name=re.compile(r"Revisions \(\d+\)"))).to_be_visible()
    tab.locator(".revisions summary").first.click()
    expect(tab.locator(".revisions details[open] .text")).to_be_visible()
    look(tab, "knowledge-entry")


def test_the_changeset_pages_are_accessible(tab, server):
    number, _ = propose(server, f"A11y review {next(_titles)}")
    tab.goto("/projects/DEMO/changesets/")
    expect(tab.get_by_role("heading", name="Changesets")).to_be_visible()
    expect(tab.get_by_role("link", name=f"#{number}", exact=True)).to_be_visible()
    look(tab, "changeset-list")
    tab.goto(f"/projects/DEMO/changesets/{number}/")
    expect(tab.locator(".validation-state")).to_be_visible()
    expect(tab.get_by_role("button", name=f"Apply changeset #{number}")).to_be_visible()
    look(tab, "changeset-review")


def test_a_maintainer_applies_by_keyboard(page, server):
    number, _ = propose(server, f"Keyboard apply {next(_titles)}")
    page.goto(f"/projects/DEMO/changesets/{number}/")
    page.get_by_label("Note").focus()
    page.keyboard.type("Checked by keyboard.")
    page.keyboard.press("Tab")
    apply = page.get_by_role("button", name=f"Apply changeset #{number}")
    expect(apply).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".messages")).to_contain_text(f"Applied changeset #{number}: Keyboard apply")
    expect(page.locator(".status-badge")).to_have_text("applied")
    expect(page.locator(".decision-note")).to_have_text("Checked by keyboard.")
    expect(page.get_by_role("button", name=re.compile("Apply"))).to_have_count(0)


def test_a_viewer_sees_no_apply_button(browser, server):
    number, _ = propose(server, f"Viewer looks {next(_titles)}")
    context = browser.new_context(base_url=server.url)
    context.set_default_timeout(10_000)
    try:
        page = context.new_page()
        page.goto(f"/accounts/login/?next=/projects/DEMO/changesets/{number}/")
        page.get_by_label("Username").fill("viewer")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name=re.compile(f"Changeset #{number}"))).to_be_visible()
        expect(page.locator(".operation")).to_have_count(3)
        expect(page.get_by_role("button", name=re.compile("Apply|Reject"))).to_have_count(0)
        expect(page.get_by_text("waits for someone who holds changeset.apply")).to_be_visible()
    finally:
        context.close()


def test_the_admin_review_shows_apply_and_reject_whole_at_1280(browser, server, signed_in):
    _, pk = propose(server, f"Admin fit {next(_titles)}")
    context = browser.new_context(base_url=server.url, storage_state=signed_in, viewport=VIEWPORTS["wide"])
    context.set_default_timeout(10_000)
    try:
        page = context.new_page()
        page.goto(f"/admin/tracker/changeset/{pk}/change/")
        page.screenshot(path="/tmp/ballet-review-admin-1280.png", full_page=True)  # to look at
        for name in ("Apply changeset", "Reject changeset"):
            button = page.get_by_role("button", name=re.compile(name))
            button.scroll_into_view_if_needed()
            box = button.bounding_box()
            assert box is not None, name
            assert box["x"] >= 0, (name, box)
            assert box["x"] + box["width"] <= 1280, (name, box)
        assert_fits(page)
    finally:
        context.close()
