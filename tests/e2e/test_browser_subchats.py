"""The line a sub-chat the planner started shows in its parent chat (docs/domain.md#sub-chats), in
a real Chromium fed by a stand-in for the chat's WebSocket (``test_browser_cards.py``): it links to
the sub-chat, says it works while it runs, then how it ended; its title is text, never HTML."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.test_browser_cards import EVIL, assert_inert, open_chat

pytestmark = [pytest.mark.browser, pytest.mark.pages]

CHILD = "44444444-4444-4444-8444-444444444444"
SUBCHAT: dict[str, Any] = {
    "type": "request",
    "id": "55555555-5555-4555-8555-555555555555",
    "kind": "subchat",
    "tool_use_id": "toolu_sub",
    "session": CHILD,
    "title": f"Replan Accounts {EVIL}",
    "brief": "Replan the Accounts epic.",
}


def test_a_subchat_line_links_to_the_subchat_and_says_how_it_ended(page):
    fake = open_chat(page, [SUBCHAT])
    line = page.locator(f'#chat-log .subchat-line[data-subchat="{SUBCHAT["id"]}"]')
    expect(line).to_contain_text("working")
    link = line.locator("a.subchat-link")
    expect(link).to_have_text(f"Replan Accounts {EVIL}")
    assert link.get_attribute("href") == f"/projects/DEMO/chat/{CHILD}/"
    assert page.locator("#chat-log .request-card").count() == 0  # no human answers it
    answer = json.dumps({"session": CHILD, "outcome": "failed", "answer": "", "changesets": []})
    fake.send(
        {"type": "request_resolved", "id": SUBCHAT["id"], "outcome": "answered", "by": "", "answer": answer}
    )
    expect(line).to_contain_text("ended (failed)")
    assert_inert(page)
