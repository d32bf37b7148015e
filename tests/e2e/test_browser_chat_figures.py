"""What the chat shows besides the conversation, kept current, in a real Chromium (docs/protocol.md).

A changeset card follows the admin's decision live: the chat proposes a changeset, a reviewer
decides in the admin's review (kept for operators) in another browser context, and the card
changes without any new message — and still shows the decision after a reload. The context and
spend figures are those of the usage records.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.chat_page import assistant, new_chat, send
from tests.e2e.conftest import shell
from tests.fakes.messages_api import TextReply, ToolCallSpec, ToolUseReply, Usage

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]

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


def reviewer(browser: Any, server: Any, signed_in: str, title: str) -> Any:
    """The admin's review of the changeset ``title``, in a browser context of its own (another
    window, as a reviewer has)."""
    code = f"from tracker.models import Changeset; print(Changeset.objects.get(title={title!r}).pk)"
    context = browser.new_context(base_url=server.url, storage_state=signed_in)
    review = context.new_page()
    review.goto(f"/admin/tracker/changeset/{shell(server, code)}/change/")
    return review


def test_a_card_shows_the_apply_within_two_seconds_without_a_new_message(
    page, script, browser, server, signed_in
):
    card = propose(page, script, "live-apply", "Live apply")
    review = reviewer(browser, server, signed_in, "Live apply")
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
    review = reviewer(browser, server, signed_in, "Live reject")
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


def test_the_context_and_spend_figures_are_those_of_the_usage_records(page, script):
    script.on("count-me", TextReply("Counted.", usage=Usage(12_000, 345)))
    new_chat(page)
    send(page, "count-me: how big is this?")
    expect(assistant(page)).to_have_text("Counted.")

    # The provider reported 12,000 + 345 tokens for the answer, and nothing came after it.
    expect(page.locator("#context-figure")).to_have_text(
        "12,345 of 100,000 tokens (12%) before the planner summarizes"
    )
    expect(page.locator("#context-meter")).to_have_attribute("value", "0.12345")
    today = page.request.get("/api/v1/projects/DEMO/usage/").json()["today"]
    figure = page.locator("#spend-figure")
    cached = f" ({today['cached_tokens']:,} cached)" if today["cached_tokens"] else ""
    expect(figure).to_contain_text(f"{today['tokens']:,} tokens{cached} · ≈ ${today['estimated_cost']:.2f}")
    # This chat: 12,000 input and 345 output tokens at 3 and 15 USD per million: $0.04.
    # (and the chat's title, proposed after the answer: 30 tokens more once it is metered)
    expect(figure).to_contain_text(re.compile(r"this chat 12,3[47]5 tokens, ≈ \$0\.04"))

    page.reload()  # the transcript carries the same figures
    expect(page.locator("#context-figure")).to_have_text(
        "12,345 of 100,000 tokens (12%) before the planner summarizes"
    )


def folding(request: dict[str, Any]) -> Any:
    """A first answer that fills the context, the summary the planner then asks for, and the answer
    sent after that summary."""
    if "You compress a planning conversation" in json.dumps(request.get("system")):
        return TextReply("The human asked to fold it.")
    if "<conversation-summary>" in json.dumps(request.get("messages")):
        return TextReply("Second answer, after the summary.")
    return TextReply("First answer.", usage=Usage(150_000, 10))


def test_a_compaction_shows_its_notice_live_and_after_a_reload(page, script):
    script.on("fold-it", folding)
    new_chat(page)
    send(page, "fold-it: first")
    expect(assistant(page)).to_have_text("First answer.")
    send(page, "fold-it: second")  # over the 100,000 tokens: the planner summarizes first
    expect(assistant(page).nth(1)).to_have_text("Second answer, after the summary.")
    notice = page.locator("#chat-log .notice-line.compacted")
    expect(notice).to_have_text("Earlier conversation summarized")  # from the compacted frame

    page.reload()  # from the transcript: the notice follows the last message the summary covers
    expect(assistant(page)).to_have_count(2)
    expect(notice).to_have_text("Earlier conversation summarized")
    covered = page.locator("#chat-log .entry.assistant").first.get_attribute("data-seq")
    expect(notice).to_have_attribute("data-seq", covered or "")
