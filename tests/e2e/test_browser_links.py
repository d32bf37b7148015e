"""References become links in the chat, and the changeset card decides in place, in a real Chromium.

The planner (the scripted fake model) names item keys, changesets and knowledge entries; only
those the server confirms for the reader become links, to the addresses it gives
(``/projects/{key}/refs/``), whatever the model wrote. The changeset card's Apply and Reject
post to the REST API with the page's session; the decision reaches a second tab live.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.chat_page import assistant, new_chat, send
from tests.e2e.conftest import VIEWPORTS, shell
from tests.e2e.test_browser_a11y import assert_accessible
from tests.fakes.messages_api import TextReply, ToolCallSpec, ToolUseReply
from tests.fakes.servers import PASSWORD, Server

pytestmark = pytest.mark.browser

WORLD = """
import json
from django.contrib.auth.models import User
from knowledge.services import knowledge_create
from tracker.models import Changeset, Item, Membership, Project, Role
from tracker.services.activity import Actor
from tracker.services.items import item_create
demo = User.objects.get(username="demo")
outsider, _ = User.objects.get_or_create(username="outsider")
project = Project.objects.get(key="DEMO")
teammate, made = User.objects.get_or_create(username="teammate")
if made:
    teammate.set_password("{password}")
    teammate.save()
    Membership.objects.create(project=project, user=teammate, role=Role.MEMBER)
hidden = Project.objects.filter(key="HID").first()
if hidden is None:
    hidden = Project.objects.create(organization=project.organization, key="HID", name="Hidden")
    Membership.objects.create(project=hidden, user=outsider, role=Role.OWNER)
    Membership.objects.create(project=project, user=outsider, role=Role.MEMBER)
