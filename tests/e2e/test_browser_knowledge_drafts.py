"""A long chat's compaction leaves knowledge drafts under its notice, in a real Chromium: the owner
publishes one and discards another, every tab follows live, a reload keeps them, the published
entry is ordinary knowledge; accessible and without sideways scroll at 375 px (SPEC § 6.4)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.chat_page import assistant, new_chat, send
from tests.e2e.conftest import VIEWPORTS
from tests.e2e.test_browser_a11y import assert_accessible
from tests.fakes.messages_api import TextReply, ToolCallSpec, ToolUseReply, Usage

pytestmark = [pytest.mark.browser, pytest.mark.pages]

LIVE_MS = 2_000
SUMMARY = """- **Goal and context**: A weekly export of the bookings for the club's accountant (DEMO-15).
- **Decisions and agreements**:
  - The export is a CSV with one row per booking, **semicolon**-separated, as the accountant's \
tool reads (DEMO-15).
- **Constraints**: None.
- **Plan facts**: DEMO-15 is ready.
- **Changesets**: none.
- **Open questions and next steps**: None."""


def drafting(request: dict[str, Any]) -> Any:
    if "You compress a planning conversation" in json.dumps(request.get("system")):
        return TextReply(SUMMARY)
    if "<conversation-summary>" in json.dumps(request.get("messages")):
        return TextReply("Second answer, after the summary.")
    return TextReply("First answer.", usage=Usage(150_000, 10))


def test_the_owner_publishes_and_discards_drafts_live_in_every_tab(page, script, browser, server, signed_in):
    script.on("draft-it", drafting)
    new_chat(page)
    send(page, "draft-it: first")
    expect(assistant(page)).to_have_text("First answer.")
    send(page, "draft-it: second")
    expect(assistant(page).nth(1)).to_have_text("Second answer, after the summary.")
    drafts = page.locator("#chat-log .notice-line.compacted + .drafts-box .draft-card")
    expect(drafts).to_have_count(2)  # the goal and the decision; "None." sections are not drafted
    expect(drafts.nth(1).locator(".card-meta")).to_have_text("Decision · DEMO-15 · Draft — only you see it")
    drafts.nth(1).locator("summary").click()  # the draft reads as Markdown, not as typed
    expect(drafts.nth(1).locator("strong")).to_have_text("semicolon")

    other = page.context.new_page()  # a second tab of the same chat
    other.goto(page.url)
    other_drafts = other.locator("#chat-log .drafts-box .draft-card")
    expect(other_drafts).to_have_count(2)

    drafts.nth(1).get_by_role("button", name=re.compile("^Publish")).click()
    published = drafts.nth(1).locator(".card-decision")
    expect(published).to_contain_text("Published as knowledge #")
    expect(other_drafts.nth(1).locator(".card-decision")).to_contain_text(
        "Published as knowledge #", timeout=LIVE_MS
    )
    other_drafts.nth(0).get_by_role("button", name=re.compile("^Discard")).click()
    expect(drafts.nth(0).locator(".card-decision")).to_have_text(
        "Discarded: it never becomes knowledge.", timeout=LIVE_MS
    )
    expect(drafts.nth(0).get_by_role("button")).to_have_count(0)
    other.close()

    page.reload()  # the transcript carries the drafts as they stand
    expect(drafts).to_have_count(2)
    expect(drafts.nth(0).locator(".card-meta")).to_have_text("Note · DEMO-15 · Discarded")
    expect(published).to_contain_text("Published as knowledge #")
    assert_accessible(page)
    chat_url = page.url
    published.get_by_role("link").click()  # ordinary knowledge: its page, linked to the ticket
    expect(page.get_by_role("heading", level=1)).to_contain_text("Decisions")
    expect(page.locator("main")).to_contain_text("DEMO-15")

    narrow = browser.new_context(base_url=server.url, storage_state=signed_in, viewport=VIEWPORTS["375"])
    try:
        phone = narrow.new_page()
        phone.goto(chat_url)
        expect(phone.locator("#chat-log .drafts-box .draft-card")).to_have_count(2)
        phone.locator("#chat-log .drafts-box summary").first.click()
        assert phone.evaluate("document.documentElement.scrollWidth") <= 375
    finally:
        narrow.close()


def test_a_knowledge_write_shows_its_card_and_diff_live_and_after_a_reload(page, script):
    create = {"kind": "note", "title": "Court lights", "body": "Lights go off at **22:00**."}
    script.on(
        "note-it",
        ToolUseReply([ToolCallSpec("create_knowledge", create)]),
        TextReply("Noted."),
    )
    new_chat(page)
    send(page, "note-it: the lights")
    expect(assistant(page)).to_have_text("Noted.")
    card = page.locator("#chat-log .knowledge-card")
    expect(card.locator(".card-kicker")).to_have_text("Knowledge written")
    expect(card.locator(".card-meta")).to_have_text("Note · v1")
    expect(card.locator("strong")).to_have_text("22:00")  # a new entry reads as Markdown
    entry = card.get_by_role("link", name="Court lights").get_attribute("href") or ""
    entry_id = int(entry.rstrip("/").rsplit("/", 1)[1])
    update = {"id": entry_id, "version": 1, "body": "Lights go off at **23:00**."}
    script.on(
        "change-it",
        ToolUseReply([ToolCallSpec("update_knowledge", update)]),
        TextReply("Changed."),
    )
    send(page, "change-it: later")
    expect(assistant(page).nth(1)).to_have_text("Changed.")
    expect(card).to_have_count(2)
    changed = card.nth(1)
    expect(changed.locator(".card-meta")).to_have_text("Note · v2 (was v1)")
    expect(changed.locator("del")).to_contain_text("Lights go off at **22:00**.")
    expect(changed.locator("ins")).to_contain_text("Lights go off at **23:00**.")
    page.reload()
    expect(card).to_have_count(2)
    expect(card.nth(1).locator("ins")).to_contain_text("23:00")
    expect(card.nth(0).locator(".card-meta")).to_have_text("Note · v1")  # each card its own revision
