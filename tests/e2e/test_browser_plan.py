"""The plan page and a ticket's page in a real browser: wide and at 375 px, light and dark, by
keyboard, and scanned by axe (no serious or critical violation), on the demo's seeded plan."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import VIEWPORTS
from tests.e2e.test_browser_a11y import assert_accessible

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]

MAX_TABS = 120  # the filters and the first ticket are reached well before this


def _shot(page: Any, name: str) -> None:
    width = page.viewport_size["width"]
    scheme = page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'")
    page.screenshot(path=f"/tmp/ballet-{name}-{width}-{scheme}.png", full_page=True)  # to look at


def test_the_plan_as_a_tree_and_as_a_board_is_accessible(tab):
    tab.goto("/projects/DEMO/")
    expect(tab.get_by_role("heading", name="Milestones, epics and tickets")).to_be_visible()
    expect(tab.locator(".tree .ticket-link").first).to_be_visible()
    expect(tab.get_by_role("heading", name="Dependency graph")).to_be_attached()
    _shot(tab, "plan")
    assert_accessible(tab)
    tab.get_by_role("link", name="Board by state").click()
    expect(tab.get_by_role("heading", name="Board by state")).to_be_visible()
    expect(tab.locator(".board-column")).to_have_count(6)
    _shot(tab, "board")
    assert_accessible(tab)


def test_a_bad_filter_and_the_runnable_view_are_accessible(tab):
    tab.goto("/projects/DEMO/?state=nope")
    expect(tab.get_by_role("alert")).to_contain_text("Unknown state “nope”")
    assert_accessible(tab)
    tab.get_by_role("link", name=re.compile("Runnable now")).click()
    expect(tab.get_by_text("Showing the runnable tickets")).to_be_visible()
    assert_accessible(tab)


def test_a_ticket_page_is_accessible(tab):
    tab.goto("/projects/DEMO/")
    tab.locator(".tree .ticket-link").first.click()
    expect(tab).to_have_url(re.compile(r"/projects/DEMO/items/DEMO-\d+/$"))
    expect(tab.get_by_role("heading", name="Description")).to_be_visible()
    expect(tab.get_by_role("heading", name="Blocked by")).to_be_visible()
    _shot(tab, "ticket")
    assert_accessible(tab)


def _tab_until(page: Any, selector: str) -> None:
    """Press Tab until the focused element matches ``selector``; fail after :data:`MAX_TABS`."""
    for _ in range(MAX_TABS):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement?.matches(s) ?? false", selector):
            return
    raise AssertionError(f"Tab never reached {selector}")


def test_the_filters_and_a_ticket_are_reached_and_opened_by_keyboard(page):
    page.set_viewport_size(VIEWPORTS["wide"])
    page.goto("/projects/DEMO/")
    _tab_until(page, "#plan-q")
    page.keyboard.type("booking")
    _tab_until(page, ".plan-filters button[type=submit]")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"\?q=booking"))
    expect(page.get_by_role("heading", name="Best matches for “booking”")).to_be_visible()
    page.goto("/projects/DEMO/")
    _tab_until(page, ".ticket-link")
    key = page.evaluate("document.activeElement.querySelector('.key').textContent")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"/projects/DEMO/items/{key}/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text(key)
