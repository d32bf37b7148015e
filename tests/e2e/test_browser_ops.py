"""In Chromium: the changeset review's validation states are readable (WCAG AA, not by color alone)
in Django admin's light and dark themes; the project page's usage chart fits a phone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.messages_api import FakeMessagesAPI
from tests.fakes.servers import Deployment, Server

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]

PORT = 8621  # this suite's own port

PROPOSE = """
import json
from django.contrib.auth.models import User
from tracker.models import Item, Project
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose, changeset_reject
from tracker.services.items import item_update

project = Project.objects.get(key="DEMO")
actor = Actor(user=User.objects.get(username="demo"))
item = Item.objects.filter(project=project, kind="ticket").order_by("pk").first()

def propose(title):
    fields = {"title": title}
    operations = [{"op": "update", "item": item.key, "base_version": item.version, "fields": fields}]
    return changeset_propose(actor=actor, project=project, title=title, operations=operations)

stale = propose("Stale rename")
item = item_update(actor=actor, item=item, fields={"description": "Changed meanwhile"})
valid = propose("Fresh rename")
rejected = changeset_reject(actor=actor, changeset=propose("Rejected rename"), note="No")
print(json.dumps({"valid": valid.pk, "invalid": stale.pk, "not-checked": rejected.pk}))
"""


@pytest.fixture(scope="module")
def server(fake_api: FakeMessagesAPI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("ops")
    deployment = Deployment.create(home, fake_api.base_url)
    running = Server(deployment, port=PORT, log=home / "daphne.log")
    try:
        yield running.start()
    finally:
        running.stop()
        deployment.drop()


@pytest.fixture(scope="module")
def changesets(server: Server) -> dict[str, int]:
    return json.loads(server.deployment.manage("shell", "-c", PROPOSE).strip().splitlines()[-1])


def luminance(rgb: list[float]) -> float:
    def channel(value: float) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(v) for v in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: list[float], b: list[float]) -> float:
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


COLORS = """(selector) => {
  const rgb = (text) => text.match(/[\\d.]+/g).map(Number);
  const box = document.querySelector(selector);
  const style = getComputedStyle(box);
  const page = getComputedStyle(document.body).backgroundColor;
  return {fg: rgb(style.color), bg: rgb(style.backgroundColor), page: rgb(page), text: box.innerText};
}"""


def state_colors(
    browser: Any, server: Server, signed_in: str, url: str, scheme: str, theme: str | None
) -> dict:
    context = browser.new_context(base_url=server.url, storage_state=signed_in, color_scheme=scheme)
    try:
        page = context.new_page()
        if theme is not None:  # the admin's theme toggle keeps its choice in localStorage
            page.add_init_script(f"localStorage.setItem('theme', '{theme}')")
        page.goto(url)
        return page.evaluate(COLORS, ".review .validation-state")
    finally:
        context.close()


WORDS = {"valid": "✓Valid against", "invalid": "✗Invalid against", "not-checked": "\u2013Not checked:"}


@pytest.mark.parametrize("state", ["valid", "invalid", "not-checked"])
@pytest.mark.parametrize(
    ("scheme", "theme", "dark"),
    [("light", None, False), ("dark", None, True), ("light", "dark", True), ("dark", "light", False)],
)
def test_validation_states_are_readable_in_both_themes(
    browser, server, signed_in, changesets, state, scheme, theme, dark
):
    url = f"/admin/tracker/changeset/{changesets[state]}/change/"

    seen = state_colors(browser, server, signed_in, url, scheme, theme)

    assert (luminance(seen["page"]) < 0.1) is dark  # the theme asked for is the one shown
    assert contrast(seen["fg"], seen["bg"]) >= 4.5, seen
    assert seen["bg"][3:] != [0], "the state has a background of its own"
    assert seen["text"].replace(" ", "").casefold().startswith(WORDS[state].replace(" ", "").casefold())


def test_the_usage_chart_fits_a_phone(browser, server, signed_in):
    context = browser.new_context(
        base_url=server.url, storage_state=signed_in, viewport={"width": 375, "height": 800}
    )
    try:
        page = context.new_page()
        page.goto("/projects/DEMO/chat/")
        chart = page.locator(".usage svg[role=img]")
        box = chart.bounding_box()
        assert box is not None
        assert 300 <= box["width"] <= 375
        assert box["height"] > 40
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
        assert page.locator(".usage-day").count() == 30
        assert page.get_by_role("img", name="Model tokens by day, last 30 days").is_visible()
    finally:
        context.close()
