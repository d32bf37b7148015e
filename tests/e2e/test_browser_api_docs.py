"""The API's doc pages in Chromium with every request to another host refused: Swagger UI and
ReDoc render the schema from Ballet's own files, under their Content-Security-Policy."""

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
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    yield tab, refused
    context.close()
    # ReDoc's bundle draws its maker's logo from their CDN in the menu's footer; the page's policy
    # stops it before any request leaves, and the link's text stands without it.
    assert [e for e in errors if "cdn.redoc.ly/redoc/logo-mini.svg" not in e] == []


def test_swagger_ui_renders_every_operation_offline(offline):
    tab, refused = offline

    tab.goto("/api/schema/docs/")

    tab.locator(".opblock").first.wait_for()
    assert tab.locator(".opblock").count() > 40
    assert tab.locator(".opblock-summary-path", has_text="/api/v1/projects/{key}/items/").count() >= 1
    assert tab.get_by_text("The API's root: links to the schema").is_visible()
    assert refused == []


def test_redoc_renders_the_schema_offline(offline):
    tab, refused = offline

    tab.goto("/api/schema/redoc/")

    tab.get_by_role("heading", name="Ballet API").first.wait_for()
    root = tab.locator("h2", has_text="The API's root: links to the schema")
    root.wait_for()
    assert root.is_visible()
    assert tab.locator("[data-section-id^='operation/']").count() > 40
    assert refused == []