secret = item_create(actor=Actor(user=outsider), project=hidden, kind="ticket", fields={{"title": "Secret"}})
shared = knowledge_create(actor=Actor(user=demo), kind="note", title="Court sizes", projects=[project])
both = knowledge_create(actor=Actor(user=outsider), kind="note", title="Both", projects=[project, hidden])
first = Item.objects.filter(project=project).order_by("number").first()
changeset = Changeset.objects.filter(project=project).order_by("number").first()
print(json.dumps({{
    "item": first.key, "item_title": first.title, "item_state": first.state,
    "secret": secret.key, "shared": shared.pk, "both": both.pk,
    "changeset": changeset.number, "changeset_title": changeset.title,
}}))
"""


@pytest.fixture(scope="module")
def world(server: Server) -> dict[str, Any]:
    """A project demo cannot read (HID) with a ticket, knowledge demo reads and knowledge linked to
    HID too; a teammate (a member: no changeset.apply) who signs in."""
    return json.loads(shell(server, WORLD.format(password=PASSWORD)))


def sign_in(browser: Any, server: Server, username: str) -> Any:
    context = browser.new_context(base_url=server.url)
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.goto("/accounts/login/?next=/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{server.url}/")
    return context


@pytest.fixture
def member_page(browser: Any, server: Server, world: dict[str, Any]) -> Iterator[Any]:
    context = sign_in(browser, server, "teammate")
    yield context.pages[0]
    context.close()


def links(node: Any) -> Any:
    return node.locator("a.ref")


def propose(script: Any, keyword: str, title: str) -> str:
    operations = [{"op": "create", "kind": "ticket", "fields": {"title": f"{title} ticket"}}]
    script.on(
        keyword,
        ToolUseReply([ToolCallSpec("propose_changeset", {"title": title, "operations": operations})]),
        TextReply("Proposed for your review."),
    )
    return keyword


def card_number(card: Any) -> str:
    found = re.search(r"#(\d+)", card.locator(".card-title").inner_text())
    assert found is not None
    return found.group(1)


def changeset_status(server: Server, title: str) -> str:
    code = (
        "from tracker.models import Changeset; "
        f"c = Changeset.objects.get(title={title!r}); print(c.status, c.decision_note or '-')"
    )
    return shell(server, code)


def test_only_references_that_exist_and_may_be_read_become_links(page, script, world):
    item, secret = world["item"], world["secret"]
    answer = (
        f"Start with {item} (not `{item}`), then {secret} and DEMO-99999. "
        f"Changeset #{world['changeset']} waits; changeset 99999 does not exist. "
        f"Read knowledge #{world['shared']}, not knowledge #{world['both']}.\n\n"
        f"```\n{item}\n```\n\n[elsewhere](https://example.com/{item}) and [{item}](javascript:alert(1))"
    )
    script.on("links-please", TextReply(answer, chunks=5))
    new_chat(page)
    send(page, "links-please")
    bubble = assistant(page)
    expect(links(bubble)).to_have_count(3)
    expect(links(bubble)).to_have_text(
        [item, f"Changeset #{world['changeset']}", f"knowledge #{world['shared']}"]
    )
    hrefs = [a.get_attribute("href") for a in links(bubble).all()]
    assert hrefs == [
        f"/projects/DEMO/items/{item}/",
        f"/projects/DEMO/changesets/{world['changeset']}/",
        f"/projects/DEMO/knowledge/{world['shared']}/",
    ]
    state = world["item_state"].replace("_", " ")
    expect(links(bubble).first).to_have_attribute("title", f"{item} · {world['item_title']} ({state})")
    expect(links(bubble).nth(2)).to_have_attribute("title", f"Knowledge #{world['shared']} · Court sizes")
    expect(bubble.locator("code a, pre a")).to_have_count(0)  # code stays code
    expect(bubble).to_contain_text(f"then {secret} and DEMO-99999.")  # as plain text
    expect(bubble.locator("a:not(.ref)")).to_have_attribute("href", f"https://example.com/{item}")

    page.reload()  # the transcript links the same ones
    expect(links(assistant(page))).to_have_count(3)


def test_a_key_in_a_tool_fold_and_in_a_card_title_is_a_link(page, script, world):
    item = world["item"]
    script.on(
        "fold-links",
        ToolUseReply([ToolCallSpec("get_item", {"key": item})]),
        TextReply("Read it."),
    )
    new_chat(page)
    send(page, "fold-links")
    expect(assistant(page)).to_have_text("Read it.")
    fold = page.locator("#chat-log details.tool")
    fold.locator("summary").click()
    expect(fold.locator(".tool-input a.ref")).to_have_attribute("href", f"/projects/DEMO/items/{item}/")
    expect(fold.locator(".tool-output a.ref").first).to_have_attribute(
        "href", f"/projects/DEMO/items/{item}/"
    )

    propose(script, "card-title-links", f"Split {item}")
    send(page, "card-title-links")
    card = page.locator("#chat-log .changeset-card")
    expect(card.locator(".card-title a.ref")).to_have_text(item)


def test_apply_on_the_card_applies_and_a_second_tab_follows(page, script, world, browser, server, signed_in):
    propose(script, "apply-here", "Apply from the card")
    new_chat(page)
    send(page, "apply-here")
    card = page.locator("#chat-log .changeset-card")
    expect(card.locator(".card-meta")).to_have_text("1 operation · proposed")
    number = card_number(card)

    other = browser.new_context(base_url=server.url, storage_state=signed_in)
    try:
        second = other.new_page()
        second.goto(page.url)
        second_card = second.locator("#chat-log .changeset-card")
        expect(second_card.get_by_role("button", name=f"Apply changeset #{number}")).to_be_visible()

        card.get_by_role("button", name=f"Apply changeset #{number}").click()
        expect(card.locator(".card-meta")).to_have_text("1 operation · applied")
        expect(card.locator(".decision-line")).to_have_text("Applied by demo")
        expect(card.get_by_role("button")).to_have_count(0)
        assert changeset_status(server, "Apply from the card") == "applied -"

        expect(second_card.locator(".decision-line")).to_have_text("Applied by demo")  # live
        expect(second_card.get_by_role("button")).to_have_count(0)
    finally:
        other.close()


def test_reject_with_a_note_and_a_refusal_shows_on_the_card(page, script, server, world):
    propose(script, "reject-here", "Reject from the card")
    new_chat(page)
    send(page, "reject-here")
    card = page.locator("#chat-log .changeset-card")
    number = card_number(card)
    card.get_by_text("Add a note").click()
    card.get_by_label("Note kept with your decision").fill(f"Not now; see {world['item']}.")
    card.get_by_role("button", name=f"Reject changeset #{number}").click()
    expect(card.locator(".decision-line")).to_have_text("Rejected by demo")
    expect(card.locator(".decision-note")).to_have_text(f"Note: Not now; see {world['item']}.")
    expect(card.locator(".decision-note a.ref")).to_have_text(world["item"])
    expect(card.get_by_role("button")).to_have_count(0)
    assert changeset_status(server, "Reject from the card") == f"rejected Not now; see {world['item']}."


def four_eyes(server: Server, on: bool) -> None:
    shell(
        server,
        "from tracker.models import Project; p = Project.objects.get(key='DEMO'); "
        f"p.settings = {{**p.settings, 'four_eyes': {on}}}; p.save(update_fields=['settings']); print('ok')",
    )


def test_four_eyes_refuses_the_proposer_on_the_card_in_words(browser, server, signed_in, script, world):
    # Its own tab: the refused POST is a console error, which the ``page`` fixture counts as one.
    context = browser.new_context(base_url=server.url, storage_state=signed_in)
    context.set_default_timeout(10_000)
    four_eyes(server, True)
    try:
        page = context.new_page()
        propose(script, "four-eyes-here", "Mine to propose")
        new_chat(page)
        send(page, "four-eyes-here")
        card = page.locator("#chat-log .changeset-card")
        # The card whole and the turn over (as the test of applying waits), then the click: a click
        # while the turn still lays the transcript out can land beside the button on a loaded machine.
        expect(card.locator(".card-meta")).to_have_text("1 operation · proposed")
        expect(page.locator("#chat-log")).to_contain_text("Proposed for your review.")
        apply = card.get_by_role("button", name=re.compile("^Apply changeset"))
        apply.click()
        expect(card.get_by_role("alert")).to_have_text(
            "This project requires four eyes: someone other than the proposer must apply it."
        )
        expect(apply).to_be_enabled()
        expect(card.locator(".card-meta")).to_have_text("1 operation · proposed")
        assert changeset_status(server, "Mine to propose") == "proposed -"
    finally:
        four_eyes(server, False)
        context.close()


def test_a_reader_without_changeset_apply_gets_no_buttons(member_page, script):
    propose(script, "no-apply-here", "A teammate's proposal")
    new_chat(member_page)
    send(member_page, "no-apply-here")
    card = member_page.locator("#chat-log .changeset-card")
    expect(card.locator(".card-meta")).to_have_text("1 operation · proposed")
    expect(card.get_by_role("link", name="Review changeset")).to_be_visible()
    expect(card.get_by_role("button")).to_have_count(0)


@pytest.mark.parametrize("width", ["wide", "375"])
def test_the_chat_with_links_and_decision_buttons_is_accessible(
    browser, server, signed_in, script, world, width
):
    context = browser.new_context(base_url=server.url, storage_state=signed_in, viewport=VIEWPORTS[width])
    context.set_default_timeout(10_000)
    try:
        page = context.new_page()
        propose(script, "a11y-decide", f"Accessible {world['item']}")
        new_chat(page)
        send(page, "a11y-decide")
        card = page.locator("#chat-log .changeset-card")
        expect(card.locator(".card-title a.ref")).to_have_count(1)
        card.get_by_text("Add a note").click()
        expect(card.get_by_role("textbox")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORTS[width]["width"]
        page.screenshot(path=f"/tmp/ballet-links-{width}.png", full_page=True)
        assert_accessible(page)
    finally:
        context.close()
