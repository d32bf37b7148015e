"""Acting where you look, in a real browser: the plan's "New ticket" opened by the key c, then the
new ticket's actions and edit form, wide and at 375 px, light and dark, scanned by axe."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.test_browser_a11y import assert_accessible

pytestmark = [pytest.mark.browser, pytest.mark.pages]


def _no_sideways_scroll(page: Any) -> None:
    wide = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert wide <= 1, f"the page scrolls sideways by {wide}px"


def test_create_with_c_then_edit_and_move_the_ticket(tab):
    width = tab.viewport_size["width"]
    tab.goto("/projects/DEMO/")
    expect(tab.get_by_label("Priority")).to_be_visible()
    tab.locator("body").click(position={"x": 1, "y": 1})
    tab.keyboard.press("c")
    title = tab.get_by_role("textbox", name="Title")
    expect(title).to_be_focused()
    assert_accessible(tab)
    title.fill(f"Quick ticket at {width}")
    title.press("Enter")
    created = tab.locator(".messages a").first
    expect(tab.locator(".messages")).to_contain_text("Applied as changeset")
    created.click()
    expect(tab).to_have_url(re.compile(r"/projects/DEMO/items/DEMO-\d+/$"))
    expect(tab.get_by_role("heading", name="Actions")).to_be_visible()
    tab.get_by_text("Edit ticket").click()
    expect(tab.get_by_label("Acceptance criteria (one per line)")).to_be_visible()
    _no_sideways_scroll(tab)
    assert_accessible(tab)
    tab.get_by_label("Priority").select_option("urgent")
    tab.get_by_role("button", name="Save").click()
    expect(tab.locator(".messages")).to_contain_text("Saved. Applied as changeset")
    expect(tab.locator(".item-badges")).to_contain_text("urgent priority")
    tab.get_by_role("button", name="Mark ready").click()
    expect(tab.locator(".messages")).to_contain_text("Moved to ready.")
    expect(tab.get_by_role("button", name="Claim it myself")).to_be_visible()
    _no_sideways_scroll(tab)
    assert_accessible(tab)
