"""The ``/keys/`` page in a real Chromium against a real server: a key made there (seen once)
works over REST within its scopes until it is revoked there, and then answers 401; a reload
that sends the form again makes no second key."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.fakes.client import Client
from tests.fakes.servers import Server

# What a page shows and does, the same in both modes: the embedded mode runs it (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.pages]


def key_client(server: Server, key: str) -> Client:
    client = Client.__new__(Client)
    client.base_url, client.token = server.url, key
    return client


def test_a_key_made_on_the_page_works_until_it_is_revoked_there(page, server):
    page.goto("/")
    page.get_by_role("link", name="API keys").click()
    page.get_by_label("Name").fill("browser bot")
    page.get_by_role("checkbox", name=re.compile("^ask")).uncheck()
    page.get_by_label("Expires after (days)").fill("7")
    page.get_by_role("button", name="Create key").click()

    key = page.get_by_label("The new key").input_value()
    assert re.fullmatch(r"ballet_[A-Za-z0-9]{12}\.[A-Za-z0-9]{40}", key)
    agent = key_client(server, key)
    assert agent.request("GET", "/api/v1/projects/DEMO/runnable/")[0] == 200
    status, refused = agent.request("POST", "/api/v1/projects/DEMO/questions/", {"text": "Why?"})
    assert (status, refused["error"]["code"]) == (403, "missing_scope")
    page.reload()  # sends the form again: no second key, and the key is not shown again
    expect(page.get_by_role("status")).to_contain_text("That form was sent already")
    expect(page.get_by_label("The new key")).to_have_count(0)
    row = page.get_by_role("region", name="Your keys").get_by_role("row", name=re.compile("browser bot"))
    expect(row).to_have_count(1)
    expect(row.get_by_role("cell", name="read", exact=True)).to_be_visible()

    row.get_by_role("button", name=re.compile("Revoke browser bot")).click()

    expect(page.get_by_role("status")).to_contain_text("Revoked the key browser bot")
    status, refused = agent.request("GET", "/api/v1/projects/DEMO/runnable/")
    assert status == 401
    assert refused["error"]["message"].endswith("was revoked; create another at /keys/.")


def test_the_keys_page_fits_a_phone_its_tables_scroll_in_place(page):
    page.set_viewport_size({"width": 375, "height": 740})
    page.goto("/keys/")
    page.get_by_label("Name").fill("a phone's bot")
    page.get_by_role("button", name="Create key").click()
    expect(page.get_by_role("region", name="Keys bound to DEMO Courtside")).to_be_visible()

    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    tables = page.locator(".table-scroll")
    assert tables.count() == 2
    for n in range(2):
        assert tables.nth(n).evaluate("(node) => node.scrollWidth > node.clientWidth")  # scrolls sideways
