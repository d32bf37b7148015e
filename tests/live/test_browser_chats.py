"""Chats in a real Chromium (docs/protocol.md): rename and archive from the chat page, the title the
planner proposes after the first turn arriving live, and the chat list's search.

The model is the fake Messages API (``conftest.Script``); the title request is answered from
:meth:`conftest.Script.titled` for the keyword of the chat's first message.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakes.messages_api import TextReply
from tests.live.chat_page import CHAT_URL, assistant, new_chat, send

pytestmark = pytest.mark.browser

LIST_URL = re.compile(r"/projects/DEMO/chat/$")


def heading(page: Any) -> Any:
    return page.locator("#chat-title")


def rename(page: Any, title: str) -> None:
    page.get_by_role("button", name="Rename").click()
    box = page.get_by_label("Chat title", exact=True)
    expect(box).to_be_focused()
    box.fill(title)
    box.press("Enter")


def test_the_planners_title_appears_after_the_first_turn_without_a_reload(page, script):
    script.on("titles-first", TextReply("We can plan the spring release in three steps."))
    script.titled("titles-first", TextReply('"Spring release plan."'))
    new_chat(page)
    page.evaluate("window.__sameDocument = true")
    send(page, "titles-first: how do we plan the spring release?")
    expect(assistant(page)).to_have_text("We can plan the spring release in three steps.")
    expect(heading(page)).to_have_text("Spring release plan")  # untrusted text, trimmed
    expect(page).to_have_title(re.compile(r"^Spring release plan · DEMO"))
    assert page.evaluate("window.__sameDocument") is True  # no reload brought it
    page.reload()
    expect(heading(page)).to_have_text("Spring release plan")


def test_rename_in_place_persists_and_esc_cancels(page):
    new_chat(page)
    rename(page, "  Quarterly capacity  ")
    expect(heading(page)).to_have_text("Quarterly capacity")
    expect(page.get_by_label("Chat title", exact=True)).to_be_hidden()
    expect(page).to_have_title(re.compile(r"^Quarterly capacity · DEMO"))

    page.get_by_role("button", name="Rename").click()
    page.get_by_label("Chat title", exact=True).fill("Not this one")
    page.get_by_label("Chat title", exact=True).press("Escape")
    expect(heading(page)).to_have_text("Quarterly capacity")
    expect(page.get_by_role("button", name="Rename")).to_be_focused()

    rename(page, "   ")  # refused: the error is shown, the input stays open
    expect(page.locator("#rename-error")).to_have_text("Write a title.")
    expect(page.get_by_label("Chat title", exact=True)).to_have_attribute("aria-invalid", "true")
    page.get_by_role("button", name="Cancel").click()
    expect(heading(page)).to_have_text("Quarterly capacity")

    page.reload()
    expect(heading(page)).to_have_text("Quarterly capacity")
    page.goto("/projects/DEMO/chat/")
    expect(page.get_by_role("link", name=re.compile("Quarterly capacity"))).to_be_visible()


def test_archive_asks_first_then_the_chat_leaves_the_list(page, script):
    script.on("archive-me", TextReply("Noted."))
    new_chat(page)
    send(page, "archive-me: a chat to archive")
    expect(assistant(page)).to_have_text("Noted.")
    chat_url = page.url
    rename(page, "Archived capacity talk")
    expect(heading(page)).to_have_text("Archived capacity talk")

    page.get_by_role("button", name="Archive", exact=True).click()
    expect(page.get_by_text("Archive this chat?")).to_be_visible()
    page.get_by_role("button", name="Keep it").click()
    expect(page.get_by_text("Archive this chat?")).to_be_hidden()
    page.reload()
    expect(heading(page)).to_have_text("Archived capacity talk")  # still here: nothing archived

    page.get_by_role("button", name="Archive", exact=True).click()
    page.get_by_role("button", name="Yes, archive it").click()
    page.wait_for_url(LIST_URL)
    expect(page.get_by_role("heading", name="Planner chats")).to_be_visible()
    expect(page.get_by_role("link", name=re.compile("Archived capacity talk"))).to_have_count(0)
    page.reload()
    expect(page.get_by_role("link", name=re.compile("Archived capacity talk"))).to_have_count(0)

    page.goto(chat_url)  # the transcript stays readable by its address
    expect(assistant(page)).to_have_text("Noted.")
    expect(page.get_by_text("This chat was archived on")).to_be_visible()
    expect(page.get_by_label("Message to the planner")).to_have_count(0)
    expect(page.get_by_role("button", name="Archive", exact=True)).to_have_count(0)


def test_search_the_chat_list_by_title(page):
    for title in ("Search target alpha", "Search target beta", "Something else"):
        new_chat(page)
        rename(page, title)
        expect(heading(page)).to_have_text(title)
    page.goto("/projects/DEMO/chat/")
    page.get_by_label("Search chats by title").fill("TARGET")
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"\?q=TARGET$"))
    expect(page.get_by_role("link", name=re.compile("Search target"))).to_have_count(2)
    expect(page.get_by_role("link", name=re.compile("Something else"))).to_have_count(0)

    page.get_by_label("Search chats by title").fill("no such chat")
    page.get_by_label("Search chats by title").press("Enter")
    expect(page.get_by_text("No chat in DEMO has a title containing “no such chat”.")).to_be_visible()
    page.get_by_role("link", name="Show all chats").click()
    expect(page.get_by_role("link", name=re.compile("Something else"))).to_be_visible()
    assert CHAT_URL.search(page.url) is None
