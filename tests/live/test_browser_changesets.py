"""A changeset card follows the admin's decision live (SPEC § 8 ``changeset``, § 9), in a real Chromium.

The chat proposes a changeset; a reviewer decides in another browser context, in the admin,
and the chat's card changes without any new message — and still shows the decision after
a reload.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakes.messages_api import TextReply, ToolCallSpec, ToolUseReply
from tests.live.chat_page import assistant, new_chat, send

pytestmark = pytest.mark.browser

LIVE_MS = 2_000  # the bound: the card changes within 2 s of the decision


def propose(page: Any, script: Any, keyword: str, title: str) -> Any:
    operations = [{"op": "create", "kind": "ticket", "fields": {"title": f"{title} ticket"}}]
    script.on(
        keyword,
        ToolUseReply([ToolCallSpec("propose_changeset", {"title": title, "operations": operations})]),
        TextReply(f"Proposed {title}."),
    )
    new_chat(page)
    send(page, f"{keyword}: please")
    expect(assistant(page)).to_have_text(f"Proposed {title}.")
    card = page.locator("#chat-log .changeset-card")
    expect(card.locator(".card-meta")).to_have_text("1 operation · proposed")
    return card


def reviewer(browser: Any, server: Any, signed_in: str, href: str) -> Any:
    """The review page, in a browser context of its own (another window, as a reviewer has)."""
    context = browser.new_context(base_url=server.url, storage_state=signed_in)
    review = context.new_page()
    review.goto(href)
    return review


def test_a_card_shows_the_apply_within_two_seconds_without_a_new_message(
    page, script, browser, server, signed_in
):
    card = propose(page, script, "live-apply", "Live apply")
    review = reviewer(browser, server, signed_in, card.get_by_role("link").get_attribute("href"))
    try:
        review.locator("[name=apply]").click()
        expect(review.locator(".messagelist")).to_contain_text("applied")

        expect(card.locator(".card-meta")).to_have_text("1 operation · applied", timeout=LIVE_MS)
        expect(card.locator(".decision-line")).to_have_text("Applied by demo")
        expect(card).to_have_class("changeset-card status-applied")
        assert page.locator("#chat-log .entry").count() == 2  # no new message brought it

        page.reload()  # a reopened chat shows the decision as it stands
        card = page.locator("#chat-log .changeset-card")
        expect(card.locator(".card-meta")).to_have_text("1 operation · applied")
        expect(card.locator(".decision-line")).to_have_text("Applied by demo")
    finally:
        review.context.close()


def test_a_rejection_shows_the_reviewers_note_inert(page, script, browser, server, signed_in):
    card = propose(page, script, "live-reject", "Live reject")
    review = reviewer(browser, server, signed_in, card.get_by_role("link").get_attribute("href"))
    note = 'Not this sprint <img src=x onerror="window.__pwned=1">'
    try:
        review.get_by_label("Note for the proposer").fill(note)
        review.locator("[name=reject]").click()
        expect(review.locator(".messagelist")).to_contain_text("rejected")

        expect(card.locator(".card-meta")).to_have_text("1 operation · rejected", timeout=LIVE_MS)
        expect(card.locator(".decision-line")).to_have_text("Rejected by demo")
        expect(card.locator(".decision-note")).to_have_text(f"Note: {note}")
        assert card.locator("img").count() == 0
        assert page.evaluate("window.__pwned") is None
    finally:
        review.context.close()
