"""The API's doc pages in Chromium with every request to another host refused: Swagger UI and
ReDoc render the schema from Ballet's own files, under their Content-Security-Policy, which
refuses nothing (no console error, no violation: no page asks for another host's asset); the
operations grouped by tag, the open root shown without a lock."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.fakes.servers import Server

pytestmark = pytest.mark.e2e


@pytest.fixture
def offline(browser: Any, server: Server, signed_in: str) -> Iterator[tuple[Any, list[str]]]:
    """A signed-in tab that reaches 127.0.0.1 only; the URLs it was refused, and no script error."""
    context = browser.new_context(base_url=server.url, storage_state=signed_in)
    context.set_default_timeout(15_000)
    refused: list[str] = []

    def local_only(route: Any) -> None:
        url = route.request.url
        if urlsplit(url).hostname in {"127.0.0.1", "localhost"} or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            refused.append(url)
            route.abort()

    context.route("**/*", local_only)
    # What the page's policy refused, which never reaches the route above.
    context.add_init_script(VIOLATIONS)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    yield tab, refused
    violations = tab.evaluate("window.__violations")
    context.close()
    assert violations == []
    assert errors == []


VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""
TAGS = ["root", "projects", "plan", "claims", "changesets", "questions", "planner", "knowledge", "webhooks"]


def test_swagger_ui_renders_every_operation_offline(offline):
    tab, refused = offline

    tab.goto("/api/schema/docs/")

    tab.locator(".opblock").first.wait_for()
    assert tab.locator(".opblock").count() > 40
    assert tab.locator(".opblock-summary-path", has_text="/api/v1/projects/{key}/items/").count() >= 1
    assert tab.get_by_text("The API's root: links to the schema").is_visible()
    shown = [tag.get_attribute("data-tag") for tag in tab.locator(".opblock-tag").all()]
    assert set(TAGS) <= set(shown), shown
    assert "v1" not in shown
    # A lock on every operation that takes a credential, none on the open root.
    root = tab.locator(".opblock", has=tab.locator(".opblock-summary-path[data-path='/api/v1/']"))
    assert root.count() == 1
    assert root.locator(".authorization__btn").count() == 0
    projects = tab.locator(
        ".opblock", has=tab.locator(".opblock-summary-path[data-path='/api/v1/projects/']")
    )
    assert projects.locator(".authorization__btn").count() == 1
    assert refused == []


def test_redoc_renders_the_schema_offline(offline):
    tab, refused = offline

    tab.goto("/api/schema/redoc/")

    tab.get_by_role("heading", name="Ballet API").first.wait_for()
    root = tab.locator("h2", has_text="The API's root: links to the schema")
    root.wait_for()
    assert root.is_visible()
    assert tab.locator("[data-section-id^='operation/']").count() > 40
    for tag in TAGS:
        assert tab.locator(f"[data-section-id='tag/{tag}']").count() == 1, tag
    assert tab.locator("[data-section-id='tag/v1']").count() == 0
    # The menu's foot, where ReDoc's bundle would draw its maker's logo from their CDN.
    credit = tab.get_by_role("link", name="API docs by Redocly")
    credit.wait_for()
    assert credit.locator("img").evaluate_all("imgs => imgs.map(i => i.src.slice(0, 5))") in ([], ["data:"])
    assert refused == []
