"""The settings page and the knowledge pages in a browser: no sideways scroll at 375 px, an axe scan
without serious or critical violations (wide, 375 px, dark), and an entry written and edited by
keyboard-reachable forms, its Markdown rendered."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.test_browser_a11y import assert_accessible

pytestmark = [pytest.mark.browser, pytest.mark.pages]
MARKDOWN = "# Why\n\n**Because** DEMO-1 says so.\n\n| a | b |\n|---|---|\n| 1 | 2 |"


def fits(tab) -> None:
    width = tab.viewport_size["width"]
    assert tab.evaluate("document.documentElement.scrollWidth") <= width, tab.url


def test_the_settings_page_fits_and_is_accessible(tab):
    tab.goto("/projects/DEMO/settings/")
    expect(tab.get_by_role("heading", name="The project's settings")).to_be_visible()
    fits(tab)
    assert_accessible(tab)
    tab.get_by_label("Claim lease (minutes)").fill("45")
    tab.get_by_role("button", name="Save the settings").click()
    expect(tab.get_by_text("The settings were saved.")).to_be_visible()
    expect(tab.locator("#claim_minutes-state")).to_contain_text("45")
    expect(tab.locator("#claim_minutes-state")).to_contain_text("this project's own")
    fits(tab)


def test_an_entry_is_written_edited_and_rendered(tab):
    tab.goto("/projects/DEMO/knowledge/")
    tab.get_by_text("New entry").click()
    tab.get_by_label("Kind", exact=True).select_option("decision")
    tab.get_by_label("Title", exact=True).fill("Browsers render Markdown")
    tab.get_by_label("Text (Markdown)").fill(MARKDOWN)
    fits(tab)
    assert_accessible(tab)
    tab.get_by_role("button", name="Write the entry").click()
    body = tab.locator(".entry-body")
    expect(body.locator("h1")).to_have_text("Why")
    expect(body.locator("strong")).to_have_text("Because")
    expect(body.get_by_role("link", name="DEMO-1")).to_have_attribute("href", "/projects/DEMO/items/DEMO-1/")
    tab.get_by_text("Edit this entry").click()
    tab.get_by_label("Text (Markdown)").fill("*Edited*")
    tab.get_by_role("button", name="Save", exact=True).click()
    expect(tab.locator(".entry-body em")).to_have_text("Edited")
    fits(tab)
    assert_accessible(tab)
