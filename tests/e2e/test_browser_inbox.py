"""The inbox in a real Chromium: the header's count follows a new entry when the window gets the
focus back (``planner/static/planner/inbox_count.js``), the page dismisses an entry without script
help, and nothing scrolls sideways at 375 px."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import shell

pytestmark = [pytest.mark.browser, pytest.mark.pages]


def notify(server: Any, title: str) -> str:
    """A stored mention for ``demo``; its entry's id."""
    return shell(
        server,
        "from django.contrib.auth.models import User; from tracker.models import Notice; "
        f"n = Notice.objects.create(user=User.objects.get(username='demo'), kind='mention', title={title!r}, "
        "url='/'); print(f'notice-{n.pk}')",
    )


def header_count(page: Any) -> int:
    badge = page.locator("header .inbox-count")
    return int(badge.text_content() or 0)


def test_the_header_count_follows_the_inbox_and_dismiss_puts_an_entry_away(page, server):
    page.goto("/inbox/")
    before = header_count(page)
    entry = notify(server, "Live count check")
    page.evaluate("window.dispatchEvent(new Event('focus'))")
    expect(page.locator("header .inbox-count")).to_have_text(str(before + 1))
    expect(page.locator("[data-inbox-live]")).to_have_text(f"{before + 1} waiting in your inbox")

    page.reload()
    row = page.locator(f"li#{entry}")
    expect(row).to_contain_text("Mention")
    expect(row.get_by_role("link", name="Live count check")).to_have_attribute("href", "/")
    row.get_by_role("button", name=re.compile("^Dismiss")).click()
    page.wait_for_url(re.compile(r"/inbox/$"))
    expect(page.locator(f"li#{entry}")).to_have_count(0)
    expect(page.get_by_role("status").first).to_contain_text("Dismissed")
    assert header_count(page) == before


def test_the_inbox_fits_a_phone(tab, server):
    notify(server, "A rather long title " * 8)
    tab.goto("/inbox/")
    expect(tab.get_by_role("heading", name="Inbox")).to_be_visible()
    assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
