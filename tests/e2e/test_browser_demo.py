"""The demo planner in a real Chromium (docs/architecture.md#the-demo-planner): a server whose
projects use the ``demo`` provider, as a fresh ``make run`` without a key does. The chat says so,
links its owner to the credential, and the scripted planner answers through the real tools."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.chat_page import assistant, new_chat, send
from tests.fakes.messages_api import FakeMessagesAPI
from tests.fakes.servers import Server, served

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]

NOTICE = "Demo planner: scripted, no AI model. Set a credential to use Claude."


@pytest.fixture(scope="module")
def server(fake_api: FakeMessagesAPI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose planner is the demo's (the fake Messages API is never called)."""
    extra = {"BALLET_PLANNER_PROVIDER": "demo"}
    with served(tmp_path_factory.mktemp("demo"), fake_api.base_url, extra_env=extra) as server:
        yield server


def test_the_demo_answers_with_the_real_tools_and_says_what_it_is(tab: Any, fake_api: Any) -> None:
    new_chat(tab)
    notice = tab.locator("#demo-notice")
    expect(notice).to_contain_text(NOTICE)
    expect(notice.get_by_role("link", name="Set the credential")).to_have_attribute(
        "href", "/projects/DEMO/settings/"
    )
    send(tab, "What can run next?")
    expect(assistant(tab).last).to_contain_text("run now (ready, every blocker done)")
    expect(assistant(tab).last.locator("a", has_text=re.compile(r"^DEMO-\d+$")).first).to_be_visible()
    fold = tab.locator("#chat-log details.tool")
    expect(fold.locator(".tool-label")).to_have_text("Looked up runnable tickets")
    expect(fold.locator(".tool-status")).to_have_text("")  # done: the label says what happened

    send(tab, "Add a ticket for a CSV export of invoices")
    expect(tab.locator("#chat-log .changeset-card .card-title")).to_contain_text(
        "Add a ticket: A CSV export of invoices"
    )
    expect(assistant(tab).last).to_contain_text("I proposed changeset #")
    assert tab.evaluate("document.documentElement.scrollWidth") <= tab.viewport_size["width"]
    assert fake_api.requests == []


def test_the_notice_leads_the_owner_to_set_the_credential(page: Any) -> None:
    new_chat(page)
    page.locator("#demo-notice").get_by_role("link", name="Set the credential").click()
    page.wait_for_url(re.compile(r"/projects/DEMO/settings/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("settings")
    expect(page.locator("#credential-state")).to_contain_text("demo planner")
    box = page.get_by_label("Anthropic API key")
    expect(box).to_have_attribute("type", "password")
    expect(box).to_have_value("")
