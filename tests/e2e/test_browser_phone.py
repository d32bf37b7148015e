"""Pages that hold (SPEC § 9 "Everywhere"), in a real Chromium on the seeded demo.

At 375 px, light and dark, every page a team uses fits the window (nothing scrolls sideways) and
axe, its experimental rules included (``label-content-name-mismatch``: a link's name contains
its visible text), finds no serious or critical violation. The dependency graph fits its box at
1280 and 375 px, the end of the longest chain included, and zooms by its buttons. The keyboard: "/"
focuses the search, typing filters (the form submits itself), "j" "j" Enter opens the second row.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from tests.e2e.chat_page import new_chat
from tests.e2e.conftest import VIEWPORTS, shell
from tests.e2e.test_browser_a11y import FAILING, report
from tests.e2e.test_browser_review import assert_fits, knowledge_entry, propose

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]

# WCAG A and AA, axe's best practices, and its experimental rules.
RUN_OPTIONS = {
    "resultTypes": ["violations"],
    "runOnly": {
        "type": "tag",
        "values": [
            "wcag2a",
            "wcag2aa",
            "wcag21a",
            "wcag21aa",
            "wcag22aa",
            "best-practice",
            "experimental",
        ],
    },
}
_titles = itertools.count(1)


def assert_accessible(page: Any) -> None:
    results = Axe().run(page, options=RUN_OPTIONS).response
    failing = [v for v in results["violations"] if v["impact"] in FAILING]
    assert not failing, f"{page.url}\n{report(results['violations'])}"


@pytest.fixture(scope="module")
def places(browser: Any, server: Any, signed_in: str) -> dict[str, str]:
    """The pages' addresses that depend on the demo's data: a changeset to review (a new ticket, an
    update and a dependency), a knowledge entry, a chat, and a ticket."""
    number, _ = propose(server, f"Phone review {next(_titles)}")
    context = browser.new_context(base_url=server.url, storage_state=signed_in)
    try:
        page = context.new_page()
        new_chat(page)
        chat = page.url.removeprefix(server.url)
        page.goto("/projects/DEMO/")
        ticket = page.locator(".ticket-row a.ticket-link").first.get_attribute("href")
    finally:
        context.close()
    assert ticket
    webhook = shell(
        server,
        "from django.contrib.auth.models import User; from tracker.models import Project; "
        "from tracker.services.activity import Actor; "
        "from tracker.services.webhook_endpoints import webhook_create, webhook_ping; "
        "actor, project = Actor(user=User.objects.get(username='demo')), Project.objects.get(key='DEMO'); "
        "hook, _ = webhook_create(actor=actor, project=project, name='Team chat', "
        "url='https://hooks.example.com/ballet/a-rather-long-path-that-must-wrap-on-a-phone', "
        "format='slack'); "
        "webhook_ping(actor=actor, project=project, webhook_id=hook.pk); print(hook.pk)",
    ).split()[-1]
    return {
        "webhook": f"/projects/DEMO/webhooks/{webhook}/",
        "review": f"/projects/DEMO/changesets/{number}/",
        "entry": f"/projects/DEMO/knowledge/{knowledge_entry(server)}/",
        "chat": chat,
        "ticket": ticket,
    }


PAGES = {
    "home": "/",
    "plan": "/projects/DEMO/",
    "plan-board": "/projects/DEMO/?layout=board",
    "plan-filtered": "/projects/DEMO/?state=ready&kind=ticket",
    "plan-runnable": "/projects/DEMO/?view=runnable",
    "ticket": "{ticket}",
    "changesets": "/projects/DEMO/changesets/",
    "review": "{review}",
    "knowledge": "/projects/DEMO/knowledge/",
    "entry": "{entry}",
    "chats": "/projects/DEMO/chat/",
    "chat": "{chat}",
    "settings": "/projects/DEMO/settings/",
    "keys": "/keys/",
    "inbox": "/inbox/",
    "members": "/projects/DEMO/members/",
    "webhooks": "/projects/DEMO/webhooks/",
    "webhook": "{webhook}",
    "notifications": "/notifications/",
}


@pytest.fixture(params=["light", "dark"])
def phone(request: pytest.FixtureRequest, browser: Any, server: Any, signed_in: str) -> Iterator[Any]:
    """A signed-in tab 375 px wide; no script error allowed."""
    context = browser.new_context(
        base_url=server.url, storage_state=signed_in, viewport=VIEWPORTS["375"], color_scheme=request.param
    )
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    yield page
    context.close()
    assert not errors, errors


@pytest.mark.parametrize("name", list(PAGES))
def test_each_page_fits_a_phone_and_passes_axe_with_its_experimental_rules(phone, places, name):
    path = PAGES[name].format(**places)
    response = phone.goto(path)
    assert response is not None
    assert response.status == 200, f"{name}: {response.status}"
    phone.wait_for_load_state("load")
    if name == "chat":
        expect(phone.locator("#chat-connection")).to_have_text("Live")
    assert_fits(phone)
    assert_accessible(phone)


# The graph


LONGEST_CHAIN_END = """(region) => {
  const frame = region.getBoundingClientRect();
  const chain = [...region.querySelectorAll('.node.chain .box')];
  const boxes = [...region.querySelectorAll('.node .box')].map((box) => box.getBoundingClientRect());
  const inside = (r) => r.left >= frame.left - 1 && r.right <= frame.right + 1
    && r.top >= frame.top - 1 && r.bottom <= frame.bottom + 1;
  return {
    chain: chain.length,
    outside: boxes.filter((r) => !inside(r)).length,
    scrolls: region.scrollWidth > region.clientWidth + 1,
  };
}"""


@pytest.mark.parametrize("width", ["wide", "375"])
def test_the_graph_fits_its_box_and_zooms_by_keyboard(browser, server, signed_in, width):
    context = browser.new_context(base_url=server.url, storage_state=signed_in, viewport=VIEWPORTS[width])
    context.set_default_timeout(10_000)
    try:
        page = context.new_page()
        page.goto("/projects/DEMO/#graph")
        region = page.get_by_role("region", name="Dependency graph of DEMO")
        expect(region.locator("svg.graph")).to_be_visible()
        seen = region.evaluate(LONGEST_CHAIN_END)
        assert seen["chain"] > 1  # the demo has a chain to highlight
        assert seen == {"chain": seen["chain"], "outside": 0, "scrolls": False}
        legend = page.locator("#graph .graph-legend")
        for words in ("Ready", "Runnable", "Done or cancelled", "longest remaining chain"):
            expect(legend).to_contain_text(words)
        zoom = page.get_by_role("group", name=re.compile("^Zoom"))
        zoom.get_by_role("button", name="Zoom in").focus()
        page.keyboard.press("Enter")
        page.keyboard.press("Enter")
        page.wait_for_function("(r) => r.scrollWidth > r.clientWidth + 1", arg=region.element_handle())
        zoom.get_by_role("button", name="Fit").focus()
        page.keyboard.press("Enter")
        page.wait_for_function("(r) => r.scrollWidth <= r.clientWidth + 1", arg=region.element_handle())
        assert_fits(page)
    finally:
        context.close()


def test_the_review_names_fields_in_words_and_shows_the_new_ticket_in_the_graph(phone, places):
    phone.goto(places["review"])
    operations = phone.locator("ol.operations")
    expect(operations).to_contain_text("Description")
    expect(operations).not_to_contain_text("description ")
    expect(phone.locator("main")).not_to_contain_text("$new")
    # The update's table stacks at 375 px: "Now" has the width of the column, not a few letters.
    before = phone.locator("table.fields td.before").first
    column = phone.locator("ol.operations > li").first.evaluate("(li) => li.clientWidth")
    assert before.evaluate("(td) => td.getBoundingClientRect().width") > column * 0.8
    after = phone.get_by_role("region", name=re.compile("once applied"))
    expect(after.locator(".node.new")).to_have_count(1)
    assert after.evaluate(LONGEST_CHAIN_END)["outside"] == 0  # the new ticket is in view
    expect(after.locator(".edge.added")).to_have_count(1)
    expect(phone.locator(".graph-legend").last).to_contain_text("Dependency the changeset adds")


# The keyboard


def test_slash_searches_as_you_type_and_j_j_enter_opens_the_second_row(page):
    page.goto("/projects/DEMO/")
    page.keyboard.press("/")
    search = page.get_by_label("Search", exact=True)
    expect(search).to_be_focused()
    page.keyboard.type("booking")
    page.wait_for_url(re.compile(r"[?&]q=booking"))  # no button pressed: the form applied itself
    expect(search).to_be_focused()  # back where the reader typed
    expect(search).to_have_value("booking")
    rows = page.locator(".ticket-row")
    expect(rows.nth(1)).to_be_visible()
    second = rows.nth(1).locator("a").first.get_attribute("href")
    page.keyboard.press("Escape")  # leaves the field: j and k move again
    page.keyboard.press("j")
    expect(rows.nth(0)).to_have_class(re.compile("row-current"))
    page.keyboard.press("j")
    expect(rows.nth(1)).to_have_class(re.compile("row-current"))
    expect(rows.nth(1).locator("a").first).to_be_focused()
    page.keyboard.press("k")
    expect(rows.nth(0)).to_have_class(re.compile("row-current"))
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**{second}")


def test_a_filter_applies_as_it_changes(page):
    page.goto("/projects/DEMO/")
    page.get_by_label("State").select_option("ready")
    page.wait_for_url(re.compile(r"[?&]state=ready"))
    expect(page.get_by_label("State")).to_have_value("ready")
    states = page.locator(".plan-main .ticket-row .badge.state").all_inner_texts()
    assert states
    assert set(states) == {"ready"}
