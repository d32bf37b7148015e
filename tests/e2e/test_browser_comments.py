"""Comments where the ticket is seen, in a real browser: write one with Markdown, a long line of
code and a mention, find it rendered (never raw) under its anchor, watch and unwatch; wide and at
375 px, light and dark, nothing scrolls sideways and axe finds no serious violation."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.test_browser_a11y import assert_accessible

pytestmark = [pytest.mark.browser, pytest.mark.pages]
_runs = itertools.count(1)


def _no_sideways_scroll(page: Any) -> None:
    wide = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert wide <= 1, f"the page scrolls sideways by {wide}px"


def test_comment_with_markdown_and_a_mention_then_watch(tab):
    tab.goto("/projects/DEMO/")
    ticket = tab.locator(".ticket-row a.ticket-link").first.get_attribute("href")
    assert ticket
    tab.goto(ticket)
    run = next(_runs)
    box = tab.get_by_label(re.compile("^Your comment"))
    code, table = f"    {'x' * 300}", f"| a | b |\n|---|---|\n| {'y' * 200} | z |"
    box.fill(f"**Run {run}** for @agent <script>alert(1)</script>\n\n{code}\n\n{table}\n")
    tab.get_by_role("button", name="Comment", exact=True).click()
    expect(tab.locator(".messages")).to_contain_text("was added")
    expect(tab).to_have_url(re.compile(r"#comment-\d+$"))
    comment = tab.locator(".comment").last
    expect(comment.locator("strong", has_text=f"Run {run}")).to_be_visible()
    expect(comment.locator(".mention")).to_have_text("@agent")
    expect(comment).to_contain_text("<script>alert(1)</script>")
    _no_sideways_scroll(tab)
    assert_accessible(tab)
    watch = tab.get_by_role("button", name=re.compile(r"^(Watch|Unwatch) "))
    before = watch.inner_text()
    watch.click()
    expect(tab.locator(".messages")).to_contain_text("watch")
    after = tab.get_by_role("button", name=re.compile(r"^(Watch|Unwatch) ")).inner_text()
    assert after != before
    _no_sideways_scroll(tab)
